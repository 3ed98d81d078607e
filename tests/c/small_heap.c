/* Small, unaligned heap buffers protected after init: ickpt's own bookkeeping is allocated
 * on the same heap, often on the very pages being protected. Writes to those pages, by the
 * application or by malloc itself, must be tracked, not kill the process. */
#include "check.h"

int main(void) {
    ickpt_config cfg;
    OK(ickpt_config_init(&cfg));
    cfg.dir = getenv("ICKPT_TEST_DIR");
    OK(ickpt_init(&cfg));
    enum { N = 40 };
    char *bufs[N];
    size_t lens[N];
    for (int i = 0; i < N; i++) {
        lens[i] = 100 + (size_t)i * 257;
        bufs[i] = malloc(lens[i]);
        CHECK(bufs[i] != NULL);
        memset(bufs[i], i, lens[i]);
        OK(ickpt_protect((uint64_t)i + 1, bufs[i], lens[i]));
    }
    /* More heap traffic on the protected pages, then writes to every buffer. */
    for (int round = 0; round < 3; round++) {
        void *junk[64];
        for (int k = 0; k < 64; k++) junk[k] = malloc(16 + (size_t)k * 8);
        for (int k = 0; k < 64; k++) free(junk[k]);
        for (int i = 0; i < N; i++) memset(bufs[i], 0x40 + round + i, lens[i]);
        OK(ickpt_checkpoint(NULL));
    }
    char *expect[N];
    for (int i = 0; i < N; i++) {
        expect[i] = malloc(lens[i]);
        memcpy(expect[i], bufs[i], lens[i]);
        memset(bufs[i], 0, lens[i]);
    }
    uint64_t v;
    OK(ickpt_latest(&v));
    OK(ickpt_restore(v));
    for (int i = 0; i < N; i++) CHECK(memcmp(bufs[i], expect[i], lens[i]) == 0);
    for (int i = 0; i < N; i++) OK(ickpt_unprotect((uint64_t)i + 1));
    OK(ickpt_finalize());
    for (int i = 0; i < N; i++) {
        free(bufs[i]);
        free(expect[i]);
    }
    printf("small heap buffers: ok\n");
    return 0;
}
