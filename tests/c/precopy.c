/*
 * Pre-copy from C (PRWIP): cfg.precopy and cfg.checkpoint_interval_ms reach the
 * library, a pass of the pre-copier shows in ickpt_get_precopy, versions taken while it
 * copies restore to memory as it was at each checkpoint call (after a fresh init, with
 * pre-copy off), and a bad strategy is refused. Runs on every backend and in async mode.
 */
#include "check.h"

#include <stddef.h>
#include <time.h>

#define PAGES 48
#define ROUNDS 6

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int init_with(uint32_t precopy, uint32_t interval_ms) {
    ickpt_config cfg;
    int r = ickpt_config_init(&cfg);
    if (r != ICKPT_OK)
        return r;
    cfg.dir = test_dir();
    cfg.full_every = 1000;
    cfg.precopy = precopy;
    cfg.checkpoint_interval_ms = interval_ms;
    return ickpt_init(&cfg);
}

int main(void) {
    const size_t ps = page_size(), len = PAGES * ps;
    CHECK_RC(init_with(7, 0), ICKPT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(ickpt_last_error(), "precopy") != NULL);

    OK(init_with(ICKPT_PRECOPY_PRWIP, 40));
    unsigned char *buf = NULL;
    OK(ickpt_malloc(1, len, (void **)&buf));
    fill_random(buf, len, 1);
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));

    uint64_t seed = 2, k = 0;
    for (int round = 0; round < ROUNDS; round++) {
        struct ickpt_precopy p;
        OK(ickpt_get_precopy(&p));
        CHECK(p.strategy == ICKPT_PRECOPY_PRWIP);
        const uint64_t passes = p.total_passes;
        /* Write pages until the pre-copier has passed at least once; a hang is a failure. */
        const double deadline = now_s() + 60;
        do {
            CHECK_MSG(now_s() < deadline, "no pre-copy pass in 60 s (round %d)", round);
            size_t page = (size_t)(rng_next(&seed) % PAGES);
            buf[page * ps + (k++ % ps)] = (unsigned char)rng_next(&seed);
            OK(ickpt_get_precopy(&p));
        } while (p.total_passes == passes);
        OK(ickpt_checkpoint_tagged((uint64_t)round + 1, &info));
    }
    OK(ickpt_wait(&info));
    unsigned char *want = malloc(len);
    CHECK(want != NULL);
    memcpy(want, buf, len);

    struct ickpt_precopy p;
    OK(ickpt_get_precopy(&p));
    CHECK(p.version == info.version);
    CHECK_MSG(p.total_passes >= ROUNDS && p.total_copies > 0 && p.total_pages > 0,
              "passes %llu copies %llu pages %llu", (unsigned long long)p.total_passes,
              (unsigned long long)p.total_copies, (unsigned long long)p.total_pages);
    /* An older program's shorter struct gets its own bytes and nothing past them. */
    memset(&p, 0xee, sizeof p);
    OK(ickpt_get_precopy_sized(&p, offsetof(struct ickpt_precopy, pages)));
    CHECK(p.version == info.version && p.pages == 0xeeeeeeeeeeeeeeeeull);
    CHECK_RC(ickpt_get_precopy_sized(NULL, sizeof p), ICKPT_ERR_INVALID_ARGUMENT);
    OK(ickpt_finalize());

    /* A fresh process image: pre-copy off, the memory elsewhere. */
    OK(init_with(ICKPT_PRECOPY_OFF, 0));
    unsigned char *back = NULL;
    OK(ickpt_malloc(1, len, (void **)&back));
    uint64_t version = 0, tag = 0;
    OK(ickpt_restore_latest_tagged(&version, &tag));
    CHECK(version == info.version && tag == ROUNDS);
    for (size_t i = 0; i < len; i++)
        CHECK_MSG(back[i] == want[i], "byte %zu (page %zu) differs after restore", i, i / ps);
    OK(ickpt_get_precopy(&p));
    CHECK(p.strategy == ICKPT_PRECOPY_OFF && p.total_passes == 0);
    OK(ickpt_finalize());
    free(want);
    printf("precopy: %d rounds restored\n", ROUNDS);
    return 0;
}
