/*
 * Several threads writing one protected region.
 *
 * Part 1, rounds: 4 threads write their own pages and pages shared by all (each thread its
 * own bytes, so the result does not depend on scheduling); between rounds the threads wait
 * at a barrier while the main thread checkpoints. Each incremental checkpoint must hold
 * exactly the pages written in its round; a re-initialised instance restores the final
 * memory; stats.faults counts the first writes.
 *
 * Part 2, checkpoints during writes: the threads keep writing while the main thread
 * checkpoints; then they stop, a last checkpoint is taken, and restoring it must give the
 * memory exactly as the threads left it (no write may be lost at an epoch boundary).
 */
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>

#define NT 4
#define OWN 8    /* pages per thread */
#define SHARED 8 /* pages every thread writes */
#define NPAGES (NT * OWN + SHARED)
#define ROUNDS 8

static size_t ps;
static unsigned char *region;
static pthread_barrier_t start_bar, done_bar;

/* Does round r write own page j / shared page s? */
static int own_page_written(int r, int j) { return (j + r) % 3 != 0; }
static int shared_page_written(int r, int s) { return (s + r) % 2 == 0; }

static unsigned char value(int r, int t, size_t page, size_t i) {
    return (unsigned char)(r * 41 + t * 13 + page * 7 + i * 3 + 1);
}

/* Thread t's writes of round r into `mem` (the region or the model). */
static void write_round(unsigned char *mem, int r, int t) {
    for (int j = t * OWN; j < (t + 1) * OWN; j++) {
        if (!own_page_written(r, j))
            continue;
        for (size_t k = 0; k < 64; k++) {
            size_t i = (k * 97 + (size_t)r * 5) % ps;
            mem[(size_t)j * ps + i] = value(r, t, (size_t)j, i);
        }
    }
    for (int s = 0; s < SHARED; s++) {
        size_t page = (size_t)(NT * OWN + s);
        if (!shared_page_written(r, s))
            continue;
        /* Bytes i with i % NT == t belong to thread t. */
        for (size_t i = (size_t)t; i < ps; i += NT * 5)
            mem[page * ps + i] = value(r, t, page, i);
    }
}

static size_t pages_written(int r) {
    size_t n = 0;
    for (int j = 0; j < NT * OWN; j++)
        n += own_page_written(r, j) != 0;
    for (int s = 0; s < SHARED; s++)
        n += shared_page_written(r, s) != 0;
    return n;
}

static void *round_worker(void *arg) {
    int t = (int)(intptr_t)arg;
    for (int r = 1; r <= ROUNDS; r++) {
        pthread_barrier_wait(&start_bar);
        write_round(region, r, t);
        pthread_barrier_wait(&done_bar);
    }
    return NULL;
}

static void part1(const char *dir) {
    const size_t len = NPAGES * ps;
    unsigned char *model = calloc(1, len);
    CHECK(model != NULL);
    OK(test_init(dir, 100));
    void *p = NULL;
    OK(ickpt_malloc(1, len, &p));
    region = p;

    CHECK(pthread_barrier_init(&start_bar, NULL, NT + 1) == 0);
    CHECK(pthread_barrier_init(&done_bar, NULL, NT + 1) == 0);
    pthread_t th[NT];
    for (int t = 0; t < NT; t++)
        CHECK(pthread_create(&th[t], NULL, round_worker, (void *)(intptr_t)t) == 0);

    uint64_t incremental_pages = 0;
    for (int r = 1; r <= ROUNDS; r++) {
        pthread_barrier_wait(&start_bar);
        pthread_barrier_wait(&done_bar); /* all threads wrote round r */
        for (int t = 0; t < NT; t++)
            write_round(model, r, t);
        CHECK_MEM_EQ(region, model, len);
        ickpt_checkpoint_info info;
        OK(ickpt_checkpoint(&info));
        if (r == 1) {
            CHECK(info.kind == ICKPT_KIND_FULL && info.pages == NPAGES);
        } else {
            CHECK_MSG(info.kind == ICKPT_KIND_INCREMENTAL && info.pages == pages_written(r),
                      "round %d: kind %u, %llu pages stored, %zu pages written", r, info.kind,
                      (unsigned long long)info.pages, pages_written(r));
            incremental_pages += info.pages;
        }
    }
    for (int t = 0; t < NT; t++)
        CHECK(pthread_join(th[t], NULL) == 0);

    ickpt_stats st;
    OK(ickpt_get_stats(&st));
    CHECK_MSG(st.faults > 0 && st.faults >= incremental_pages,
              "stats.faults %llu, but %llu first writes to pages were checkpointed",
              (unsigned long long)st.faults, (unsigned long long)incremental_pages);
    CHECK(st.checkpoints == ROUNDS);
    OK(ickpt_finalize());

    /* A fresh instance restores the final memory. */
    OK(test_init(dir, 100));
    OK(ickpt_malloc(1, len, &p));
    memset(p, 0xEE, len);
    uint64_t v = 0;
    OK(ickpt_latest(&v));
    OK(ickpt_restore(v));
    CHECK_MEM_EQ(p, model, len);
    OK(ickpt_finalize());
    pthread_barrier_destroy(&start_bar);
    pthread_barrier_destroy(&done_bar);
    free(model);
}

