/*
 * A failing store. run.sh sets ICKPT_FAULT (enospc@20000, eio@5000 or commit-eio), which
 * makes the first version file of each ickpt_init fail, and passes the code
 * ickpt_checkpoint must then return (ICKPT_ERR_NO_SPACE or ICKPT_ERR_IO) as argv[1].
 *
 * Part 1: the first (full) checkpoint fails with that code and a message naming the file;
 * nothing is committed; the next checkpoint succeeds and restores in a new instance.
 * Part 2: after restoring, a failing incremental checkpoint must keep its dirty pages: the
 * next incremental holds the pages written before the failure as well as after it.
 */
#include "check.h"

#include <dirent.h>
#include <sys/mman.h>

#define LEN (1u << 20)

/* Committed version files in the store; leftovers are reported. */
static int committed_files(const char *dir) {
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] == 'v' && l > 6 && strcmp(e->d_name + l - 6, ".ickpt") == 0)
            n++;
        else if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
                 strcmp(e->d_name, "ickpt-store") && strcmp(e->d_name, "ickpt-lock"))
            printf("note: %s left in the store after the failed checkpoint\n", e->d_name);
    }
    closedir(d);
    return n;
}

/* Fail one checkpoint as injected; check nothing changed. Returns nothing. */
static void expect_failed_checkpoint(const char *dir, int want, int have_latest, uint64_t latest) {
    ickpt_checkpoint_info info;
    memset(&info, 0x5C, sizeof info);
    ickpt_checkpoint_info info0 = info;
    int files_before = committed_files(dir);
    CHECK_RC(ickpt_checkpoint(&info), want);
    CHECK_MSG(memcmp(&info, &info0, sizeof info) == 0, "info written by a failed checkpoint");
    const char *msg = ickpt_last_error();
    printf("failed checkpoint: %s: %s\n", ickpt_result_name(want), msg);
    CHECK_MSG(strstr(msg, dir) != NULL && strstr(msg, ".ickpt") != NULL,
              "the message does not name the version file: \"%s\"", msg);
    uint64_t v = 0xabcdefULL;
    if (have_latest) {
        OK(ickpt_latest(&v));
        CHECK_MSG(v == latest, "latest is %llu after a failed checkpoint, was %llu",
                  (unsigned long long)v, (unsigned long long)latest);
    } else {
        CHECK_RC(ickpt_latest(&v), ICKPT_ERR_NOT_FOUND);
        CHECK(v == 0xabcdefULL);
    }
    CHECK_MSG(committed_files(dir) == files_before, "a failed checkpoint left a version file");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: ICKPT_FAULT=... %s EXPECTED_RESULT_NAME\n", argv[0]);
        return 2;
    }
    const char *fault = getenv("ICKPT_FAULT");
    if (fault == NULL || fault[0] == '\0') {
        fprintf(stderr, "ICKPT_FAULT is not set; run through tests/c/run.sh\n");
        return 2;
    }
    const int want = result_code_named(argv[1]);
    const char *dir = test_dir();
    const size_t ps = page_size();
    const size_t npages = LEN / ps;
    printf("ICKPT_FAULT=%s, expecting %s\n", fault, ickpt_result_name(want));

    /* ---- part 1: the first checkpoint fails ---- */
    unsigned char *mem = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED);
    OK(test_init(dir, 0));
    OK(ickpt_protect(1, mem, LEN));
    /* Bytes zstd cannot shrink, so the file is as long as its pages and the byte offsets
     * run.sh gives ICKPT_FAULT fall inside the page data. */
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    for (size_t i = 0; i < LEN; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        mem[i] = (unsigned char)x;
    }
    expect_failed_checkpoint(dir, want, 0, 0);
    ickpt_stats st;
    OK(ickpt_get_stats(&st));
    CHECK(st.failed_checkpoints == 1 && st.checkpoints == 0);

    for (size_t p = 3; p < npages; p += 50)
        mem[p * ps + 11] ^= 0xFF;
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));
    CHECK(info.kind == ICKPT_KIND_FULL && info.pages == npages);
    uint64_t v1 = 0;
    OK(ickpt_latest(&v1));
    CHECK(v1 == info.version);
    CHECK(committed_files(dir) == 1);
    OK(ickpt_finalize());

    /* A new instance (its first file fails again, but restore writes none). */
    OK(test_init(dir, 0));
    void *p = NULL;
    OK(ickpt_malloc(1, LEN, &p));
    unsigned char *m2 = p;
    memset(m2, 0xEE, LEN);
    OK(ickpt_restore(v1));
    CHECK_MEM_EQ(m2, mem, LEN);

    /* ---- part 2: a failing incremental keeps its dirty pages ---- */
    unsigned char *dirty = calloc(npages, 1);
    CHECK(dirty != NULL);
    for (size_t k = 0; k < 24; k++) { /* 24 pages: well past the byte budget */
        size_t pg = (k * 7) % npages;
        m2[pg * ps + k] = mem[pg * ps + k] = (unsigned char)(0xA0 + k);
        dirty[pg] = 1;
    }
    expect_failed_checkpoint(dir, want, 1, v1);
    for (size_t k = 0; k < 4; k++) { /* some new pages, some already dirty */
        size_t pg = (k * 77) % npages;
        m2[pg * ps + 100 + k] = mem[pg * ps + 100 + k] = (unsigned char)(0x30 + k);
        dirty[pg] = 1;
    }
    size_t ndirty = 0;
    for (size_t i = 0; i < npages; i++)
        ndirty += dirty[i];
    OK(ickpt_checkpoint(&info));
    CHECK_MSG(info.kind == ICKPT_KIND_INCREMENTAL && info.parent == v1,
              "checkpoint after the failure: kind %u parent %llu (restored %llu)", info.kind,
              (unsigned long long)info.parent, (unsigned long long)v1);
    CHECK_MSG(info.pages == ndirty,
              "the incremental after a failed one holds %llu pages; %zu were written since "
              "version %llu (pages dirtied before the failure were dropped?)",
              (unsigned long long)info.pages, ndirty, (unsigned long long)v1);
    OK(ickpt_get_stats(&st));
    CHECK(st.failed_checkpoints == 1 && st.checkpoints == 1);
    uint64_t v2 = 0;
    OK(ickpt_latest(&v2));
    CHECK(v2 == info.version);
    OK(ickpt_finalize());

    OK(test_init(dir, 0));
    OK(ickpt_malloc(1, LEN, &p));
    memset(p, 0x11, LEN);
    OK(ickpt_restore(v2));
    CHECK_MEM_EQ(p, mem, LEN);
    OK(ickpt_finalize());
    free(dirty);
    printf("enospc (%s): ok\n", fault);
    return 0;
}
