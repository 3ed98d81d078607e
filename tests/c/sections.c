/*
 * Program sections from C (CAPE), as a program would use them:
 *   run 1  a prefix it can redo (not tracked), then a section saving a small vector 4 times
 *          under one name, through the ICKPT_SECTION_* macros;
 *   run 2  the prefix again: the section's start replays the 4 saves (resume = 4), memory as
 *          run 1 left it; then a second section takes two deltas in memory (take), which are
 *          written to files, merged with ickpt_merge and injected: the same bytes as the
 *          section left, whether injected merged or one after the other (ickpt_inject_delta);
 *   bad    a save outside a section, a bad name, a damaged delta and a merge of deltas of
 *          different regions are refused with their codes and memory unchanged.
 */
#include "check.h"

#define BIG (16 * 4096)
#define N 1000

static unsigned char big[BIG] __attribute__((aligned(4096)));
static float v[2][N] __attribute__((aligned(4096)));
static unsigned char extra[4096] __attribute__((aligned(4096)));

static void prefix(void) {
    fill_random(big, BIG, 42);
    for (int i = 0; i < N; i++)
        v[0][i] = v[1][i] = 0.f;
}

/* One iteration of the loop: the other half of v from this one. */
static void step(int l) {
    int k = l % 2;
    for (int i = 0; i < N; i++)
        v[1 - k][i] = v[k][i] * 0.5f + (float)(i + l + 1);
}

static void protect_all(void) {
    OK(ickpt_protect(1, big, BIG));
    OK(ickpt_protect(2, v, sizeof v));
}

static void write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL && fwrite(p, 1, n, f) == n && fclose(f) == 0);
}

int main(void) {
    const char *dir = test_subdir("store");
    static float want[2][N];

    /* Run 1. */
    OK(test_init(dir, 0));
    protect_all();
    prefix();
    uint64_t resume = 99;
    ICKPT_SECTION_START(&resume);
    CHECK(resume == 0);
    for (int l = 0; l < 4; l++) {
        step(l);
        ickpt_section_info info;
        OK(ickpt_section_save("loop", &info));
        CHECK_MSG(info.saves == (uint64_t)l + 1, "save %d: %llu saves", l,
                  (unsigned long long)info.saves);
        /* N floats changed: word deltas, not the pages they lie in (plus headers). */
        CHECK_MSG(info.words == N && info.delta_bytes < N * 4 + 200, "save %d: %llu words, %llu bytes",
                  l, (unsigned long long)info.words, (unsigned long long)info.delta_bytes);
        CHECK(info.pages >= 1 && info.file_bytes > 0);
    }
    ICKPT_SECTION_STOP();
    memcpy(want, v, sizeof v);
    OK(ickpt_finalize());

    /* Run 2: the prefix, then the recovery. */
    memset(v, 0xAB, sizeof v);
    OK(test_init(dir, 0));
    protect_all();
    prefix();
    ICKPT_SECTION_START(&resume);
    CHECK_MSG(resume == 4, "resume %llu", (unsigned long long)resume);
    CHECK(memcmp(v, want, sizeof v) == 0);
    int replaying = -1;
    OK(ickpt_section_replaying(&replaying));
    CHECK(replaying == 0); /* the last saved section: the run checkpoints again */
    ICKPT_SECTION_STOP();
    CHECK_RC(ickpt_section_replaying(&replaying), ICKPT_ERR_SECTION);

    /* A second section: two deltas in memory, the second overwriting part of the first. */
    static float before[2][N];
    memcpy(before, v, sizeof v);
    OK(ickpt_section_start(NULL));
    step(4);
    void *da, *db;
    size_t la, lb;
    ickpt_section_info ti;
    OK(ickpt_section_take(&da, &la, &ti));
    CHECK(ti.saves == 0 && ti.words == N && ti.delta_bytes == la);
    for (int i = 0; i < N / 2; i++)
        v[0][i] = -1.f;
    OK(ickpt_section_take(&db, &lb, NULL));
    OK(ickpt_section_stop());
    memcpy(want, v, sizeof v);
    const char *fa = test_subdir("a.delta"), *fb = test_subdir("b.delta"),
               *fc = test_subdir("c.delta");
    write_file(fa, da, la);
    write_file(fb, db, lb);
    OK(ickpt_merge(fa, fb, fc));
    /* Merged, injected at once. */
    memcpy(v, before, sizeof v);
    OK(ickpt_inject(fc));
    CHECK(memcmp(v, want, sizeof v) == 0);
    /* One after the other, from memory. */
    memcpy(v, before, sizeof v);
    OK(ickpt_inject_delta(da, la));
    OK(ickpt_inject_delta(db, lb));
    CHECK(memcmp(v, want, sizeof v) == 0);

    /* Both at once, checked first. */
    memcpy(v, before, sizeof v);
    const void *both[2] = {da, db};
    size_t lens[2] = {la, lb};
    OK(ickpt_inject_deltas(both, lens, 2));
    CHECK(memcmp(v, want, sizeof v) == 0);

    /* Bad calls. */
    CHECK_RC(ickpt_section_save("loop", NULL), ICKPT_ERR_SECTION);
    CHECK_RC(ickpt_section_stop(), ICKPT_ERR_SECTION);
    OK(ickpt_section_start(NULL));
    CHECK_RC(ickpt_section_start(NULL), ICKPT_ERR_SECTION);
    CHECK_RC(ickpt_section_save("../x", NULL), ICKPT_ERR_INVALID_ARGUMENT);
    CHECK_RC(ickpt_section_save(NULL, NULL), ICKPT_ERR_INVALID_ARGUMENT);
    OK(ickpt_section_stop());
    ((unsigned char *)da)[la - 12] ^= 1; /* inside the checksummed bytes */
    CHECK_RC(ickpt_inject_delta(da, la), ICKPT_ERR_CORRUPT);
    CHECK(memcmp(v, want, sizeof v) == 0);
    /* A damaged second delta: the first is not written either. */
    memcpy(v, before, sizeof v);
    const void *bad[2] = {db, da};
    size_t bad_lens[2] = {lb, la};
    CHECK_RC(ickpt_inject_deltas(bad, bad_lens, 2), ICKPT_ERR_CORRUPT);
    CHECK(memcmp(v, before, sizeof v) == 0);
    memcpy(v, want, sizeof v);
    ickpt_delta_free(da, la);
    ickpt_delta_free(db, lb);
    /* A delta of three regions against one of two. */
    OK(ickpt_protect(3, extra, sizeof extra));
    OK(ickpt_section_start(NULL));
    extra[0] = 1;
    void *dd;
    size_t ld;
    OK(ickpt_section_take(&dd, &ld, NULL));
    OK(ickpt_section_stop());
    const char *fd = test_subdir("d.delta");
    write_file(fd, dd, ld);
    ickpt_delta_free(dd, ld);
    CHECK_RC(ickpt_merge(fa, fd, fc), ICKPT_ERR_REGION_MISMATCH);
    CHECK_RC(ickpt_merge(fa, test_subdir("missing.delta"), fc), ICKPT_ERR_NOT_FOUND);
    OK(ickpt_finalize());
    printf("sections: 4 saves replayed, take/merge/inject exact, bad calls refused\n");
    return 0;
}
