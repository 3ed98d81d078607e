/*
 * Async mode from C: ickpt_checkpoint returns once the pages are scheduled; the program
 * then rewrites every page (from two threads) while the commit runs on slow storage with a
 * small copy-on-write buffer. ickpt_wait reports the commit; ickpt_latest never names a
 * version before it is committed; each version restores to memory exactly as it was when
 * ickpt_checkpoint was called; the access-type counts add up to the pages written.
 */
#include "check.h"

#include <pthread.h>

#define NPAGES 64
#define ROUNDS 4

static size_t ps;
static unsigned char *region;

struct job {
    int first, round;
};

/* Add round+1 to bytes of every other page starting at `first`, in descending order. */
static void *writer(void *arg) {
    struct job *j = arg;
    for (int p = NPAGES - 1 - j->first; p >= 0; p -= 2)
        for (size_t i = 0; i < ps; i += 128)
            region[(size_t)p * ps + i] += (unsigned char)(j->round + 1);
    return NULL;
}

int main(void) {
    ps = page_size();
    ickpt_config cfg;
    OK(ickpt_config_init(&cfg));
    CHECK(cfg.mode == ICKPT_MODE_SYNC && cfg.flush_order == ICKPT_FLUSH_ADAPTIVE);
    cfg.dir = test_dir();
    cfg.mode = ICKPT_MODE_ASYNC;
    cfg.cow_bytes = 4 * ps;
    cfg.bandwidth = 16u << 20;
    OK(ickpt_init(&cfg));

    void *p = NULL;
    OK(ickpt_malloc(1, NPAGES * ps, &p));
    region = p;
    for (size_t i = 0; i < NPAGES * ps; i++)
        region[i] = (unsigned char)(i * 7);

    unsigned char *snap[ROUNDS];
    uint64_t versions[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        snap[r] = malloc(NPAGES * ps);
        CHECK(snap[r] != NULL);
        memcpy(snap[r], region, NPAGES * ps);
        ickpt_checkpoint_info info;
        memset(&info, 0xff, sizeof info);
        OK(ickpt_checkpoint(&info));
        CHECK(info.mode == ICKPT_MODE_ASYNC);
        CHECK_MSG(info.pages == NPAGES, "round %d scheduled %llu pages", r,
                  (unsigned long long)info.pages);
        versions[r] = info.version;
        uint64_t latest = 0;
        int rc = ickpt_latest(&latest);
        CHECK(rc == ICKPT_OK || rc == ICKPT_ERR_NOT_FOUND);
        CHECK_MSG(rc != ICKPT_OK || latest <= info.version,
                  "latest %llu", (unsigned long long)latest);

        pthread_t t[2];
        struct job jobs[2] = {{0, r}, {1, r}};
        for (int k = 0; k < 2; k++)
            CHECK(pthread_create(&t[k], NULL, writer, &jobs[k]) == 0);
        for (int k = 0; k < 2; k++)
            CHECK(pthread_join(t[k], NULL) == 0);
    }

    ickpt_checkpoint_info done;
    OK(ickpt_wait(&done));
    CHECK(done.version == versions[ROUNDS - 1]);
    /* Async commits are compressed (format 6): the file's size says nothing about its pages,
     * so the pages are counted instead (every one was rewritten each round). */
    CHECK(done.bytes > 0);
    CHECK_MSG(done.pages == NPAGES, "the last version stored %llu pages",
              (unsigned long long)done.pages);
    CHECK(done.peak_cow_bytes <= cfg.cow_bytes);
    uint64_t latest = 0;
    OK(ickpt_latest(&latest));
    CHECK(latest == done.version);
    OK(ickpt_wait(NULL));

    /* One more version so the last round's writes are classified too. Every page was first
     * written once in each round (the initial fill is not trapped: a new region is stored
     * whole by its first checkpoint). */
    OK(ickpt_checkpoint(NULL));
    OK(ickpt_wait(NULL));
    ickpt_stats st;
    OK(ickpt_get_stats(&st));
    CHECK_MSG(st.cow_pages + st.wait_pages + st.avoided_pages + st.after_pages ==
                  (uint64_t)ROUNDS * NPAGES,
              "cow %llu wait %llu avoided %llu after %llu", (unsigned long long)st.cow_pages,
              (unsigned long long)st.wait_pages, (unsigned long long)st.avoided_pages,
              (unsigned long long)st.after_pages);

    for (int r = ROUNDS - 1; r >= 0; r--) {
        OK(ickpt_restore(versions[r]));
        CHECK_MSG(memcmp(region, snap[r], NPAGES * ps) == 0,
                  "version %llu differs from memory at its checkpoint call",
                  (unsigned long long)versions[r]);
        free(snap[r]);
    }
    OK(ickpt_finalize());
    CHECK_RC(ickpt_wait(NULL), ICKPT_ERR_NOT_INITIALIZED);
    printf("async_commit: %d versions restored exactly\n", ROUNDS);
    return 0;
}
