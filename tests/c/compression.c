/*
 * Compression through the C API: each cfg.compression setting (and ICKPT_COMPRESS_LEVEL with
 * a level) writes versions that restore byte for byte in a fresh init, zero pages and
 * compressible pages alike; a level out of range, a level given with another setting (where
 * it would be ignored) and an unknown setting are refused with ICKPT_ERR_INVALID_ARGUMENT,
 * naming the field.
 */
#include "check.h"

#define PAGES 64
static unsigned char mem[PAGES * 4096] __attribute__((aligned(4096)));

int main(void) {
    const uint32_t settings[] = {ICKPT_COMPRESS_DEFAULT, ICKPT_COMPRESS_OFF, ICKPT_COMPRESS_FAST,
                                 ICKPT_COMPRESS_HIGH, ICKPT_COMPRESS_LEVEL};
    for (size_t s = 0; s < sizeof settings / sizeof settings[0]; s++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/setting-%zu", test_dir(), s);
        ickpt_config cfg;
        OK(ickpt_config_init(&cfg));
        cfg.dir = dir;
        cfg.compression = settings[s];
        cfg.compress_level = settings[s] == ICKPT_COMPRESS_LEVEL ? 5 : 0;
        OK(ickpt_init(&cfg));
        OK(ickpt_protect(1, mem, sizeof mem));
        /* A quarter of the pages zero, a quarter text, half noise; then one of each rewritten. */
        uint64_t x = 0x9E3779B97F4A7C15ULL + s;
        for (size_t i = 0; i < sizeof mem; i++) {
            size_t page = i / 4096;
            if (page % 4 == 0) {
                mem[i] = 0;
            } else if (page % 4 == 1) {
                mem[i] = (unsigned char)"checkpoint "[i % 11];
            } else {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                mem[i] = (unsigned char)x;
            }
        }
        ickpt_checkpoint_info info;
        OK(ickpt_checkpoint(&info));
        CHECK(info.pages == PAGES);
        /* Zero pages take no bytes whatever the setting. */
        CHECK_MSG(info.bytes < sizeof mem, "setting %u: %llu bytes for %zu of pages",
                  settings[s], (unsigned long long)info.bytes, sizeof mem);
        memset(mem + 4 * 4096, 0, 4096);
        mem[5 * 4096 + 7] = 'X';
        mem[8 * 4096] = 0;
        OK(ickpt_checkpoint(&info));
        CHECK(info.kind == ICKPT_KIND_INCREMENTAL);
        unsigned char want[sizeof mem];
        memcpy(want, mem, sizeof mem);
        OK(ickpt_finalize());

        memset(mem, 0xAB, sizeof mem);
        OK(ickpt_config_init(&cfg));
        cfg.dir = dir;
        OK(ickpt_init(&cfg));
        OK(ickpt_protect(1, mem, sizeof mem));
        uint64_t version = 0;
        OK(ickpt_restore_latest(&version));
        CHECK(version == 2);
        CHECK_MSG(memcmp(mem, want, sizeof mem) == 0, "setting %u: restored bytes differ",
                  settings[s]);
        OK(ickpt_finalize());
    }

    ickpt_config cfg;
    OK(ickpt_config_init(&cfg));
    cfg.dir = test_dir();
    cfg.compression = ICKPT_COMPRESS_LEVEL;
    cfg.compress_level = 42;
    CHECK_RC(ickpt_init(&cfg), ICKPT_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(ickpt_last_error(), "compress_level") != NULL, "%s", ickpt_last_error());
    /* A level with another setting would be ignored: refused instead. */
    cfg.compression = ICKPT_COMPRESS_FAST;
    cfg.compress_level = 5;
    CHECK_RC(ickpt_init(&cfg), ICKPT_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(ickpt_last_error(), "cfg->compress_level") != NULL &&
                  strstr(ickpt_last_error(), "ICKPT_COMPRESS_LEVEL") != NULL,
              "%s", ickpt_last_error());
    cfg.compress_level = 0;
    cfg.compression = 99;
    CHECK_RC(ickpt_init(&cfg), ICKPT_ERR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(ickpt_last_error(), "cfg->compression") != NULL, "%s", ickpt_last_error());
    return 0;
}
