/* A program written for the C API, run under `ickpt run`: it protects its buffer, asks
 * ickpt_restore_latest for a version (none: under ickpt run a restart never starts the program
 * again) and calls ickpt_checkpoint_tagged every 10 steps, which checkpoints the whole
 * process. After a restart its call returns ICKPT_OK again; ickpt_restarted tells it so,
 * and it says it on stderr. Each step appends a checksum line to argv[1]. */
#include <fcntl.h>
#include <ickpt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "prog.h"

#define CK(call)                                                                          \
    do {                                                                                  \
        enum ickpt_result r_ = (call);                                                    \
        if (r_ != ICKPT_OK) {                                                             \
            fprintf(stderr, "%s: %s\n", #call, ickpt_last_error());                       \
            return 1;                                                                     \
        }                                                                                 \
    } while (0)

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: api_loop OUT STEPS\n");
        return 2;
    }
    int out = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    long steps = atol(argv[2]);
    size_t n = 1 << 16;
    uint64_t *a = calloc(n, sizeof *a);
    CK(ickpt_init(NULL));
    CK(ickpt_protect(1, a, n * sizeof *a));
    uint64_t version;
    enum ickpt_result r = ickpt_restore_latest(&version);
    if (r != ICKPT_ERR_NOT_FOUND) {
        fprintf(stderr, "restore_latest under ickpt run: %s\n", ickpt_result_name(r));
        return 1;
    }
    uint32_t restarts = 0;
    for (long s = 0; s < steps; s++) {
        for (size_t i = 0; i < n; i++)
            a[i] = a[i] * 6364136223846793005ull + (uint64_t)s + i;
        uint64_t sum = 0;
        for (size_t i = 0; i < n; i += 13)
            sum ^= a[i];
        char line[64];
        int len = snprintf(line, sizeof line, "step %ld %016llx\n", s, (unsigned long long)sum);
        if (write(out, line, (size_t)len) != len)
            return 1;
        if (s % 10 == 9) {
            CK(ickpt_checkpoint_tagged((uint64_t)s, NULL));
            uint32_t now;
            CK(ickpt_restarted(&now));
            if (now != restarts) {
                fprintf(stderr, "restarted %u at step %ld\n", now, s);
                restarts = now;
            }
        }
        spin(1000000);
    }
    CK(ickpt_finalize());
    uint64_t final = 0;
    for (size_t i = 0; i < n; i++)
        final = final * 1099511628211ull + a[i];
    printf("final %016llx\n", (unsigned long long)final);
    return 0;
}
