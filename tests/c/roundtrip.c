/*
 * Checkpoint / restore round trip with three kinds of region:
 *   1: an unaligned range (starts 3 bytes into a page, odd length) of malloc'd memory
 *   2: page-aligned memory from ickpt_malloc
 *   3, 4: two tiny structs side by side on one page (they share a covering page)
 * full_every = 3. Random writes (fixed seed) between 8 checkpoints; the kinds must go
 * F I I F I I F I and an incremental checkpoint that only touched region 2 must hold exactly
 * the pages written. After finalize and a fresh init with memory at other addresses (and
 * other in-page offsets): restore of the latest, of older versions, size / id mismatches
 * (refused before any byte is written), and continuing a chain from an older version.
 */
#include "check.h"

#include <sys/mman.h>

#define NCKPT 8
#define LEN1 100000u

struct tiny {
    uint32_t a;
    uint16_t b;
    char name[10];
    double d;
};

static size_t ps;
static size_t len2;

/* Where the regions live in one incarnation of the process. */
struct mem {
    unsigned char *r1;  /* region 1 */
    unsigned char *p1;  /* first covering page of region 1 */
    size_t span1;       /* covering bytes of region 1 */
    unsigned char *r2;  /* region 2 (ickpt_malloc) */
    unsigned char *sp;  /* the page holding both structs */
    struct tiny *s3, *s4;
};

/* The expected content of every region. */
struct model {
    unsigned char *m1, *m2;
    struct tiny s3, s4;
};

static uint64_t seed = 0x1234567887654321ULL;

static void model_alloc(struct model *m) {
    m->m1 = calloc(1, LEN1);
    m->m2 = calloc(1, len2);
    CHECK(m->m1 && m->m2);
}

static void model_free(struct model *m) {
    free(m->m1);
    free(m->m2);
}

static void model_copy(struct model *dst, const struct model *src) {
    memcpy(dst->m1, src->m1, LEN1);
    memcpy(dst->m2, src->m2, len2);
    dst->s3 = src->s3;
    dst->s4 = src->s4;
}

/* Random byte runs in a buffer and its model; marks touched pages of `base`-aligned memory. */
static void scribble(unsigned char *mem, unsigned char *model, size_t len, int writes,
                     unsigned char *pages_touched) {
    for (int i = 0; i < writes; i++) {
        size_t off = rng_next(&seed) % len;
        size_t n = 1 + rng_next(&seed) % 64;
        if (off + n > len)
            n = len - off;
        for (size_t k = 0; k < n; k++) {
            unsigned char b = (unsigned char)rng_next(&seed);
            mem[off + k] = b;
            model[off + k] = b;
        }
        if (pages_touched)
            for (size_t p = off / ps; p <= (off + n - 1) / ps; p++)
                pages_touched[p] = 1;
    }
}

static void write_struct(struct tiny *s, struct tiny *model) {
    struct tiny t;
    memset(&t, 0, sizeof t);
    t.a = (uint32_t)rng_next(&seed);
    t.b = (uint16_t)rng_next(&seed);
    snprintf(t.name, sizeof t.name, "n%u", (unsigned)(t.a % 100000));
    t.d = (double)(t.a % 1000) / 8.0;
    memcpy(s, &t, sizeof t); /* byte copy: padding included, so memcmp is exact */
    memcpy(model, &t, sizeof t);
}

static void check_equal(const struct mem *w, const struct model *m) {
    CHECK_MEM_EQ(w->r1, m->m1, LEN1);
    CHECK_MEM_EQ(w->r2, m->m2, len2);
    CHECK_MEM_EQ(w->s3, &m->s3, sizeof(struct tiny));
    CHECK_MEM_EQ(w->s4, &m->s4, sizeof(struct tiny));
}

static size_t count(const unsigned char *flags, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += flags[i] != 0;
    return c;
}

/* Fill all covering memory (in and around the regions) with garbage. */
#define G1 0x5A
#define G2 0xC3
#define GS 0x96
static void garbage(const struct mem *w) {
    memset(w->p1, G1, w->span1);
    memset(w->r2, G2, len2);
    memset(w->sp, GS, ps);
}

static int all_bytes(const unsigned char *p, size_t n, unsigned char v) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

