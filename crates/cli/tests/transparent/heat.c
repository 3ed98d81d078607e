/* An unmodified single-threaded program for `ickpt run` tests: a 1-D heat stencil on the
 * heap, a static table, a counter on the stack and a heap that grows every few steps. Each
 * step appends a line with a checksum to the file named by argv[1] (opened by the program
 * itself, so a restart reopens it at its offset); stdout gets the final checksum once. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prog.h"

static double table[4096];          /* .bss */
static uint64_t seed = 88172645463325252ull; /* .data */

static uint64_t next(void) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
}

int main(int argc, char **argv) {
    int out = open_output(argc, argv, 3, "heat OUT STEPS [N]");
    long steps = atol(argv[2]);
    size_t n = argc > 3 ? (size_t)atol(argv[3]) : (1 << 20);
    double *u = calloc(n, sizeof *u), *v = calloc(n, sizeof *v);
    char **grown = NULL;
    size_t ngrown = 0;
    for (size_t i = 0; i < 4096; i++)
        table[i] = (double)(next() % 1000) / 1000.0;
    for (size_t i = 0; i < n; i++)
        u[i] = table[i % 4096];
    volatile long step_on_stack = 0;
    for (long s = 0; s < steps; s++) {
        for (size_t i = 1; i + 1 < n; i++)
            v[i] = u[i] + 0.25 * (u[i - 1] - 2 * u[i] + u[i + 1]);
        double *t = u;
        u = v;
        v = t;
        if (s % 3 == 0) { /* a heap that grows: small blocks and a larger one */
            grown = realloc(grown, (ngrown + 1) * sizeof *grown);
            grown[ngrown] = malloc(1000 + 37 * ngrown);
            memset(grown[ngrown], (int)(next() & 0xff), 1000 + 37 * ngrown);
            ngrown++;
        }
        step_on_stack++;
        uint64_t sum = 0;
        for (size_t i = 0; i < n; i += 7)
            sum = sum * 31 + (uint64_t)(u[i] * 1e9);
        for (size_t g = 0; g < ngrown; g++)
            sum = sum * 17 + (unsigned char)grown[g][g % 100];
        char line[96];
        int len = snprintf(line, sizeof line, "step %ld %016llx\n", (long)step_on_stack,
                           (unsigned long long)sum);
        if (write(out, line, (size_t)len) != len) {
            perror("write");
            return 1;
        }
        spin(2000000); /* 2 ms: time for checkpoints to land mid-run */
    }
    uint64_t final = 0;
    for (size_t i = 0; i < n; i++)
        final = final * 1099511628211ull + (uint64_t)(u[i] * 1e12);
    printf("final %016llx after %ld steps, %zu blocks\n", (unsigned long long)final,
           (long)step_on_stack, ngrown);
    return 0;
}