/* ---- part 2 ---- */

#define CYCLES 200
static atomic_int running;      /* threads write while set */
static atomic_long writes_done; /* progress, so the checkpoint lands mid-writing */
static atomic_int quit;

static void *busy_worker(void *arg) {
    int t = (int)(intptr_t)arg;
    uint64_t n = (uint64_t)t * 1000003;
    for (;;) {
        pthread_barrier_wait(&start_bar);
        if (atomic_load(&quit))
            return NULL;
        while (atomic_load_explicit(&running, memory_order_acquire)) {
            for (int k = 0; k < 16; k++, n++) {
                /* Own pages, and bytes of the shared pages that belong to this thread. */
                size_t j = (size_t)(t * OWN) + n % OWN;
                region[j * ps + (n * 61) % ps] = (unsigned char)n;
                size_t s = (size_t)(NT * OWN) + (n / 3) % SHARED;
                size_t i = ((n * 8) % (ps / NT)) * NT + (size_t)t;
                region[s * ps + i] = (unsigned char)(n >> 3);
            }
            atomic_fetch_add_explicit(&writes_done, 16, memory_order_relaxed);
        }
        pthread_barrier_wait(&done_bar);
    }
}

static void part2(const char *dir) {
    const size_t len = NPAGES * ps;
    unsigned char *want = malloc(len);
    CHECK(want != NULL);
    OK(test_init(dir, 8));
    void *p = NULL;
    OK(ickpt_malloc(2, len, &p));
    region = p;
    OK(ickpt_checkpoint(NULL));

    CHECK(pthread_barrier_init(&start_bar, NULL, NT + 1) == 0);
    CHECK(pthread_barrier_init(&done_bar, NULL, NT + 1) == 0);
    pthread_t th[NT];
    for (int t = 0; t < NT; t++)
        CHECK(pthread_create(&th[t], NULL, busy_worker, (void *)(intptr_t)t) == 0);

    for (int c = 0; c < CYCLES; c++) {
        atomic_store(&running, 1);
        atomic_store(&writes_done, 0);
        pthread_barrier_wait(&start_bar);
        /* A checkpoint while the threads write, early, when they are still taking the
         * first-write faults of the epoch; then enough writes to touch every page again. */
        while (atomic_load(&writes_done) < 64)
            ;
        OK(ickpt_checkpoint(NULL));
        long before = atomic_load(&writes_done);
        while (atomic_load(&writes_done) < before + 1000)
            ;
        atomic_store_explicit(&running, 0, memory_order_release);
        pthread_barrier_wait(&done_bar); /* all threads stopped */

        /* The last checkpoint must hold memory exactly as the threads left it. */
        ickpt_checkpoint_info info;
        OK(ickpt_checkpoint(&info));
        memcpy(want, region, len);
        OK(ickpt_restore(info.version));
        long at = first_diff(region, want, len);
        if (at >= 0) {
            long page = at / (long)ps;
            fprintf(stderr,
                    "cycle %d: restoring version %llu (taken after the threads stopped) does "
                    "not give the memory back: byte %ld (page %ld, %s) is %#x, memory had %#x.\n"
                    "A write made during or after an earlier concurrent ickpt_checkpoint was "
                    "never recorded as dirty (likely a first-write fault racing the checkpoint's "
                    "collection left the page writable with its dirty bit cleared).\n",
                    c, (unsigned long long)info.version, at, page,
                    page < NT * OWN ? "one thread's own page" : "a page shared by all threads",
                    region[at], want[at]);
            long pages = 0;
            for (size_t pg = 0; pg < NPAGES; pg++)
                pages += first_diff(region + pg * ps, want + pg * ps, ps) >= 0;
            fprintf(stderr, "%ld of %d pages differ\n", pages, NPAGES);
        }
        CHECK_MSG(at < 0, "cycle %d: writes lost at an epoch boundary (see above)", c);
        memset(region, 0xEE, len);
        OK(ickpt_restore(info.version));
        CHECK_MEM_EQ(region, want, len);
    }
    atomic_store(&quit, 1);
    pthread_barrier_wait(&start_bar);
    for (int t = 0; t < NT; t++)
        CHECK(pthread_join(th[t], NULL) == 0);

    ickpt_stats st;
    OK(ickpt_get_stats(&st));
    CHECK(st.failed_checkpoints == 0);
    printf("part 2: %llu checkpoints, %llu faults\n", (unsigned long long)st.checkpoints,
           (unsigned long long)st.faults);
    OK(ickpt_finalize());

    /* And from a fresh instance. */
    OK(test_init(dir, 8));
    OK(ickpt_malloc(2, len, &p));
    uint64_t v = 0;
    OK(ickpt_latest(&v));
    OK(ickpt_restore(v));
    CHECK_MEM_EQ(p, want, len);
    OK(ickpt_finalize());
    free(want);
}

int main(void) {
    ps = page_size();
    part1(test_subdir("rounds"));
    printf("part 1: ok\n");
    part2(test_subdir("concurrent"));
    printf("threads: ok\n");
    return 0;
}