/* Bytes of the covering pages outside the regions: never written by restore. */
static void check_outside_untouched(const struct mem *w) {
    size_t before1 = (size_t)(w->r1 - w->p1);
    CHECK_MSG(all_bytes(w->p1, before1, G1), "restore wrote before region 1 (same page)");
    CHECK_MSG(all_bytes(w->r1 + LEN1, w->span1 - before1 - LEN1, G1),
              "restore wrote after region 1 (same page)");
    size_t off3 = (size_t)((unsigned char *)w->s3 - w->sp);
    CHECK_MSG(all_bytes(w->sp, off3, GS), "restore wrote before region 3 (same page)");
    size_t end4 = (size_t)((unsigned char *)(w->s4 + 1) - w->sp);
    CHECK_MSG(all_bytes(w->sp + end4, ps - end4, GS), "restore wrote after region 4 (same page)");
}

static void check_all_garbage(const struct mem *w) {
    CHECK_MSG(all_bytes(w->p1, w->span1, G1), "a refused restore wrote to region 1's pages");
    CHECK_MSG(all_bytes(w->r2, len2, G2), "a refused restore wrote to region 2");
    CHECK_MSG(all_bytes(w->sp, ps, GS), "a refused restore wrote to the struct page");
}

/* Lay out region 1 at `off1` into a fresh page-aligned buffer, the structs at `offs`. */
static void layout(struct mem *w, size_t off1, size_t offs) {
    w->span1 = ((off1 + LEN1 + ps - 1) / ps) * ps;
    w->p1 = aligned_alloc(ps, w->span1 + ps);
    CHECK(w->p1 != NULL);
    w->r1 = w->p1 + off1;
    w->sp = aligned_alloc(ps, ps);
    CHECK(w->sp != NULL);
    memset(w->sp, 0, ps);
    w->s3 = (struct tiny *)(void *)(w->sp + offs);
    w->s4 = w->s3 + 1;
}

static void protect_all(struct mem *w, size_t size2, size_t size4) {
    OK(ickpt_protect(1, w->r1, LEN1));
    void *p = NULL;
    OK(ickpt_malloc(2, size2, &p));
    w->r2 = p;
    OK(ickpt_protect(3, w->s3, sizeof(struct tiny)));
    OK(ickpt_protect(4, w->s4, size4));
}

