/*
 * The restart path when the store holds bad files: a stray newest file (garbage, empty, a
 * directory, a dangling symlink) or a damaged newest version must not hide the intact
 * versions. ickpt_restore_latest restores the newest version that restores completely;
 * ickpt_list_versions lists every version file; ickpt_check_version says which a restore
 * accepts; ickpt_latest names the newest one whose file and chain pass.
 */
#include "check.h"

#include <fcntl.h>
#include <sys/stat.h>

#define LEN (6 * 4096u)

static unsigned char *mem;

static void fill(int round) {
    for (size_t i = 0; i < LEN; i++)
        mem[i] = (unsigned char)(i * 7 + (size_t)round * 13);
}

static void write_file(const char *path, const void *data, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, data, n) == (ssize_t)n);
    CHECK(close(fd) == 0);
}

/* Make versions 1-3 (one full, two increments) in a fresh store `name`. */
static const char *make_store(const char *name) {
    const char *dir = test_subdir(name);
    OK(test_init(dir, 0));
    void *p = NULL;
    OK(ickpt_malloc(1, LEN, &p));
    mem = p;
    for (int r = 1; r <= 3; r++) {
        fill(r);
        OK(ickpt_checkpoint(NULL));
    }
    OK(ickpt_finalize());
    return dir;
}

/* Restart in this process as a new run would: init, protect, restore the newest intact. */
static uint64_t restart(const char *dir) {
    OK(test_init(dir, 0));
    void *p = NULL;
    OK(ickpt_malloc(1, LEN, &p));
    mem = p;
    memset(mem, 0, LEN);
    uint64_t v = 0;
    OK(ickpt_restore_latest(&v));
    return v;
}

static void expect_round(int round) {
    unsigned char *want = malloc(LEN);
    CHECK(want != NULL);
    unsigned char *saved = mem;
    mem = want;
    fill(round);
    mem = saved;
    CHECK_MEM_EQ(mem, want, LEN);
    free(want);
}

static void bad_newest(const char *how) {
    char name[64];
    snprintf(name, sizeof name, "stray-%s", how);
    const char *dir = make_store(name);
    char path[4200];
    snprintf(path, sizeof path, "%s/v99999999.ickpt", dir);
    if (strcmp(how, "garbage") == 0) {
        char junk[5000];
        memset(junk, 0x5a, sizeof junk);
        write_file(path, junk, sizeof junk);
    } else if (strcmp(how, "empty") == 0) {
        write_file(path, "", 0);
    } else if (strcmp(how, "directory") == 0) {
        CHECK(mkdir(path, 0700) == 0);
    } else {
        CHECK(symlink("/nonexistent/ickpt", path) == 0);
    }
    CHECK(restart(dir) == 3);
    expect_round(3);
    uint64_t latest = 0;
    OK(ickpt_latest(&latest));
    CHECK(latest == 3);

    size_t count = 0;
    OK(ickpt_list_versions(NULL, 0, &count));
    CHECK(count == 4);
    uint64_t vs[8] = {0};
    OK(ickpt_list_versions(vs, 2, &count));
    CHECK(count == 4 && vs[0] == 1 && vs[1] == 2 && vs[2] == 0);
    OK(ickpt_list_versions(vs, 8, &count));
    CHECK(vs[3] == 99999999);
    for (int i = 0; i < 3; i++)
        OK(ickpt_check_version(vs[i]));
    /* Refused: corrupt, unreadable (a directory) or not there (a dangling link). */
    t_last_rc = ickpt_check_version(99999999);
    CHECK(t_last_rc == ICKPT_ERR_CORRUPT || t_last_rc == ICKPT_ERR_IO ||
          t_last_rc == ICKPT_ERR_NOT_FOUND);
    CHECK_MSG(strstr(ickpt_last_error(), "v99999999.ickpt") != NULL, "%s", ickpt_last_error());
    OK(ickpt_finalize());
    printf("bad newest file (%s): restored version 3\n", how);
}

int main(void) {
    /* A first run: nothing to restore. */
    OK(test_init(test_subdir("first"), 0));
    uint64_t v = 7;
    CHECK_RC(ickpt_restore_latest(&v), ICKPT_ERR_NOT_FOUND);
    CHECK(v == 7);
    OK(ickpt_finalize());

    bad_newest("garbage");
    bad_newest("empty");
    bad_newest("directory");
    bad_newest("dangling symlink");

    /* A damaged page in the newest version: listed as latest (its metadata is fine), but
     * restore_latest finds the damage while reading and restores version 2. */
    const char *dir = make_store("damaged-page");
    char path[4200];
    snprintf(path, sizeof path, "%s/v00000003.ickpt", dir);
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    unsigned char b;
    CHECK(pread(fd, &b, 1, 4096 + 100) == 1);
    b ^= 0x40;
    CHECK(pwrite(fd, &b, 1, 4096 + 100) == 1);
    CHECK(close(fd) == 0);
    CHECK(restart(dir) == 2);
    expect_round(2);
    CHECK_RC(ickpt_restore(3), ICKPT_ERR_CORRUPT);
    OK(ickpt_finalize());
    printf("damaged newest page: restored version 2\n");
    return 0;
}
