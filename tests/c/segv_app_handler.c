/*
 * The application's own SIGSEGV handler, installed before ickpt_init, keeps working:
 * tracked writes never reach it, genuine faults (a NULL write, SEGV_MAPERR; a write to its
 * own read-only page, SEGV_ACCERR) do, and it can siglongjmp out. A handler installed
 * after ickpt_init makes ickpt_checkpoint fail with ICKPT_ERR_TRACKING.
 */
#include "check.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>

static sigjmp_buf jb;
static volatile sig_atomic_t app_hits;
static void *volatile last_addr;
static volatile int last_code;

static void app_handler(int sig, siginfo_t *si, void *ctx) {
    (void)ctx;
    if (sig != SIGSEGV)
        _exit(90);
    app_hits++;
    last_addr = si->si_addr;
    last_code = si->si_code;
    siglongjmp(jb, 1);
}

static void late_handler(int sig, siginfo_t *si, void *ctx) {
    (void)sig;
    (void)si;
    (void)ctx;
    _exit(91);
}

/* Write `v` at `p`; returns 1 if the application's handler caught a fault. */
T_DELIBERATE_FAULT static int faulting_write(volatile unsigned char *p, unsigned char v) {
    if (sigsetjmp(jb, 1) == 0) {
        *p = v;
        return 0;
    }
    return 1;
}

int main(void) {
    const size_t ps = page_size();
    CHECK(set_segv_handler(NULL, app_handler, 0) == 0);

    unsigned char *ro = mmap(NULL, ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(ro != MAP_FAILED);
    /* The handler works before ickpt is involved. */
    CHECK(faulting_write(NULL, 1) == 1 && app_hits == 1);

    OK(test_init(test_dir(), 0));
    unsigned char *mem = mmap(NULL, 8 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED);
    OK(ickpt_protect(1, mem, 8 * ps));
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));
    CHECK(info.kind == ICKPT_KIND_FULL);

    /* Tracked writes: ickpt's, never the application's. */
    CHECK(faulting_write(mem + 5, 1) == 0);
    CHECK(faulting_write(mem + 2 * ps, 2) == 0);
    CHECK(faulting_write(mem + 7 * ps + 1, 3) == 0);
    CHECK_MSG(app_hits == 1, "the application's handler saw %d tracked writes", app_hits - 1);
    OK(ickpt_checkpoint(&info));
    CHECK_MSG(info.kind == ICKPT_KIND_INCREMENTAL && info.pages == 3,
              "incremental after 3 tracked page writes: kind %u, %llu pages", info.kind,
              (unsigned long long)info.pages);

    /* Genuine faults reach the application's handler, with the kernel's siginfo. */
    CHECK_MSG(faulting_write(NULL, 4) == 1, "write through NULL not reported");
    CHECK(app_hits == 2 && last_addr == NULL && last_code == SEGV_MAPERR);
    CHECK_MSG(faulting_write(ro + 33, 5) == 1, "write to a read-only page not reported");
    CHECK(app_hits == 3 && last_addr == (void *)(ro + 33) && last_code == SEGV_ACCERR);
    CHECK(ro[33] == 0);

    /* ickpt is intact after the jumps out of its handler. */
    CHECK(faulting_write(mem + 4 * ps, 6) == 0);
    CHECK(faulting_write(mem + 5 * ps, 7) == 0);
    void *extra = NULL;
    OK(ickpt_malloc(2, ps, &extra)); /* registry updates still go through */
    memset(extra, 0x42, ps);
    CHECK(app_hits == 3);
    OK(ickpt_checkpoint(&info));
    CHECK_MSG(info.kind == ICKPT_KIND_INCREMENTAL && info.pages == 2 + 1,
              "2 pages written + a new 1-page region: kind %u, %llu pages", info.kind,
              (unsigned long long)info.pages);
    unsigned char *want = malloc(8 * ps);
    CHECK(want != NULL);
    memcpy(want, mem, 8 * ps);
    memset(mem, 0, 8 * ps);
    memset(extra, 0, ps);
    OK(ickpt_restore(info.version));
    CHECK_MEM_EQ(mem, want, 8 * ps);
    CHECK(((unsigned char *)extra)[ps - 1] == 0x42);
    free(want);

    const uint64_t last_ok = info.version;

    /* A handler installed after ickpt_init: tracking is broken, and checkpoint says so;
     * except with the uffd backend, whose faults reach a thread of ickpt's, not a signal. */
    ickpt_stats st;
    OK(ickpt_get_stats(&st));
    CHECK(set_segv_handler(NULL, late_handler, 0) == 0);
    if (st.backend == ICKPT_BACKEND_UFFD) {
        mem[3 * ps] = 9;
        OK(ickpt_checkpoint(&info));
        CHECK(info.pages == 1);
    } else {
        memset(&info, 0x3C, sizeof info);
        ickpt_checkpoint_info info0 = info;
        CHECK_RC(ickpt_checkpoint(&info), ICKPT_ERR_TRACKING);
        CHECK(memcmp(&info, &info0, sizeof info) == 0);
        printf("checkpoint with a replaced handler: %s\n", ickpt_last_error());
        uint64_t v = 0;
        OK(ickpt_latest(&v));
        CHECK(v == last_ok); /* nothing committed by the refused checkpoint */
    }

    printf("segv_app_handler: ok\n");
    return 0;
}