int main(void) {
    ps = page_size();
    len2 = 48 * ps;
    const char *dir = test_dir();
    const uint32_t full_every = 3;
    const uint32_t kinds[NCKPT] = {ICKPT_KIND_FULL,        ICKPT_KIND_INCREMENTAL,
                                   ICKPT_KIND_INCREMENTAL, ICKPT_KIND_FULL,
                                   ICKPT_KIND_INCREMENTAL, ICKPT_KIND_INCREMENTAL,
                                   ICKPT_KIND_FULL,        ICKPT_KIND_INCREMENTAL};
    /* What each round writes: 'a' all regions, '2' region 2 only, '-' nothing. */
    const char plan[NCKPT + 1] = "a2aa2-a2";

    struct mem w;
    struct model cur, snap[NCKPT + 1];
    uint64_t version[NCKPT + 1];
    model_alloc(&cur);
    for (int i = 1; i <= NCKPT; i++)
        model_alloc(&snap[i]);

    /* ---- first life ---- */
    OK(test_init(dir, full_every));
    layout(&w, 3, 100);
    memset(w.r1, 0, LEN1);
    protect_all(&w, len2, sizeof(struct tiny));
    memset(&cur.s3, 0, sizeof cur.s3);
    memset(&cur.s4, 0, sizeof cur.s4);
    CHECK(((uintptr_t)w.r2 % ps) == 0);

    const size_t cover1 = w.span1 / ps, cover2 = len2 / ps;
    const size_t distinct_cover = cover1 + cover2 + 1;
    const size_t per_region_cover = cover1 + cover2 + 2; /* the struct page counts twice */
    uint64_t sum_pages = 0, sum_bytes = 0;
    unsigned char *touched = calloc(cover2, 1);
    CHECK(touched != NULL);

    for (int r = 1; r <= NCKPT; r++) {
        memset(touched, 0, cover2);
        char what = plan[r - 1];
        if (what == 'a' || what == '2')
            scribble(w.r2, cur.m2, len2, 40, touched);
        if (what == 'a') {
            scribble(w.r1, cur.m1, LEN1, 60, NULL);
            write_struct(w.s3, &cur.s3);
            write_struct(w.s4, &cur.s4);
        }
        ickpt_checkpoint_info info;
        memset(&info, 0xEE, sizeof info);
        OK(ickpt_checkpoint(&info));
        version[r] = info.version;
        printf("checkpoint %d (%c): version %llu kind %s parent %llu pages %llu bytes %llu\n", r,
               what, (unsigned long long)info.version,
               info.kind == ICKPT_KIND_FULL ? "full" : "incremental",
               (unsigned long long)info.parent, (unsigned long long)info.pages,
               (unsigned long long)info.bytes);
        CHECK_MSG(info.kind == kinds[r - 1], "checkpoint %d: kind %u, expected %u", r, info.kind,
                  kinds[r - 1]);
        CHECK(r == 1 || info.version > version[r - 1]);
        if (info.kind == ICKPT_KIND_FULL) {
            CHECK_MSG(info.parent == 0, "full checkpoint %d has parent %llu", r,
                      (unsigned long long)info.parent);
            CHECK_MSG(info.pages >= distinct_cover && info.pages <= per_region_cover,
                      "full checkpoint %d stored %llu pages; the regions cover %zu (%zu counted "
                      "per region)",
                      r, (unsigned long long)info.pages, distinct_cover, per_region_cover);
        } else {
            CHECK_MSG(info.parent == version[r - 1], "checkpoint %d: parent %llu, expected %llu",
                      r, (unsigned long long)info.parent, (unsigned long long)version[r - 1]);
            size_t dirty2 = count(touched, cover2);
            if (what == '2' || what == '-')
                CHECK_MSG(info.pages == dirty2,
                          "incremental checkpoint %d stored %llu pages, but exactly %zu pages "
                          "were written",
                          r, (unsigned long long)info.pages, dirty2);
            else
                CHECK_MSG(info.pages >= dirty2 + 2 && info.pages <= per_region_cover,
                          "incremental checkpoint %d stored %llu pages; at least %zu were written",
                          r, (unsigned long long)info.pages, dirty2 + 2);
        }
        /* All-zero pages take no bytes (format 6): only a file was written. */
        CHECK(info.bytes > 0);
        sum_pages += info.pages;
        sum_bytes += info.bytes;
        uint64_t latest = 0;
        OK(ickpt_latest(&latest));
        CHECK(latest == info.version);
        model_copy(&snap[r], &cur);
        /* Checkpointing changes nothing in memory. */
        check_equal(&w, &cur);
    }

    ickpt_stats st;
    OK(ickpt_get_stats(&st));
    CHECK(st.checkpoints == NCKPT && st.full_checkpoints == 3 && st.incremental_checkpoints == 5);
    CHECK(st.failed_checkpoints == 0);
    CHECK(st.pages_written == sum_pages && st.bytes_written == sum_bytes);
    CHECK(st.regions == 4);
    CHECK(st.protected_bytes == LEN1 + len2 + 2 * sizeof(struct tiny));
    CHECK(st.faults > 0);
    OK(ickpt_finalize());

    /* ---- second life: same ids and sizes, other addresses and in-page offsets ---- */
    struct mem w2;
    OK(test_init(dir, full_every));
    layout(&w2, 1000, 2000);
    uint64_t latest = 0;
    OK(ickpt_latest(&latest));
    CHECK(latest == version[NCKPT]);

    /* Region 2 too big and region 4 one byte short: refused, nothing written. */
    protect_all(&w2, len2 + ps, sizeof(struct tiny) - 1);
    garbage(&w2);
    CHECK_RC(ickpt_restore(latest), ICKPT_ERR_REGION_MISMATCH);
    check_all_garbage(&w2);
    OK(ickpt_free(w2.r2));
    void *p = NULL;
    OK(ickpt_malloc(2, len2, &p));
    w2.r2 = p;
    memset(w2.r2, G2, len2);
    CHECK_RC(ickpt_restore(latest), ICKPT_ERR_REGION_MISMATCH); /* region 4 still wrong */
    check_all_garbage(&w2);
    /* Region 4 missing. */
    OK(ickpt_unprotect(4));
    CHECK_RC(ickpt_restore(latest), ICKPT_ERR_REGION_MISMATCH);
    check_all_garbage(&w2);
    /* All right, plus an extra region the version does not hold. */
    OK(ickpt_protect(4, w2.s4, sizeof(struct tiny)));
    static unsigned char extra[64];
    memset(extra, 0x11, sizeof extra);
    OK(ickpt_protect(5, extra, sizeof extra));
    CHECK_RC(ickpt_restore(latest), ICKPT_ERR_REGION_MISMATCH);
    check_all_garbage(&w2);
    CHECK(all_bytes(extra, sizeof extra, 0x11));
    OK(ickpt_unprotect(5));

    /* The latest version. */
    OK(ickpt_restore(latest));
    check_equal(&w2, &snap[NCKPT]);
    check_outside_untouched(&w2);

    /* Older versions: the full one of the previous chain and an increment on it. */
    garbage(&w2);
    OK(ickpt_restore(version[5]));
    check_equal(&w2, &snap[5]);
    check_outside_untouched(&w2);
    garbage(&w2);
    OK(ickpt_restore(version[4]));
    check_equal(&w2, &snap[4]);
    check_outside_untouched(&w2);
    /* keep_chains = 2: the first chain (versions 1-3) went when version 7 committed. */
    CHECK_RC(ickpt_restore(version[2]), ICKPT_ERR_NOT_FOUND);
    check_equal(&w2, &snap[4]);
    garbage(&w2);
    OK(ickpt_restore(version[6]));
    check_equal(&w2, &snap[6]);
    OK(ickpt_restore(version[5]));
    check_equal(&w2, &snap[5]);

    /* Continue from version 5: the next checkpoint increments it (depth 2 of 3). */
    model_copy(&cur, &snap[5]);
    memset(touched, 0, cover2);
    scribble(w2.r2, cur.m2, len2, 20, touched);
    scribble(w2.r1, cur.m1, LEN1, 10, NULL);
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));
    CHECK_MSG(info.kind == ICKPT_KIND_INCREMENTAL && info.parent == version[5],
              "after restoring version %llu: kind %u parent %llu",
              (unsigned long long)version[5], info.kind, (unsigned long long)info.parent);
    CHECK(info.version > version[NCKPT]);
    CHECK(info.pages >= count(touched, cover2) + 1);
    garbage(&w2);
    OK(ickpt_latest(&latest));
    CHECK(latest == info.version);
    OK(ickpt_restore(latest));
    check_equal(&w2, &cur);
    check_outside_untouched(&w2);
    /* The branch did not disturb version 8. */
    garbage(&w2);
    OK(ickpt_restore(version[NCKPT]));
    check_equal(&w2, &snap[NCKPT]);

    /* Unprotect region 4: region 3 on the same page stays tracked, writes to region 4's
     * bytes (now plain memory on a tracked page) still work, and later versions no longer
     * hold region 4. */
    model_copy(&cur, &snap[NCKPT]);
    OK(ickpt_unprotect(4));
    write_struct(w2.s3, &cur.s3);
    struct tiny plain4;
    write_struct(w2.s4, &plain4);
    ickpt_checkpoint_info ia, ib;
    OK(ickpt_checkpoint(&ia));
    struct tiny s3_at_a = cur.s3;
    write_struct(w2.s3, &cur.s3); /* tracked again after the checkpoint */
    write_struct(w2.s4, &plain4); /* shares the tracked page: must not crash */
    scribble(w2.r2, cur.m2, len2, 5, NULL);
    OK(ickpt_checkpoint(&ib));
    CHECK_MSG(ib.pages >= 2, "version %llu holds %llu pages; region 3's page and region 2 were written",
              (unsigned long long)ib.version, (unsigned long long)ib.pages);
    memset(w2.r1, G1, LEN1);
    memset(w2.r2, G2, len2);
    memset(w2.s3, GS, sizeof(struct tiny));
    OK(ickpt_restore(ib.version));
    CHECK_MEM_EQ(w2.r1, cur.m1, LEN1);
    CHECK_MEM_EQ(w2.r2, cur.m2, len2);
    CHECK_MEM_EQ(w2.s3, &cur.s3, sizeof(struct tiny));
    CHECK_MEM_EQ(w2.s4, &plain4, sizeof(struct tiny)); /* not a region: left alone */
    OK(ickpt_restore(ia.version));
    CHECK_MEM_EQ(w2.s3, &s3_at_a, sizeof(struct tiny));
    CHECK_MEM_EQ(w2.s4, &plain4, sizeof(struct tiny));
    OK(ickpt_protect(4, w2.s4, sizeof(struct tiny)));
    CHECK_RC(ickpt_restore(ib.version), ICKPT_ERR_REGION_MISMATCH);
    CHECK_MEM_EQ(w2.s3, &s3_at_a, sizeof(struct tiny));

    OK(ickpt_get_stats(&st));
    CHECK(st.restores == 9);
    CHECK(st.pages_restored > 0);
    OK(ickpt_finalize());
    printf("roundtrip: ok (versions %llu..%llu)\n", (unsigned long long)version[1],
           (unsigned long long)latest);
    model_free(&cur);
    for (int i = 1; i <= NCKPT; i++)
        model_free(&snap[i]);
    free(touched);
    free(w.p1);
    free(w.sp);
    free(w2.p1);
    free(w2.sp);
    return 0;
}
