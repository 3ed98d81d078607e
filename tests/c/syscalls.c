/*
 * System calls writing into protected memory, from C: read(2) from a pipe, pread(2) from a
 * file and recv(2) from a socket pair, each into 4 pages of a protected buffer.
 *
 * ickpt_read / ickpt_pread / ickpt_recv work with every backend. The plain calls work with
 * uffd and uffd-async; with mprotect they fail with EFAULT (the kernel cannot take the write
 * fault for the application), consume nothing, and ickpt_prepare_write fixes that. Every
 * checkpoint then stores exactly the 4 pages written, and a restore brings the bytes back.
 */
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>

#define PAGES 4

static size_t ps;

/* Fill `dst` from a fresh source of `fill` bytes through call `which` (0 read, 1 pread,
 * 2 recv), wrapped by ickpt or plain. Returns bytes read, or -1 with errno. */
static ssize_t fill_from(int which, int wrapped, unsigned char *dst, size_t len,
                         unsigned char fill) {
    unsigned char *src = malloc(len);
    CHECK(src != NULL);
    memset(src, fill, len);
    ssize_t got = 0;
    if (which == 1) {
        char path[] = "/tmp/ickpt-syscalls-XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0);
        CHECK(write(fd, "0123456789", 10) == 10);
        CHECK(write(fd, src, len) == (ssize_t)len);
        got = wrapped ? ickpt_pread(fd, dst, len, 10) : pread(fd, dst, len, 10);
        int saved = errno;
        close(fd);
        unlink(path);
        errno = saved;
    } else {
        int sv[2];
        if (which == 0)
            CHECK(pipe(sv) == 0);
        else
            CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
        int rd = sv[0], wr = sv[1];
        /* 16 KiB fits a pipe's and a socket's buffer. */
        CHECK(write(wr, src, len) == (ssize_t)len);
        while ((size_t)got < len) {
            ssize_t n;
            if (which == 0)
                n = wrapped ? ickpt_read(rd, dst + got, len - got) : read(rd, dst + got, len - got);
            else
                n = wrapped ? ickpt_recv(rd, dst + got, len - got, 0)
                            : recv(rd, dst + got, len - got, 0);
            if (n <= 0) {
                got = n;
                break;
            }
            got += n;
        }
        int saved = errno;
        close(sv[0]);
        close(sv[1]);
        errno = saved;
    }
    free(src);
    return got;
}

int main(void) {
    ps = page_size();
    const size_t npages = 3 * PAGES + 1;
    unsigned char *buf = mmap(NULL, npages * ps, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(buf != MAP_FAILED);
    OK(test_init(test_dir(), 0));
    OK(ickpt_protect(1, buf, npages * ps));
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));
    ickpt_stats st;
    OK(ickpt_get_stats(&st));
    const int plain_works = st.backend != ICKPT_BACKEND_MPROTECT;
    printf("backend %u: plain system calls %s\n", st.backend,
           plain_works ? "work" : "fail with EFAULT");

    const char *names[3] = {"read", "pread", "recv"};
    for (int which = 0; which < 3; which++) {
        unsigned char *dst = buf + (1 + which * PAGES) * ps;
        const size_t len = PAGES * ps;
        const unsigned char fill = (unsigned char)(0x30 + which);
        errno = 0;
        ssize_t n = fill_from(which, 0, dst, len, fill);
        if (plain_works) {
            CHECK_MSG(n == (ssize_t)len, "plain %s returned %zd (errno %d)", names[which], n,
                      errno);
        } else {
            CHECK_MSG(n == -1 && errno == EFAULT, "plain %s on mprotect: %zd, errno %d",
                      names[which], n, errno);
            CHECK(dst[0] == 0 && dst[len - 1] == 0);
            n = fill_from(which, 1, dst, len, fill);
            CHECK_MSG(n == (ssize_t)len, "ickpt_%s returned %zd (errno %d)", names[which], n,
                      errno);
        }
        CHECK(dst[0] == fill && dst[len - 1] == fill);
        OK(ickpt_checkpoint(&info));
        CHECK_MSG(info.pages == PAGES, "%s: checkpoint stored %llu pages, %d were written",
                  names[which], (unsigned long long)info.pages, PAGES);
    }

    /* The wrappers with every backend, and ickpt_prepare_write before a plain call. */
    unsigned char *dst = buf + ps;
    CHECK(fill_from(0, 1, dst, PAGES * ps, 0x77) == (ssize_t)(PAGES * ps));
    CHECK_RC(ickpt_prepare_write(NULL, 1), ICKPT_ERR_INVALID_ARGUMENT);
    OK(ickpt_prepare_write(NULL, 0));
    OK(ickpt_prepare_write(buf + 9 * ps + 100, 2 * ps));
    CHECK(fill_from(1, 0, buf + 9 * ps + 100, 2 * ps, 0x66) == (ssize_t)(2 * ps));
    OK(ickpt_checkpoint(&info));
    CHECK_MSG(info.pages == PAGES + 3, "stored %llu pages", (unsigned long long)info.pages);

    CHECK_RESTORES_TO_NOW(info.version, buf, npages * ps);
    OK(ickpt_finalize());
    printf("syscalls: ok\n");
    return 0;
}
