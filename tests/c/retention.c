/*
 * Retention through the C API: with cfg.keep_versions = 2 (and full_every 3), after every
 * checkpoint the store holds exactly what restoring the two newest versions reads, and the
 * newest restores in a fresh init; a version collected is gone (ICKPT_ERR_NOT_FOUND).
 */
#include "check.h"

static unsigned char mem[8 * 4096];

/* With full_every 3, versions 1, 4, 7, ... are full; an increment reads back to one. */
static uint64_t full_of(uint64_t v) { return v - (v - 1) % 3; }

static int kept(uint64_t v, uint64_t newest) {
    uint64_t lowest = full_of(newest > 1 ? newest - 1 : newest);
    return v >= lowest && v <= newest;
}

static void init(uint32_t keep_versions) {
    ickpt_config cfg;
    OK(ickpt_config_init(&cfg));
    cfg.dir = test_dir();
    cfg.full_every = 3;
    cfg.keep_chains = 100;
    cfg.keep_versions = keep_versions;
    OK(ickpt_init(&cfg));
}

int main(void) {
    init(2);
    OK(ickpt_protect(1, mem, sizeof mem));
    for (uint64_t n = 1; n <= 8; n++) {
        memset(mem + (n % 8) * 4096, (int)n, 4096);
        ickpt_checkpoint_info info;
        OK(ickpt_checkpoint_tagged(n, &info));
        CHECK(info.version == n);
        for (uint64_t v = 1; v <= n; v++) {
            uint64_t tag = 0;
            ickpt_result rc = ickpt_version_tag(v, &tag);
            CHECK_MSG(kept(v, n) ? rc == ICKPT_OK && tag == v : rc == ICKPT_ERR_NOT_FOUND,
                      "after version %llu: version %llu gave %d", (unsigned long long)n,
                      (unsigned long long)v, (int)rc);
        }
    }
    unsigned char want[sizeof mem];
    memcpy(want, mem, sizeof mem);
    OK(ickpt_finalize());

    memset(mem, 0, sizeof mem);
    init(0);
    OK(ickpt_protect(1, mem, sizeof mem));
    uint64_t version = 0;
    OK(ickpt_restore_latest(&version));
    CHECK(version == 8);
    CHECK(memcmp(mem, want, sizeof mem) == 0);
    OK(ickpt_finalize());
    return 0;
}
