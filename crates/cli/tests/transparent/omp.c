/* An unmodified OpenMP program for `ickpt run` tests: each step a parallel loop over a heap
 * array with an integer reduction (exact, so any order of the threads gives the same sum),
 * then a parallel region whose threads each fold their own slice, stored by thread number.
 * Between steps the team waits as OMP_WAIT_POLICY says: spinning (active) or in futex waits
 * (passive); a checkpoint stops it either way. Each step appends a line to argv[1]; stdout
 * gets the final checksum once. Built with -fopenmp. */
#include <fcntl.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "prog.h"

#define MAX_TEAM 64

int main(int argc, char **argv) {
    int out = open_output(argc, argv, 4, "omp OUT STEPS N");
    long steps = atol(argv[2]);
    long n = atol(argv[3]);
    uint64_t *a = calloc((size_t)n, sizeof *a);
    uint64_t part[MAX_TEAM] = {0};
    int team = 0;
    uint64_t total = 0;
    for (long s = 0; s < steps; s++) {
        uint64_t sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
        for (long i = 0; i < n; i++) {
            uint64_t x = a[i] * 6364136223846793005ull + (uint64_t)i + (uint64_t)s;
            for (int k = 0; k < 24; k++)
                x = (x ^ (x >> 29)) * 0xbf58476d1ce4e5b9ull;
            a[i] = x;
            sum += x >> 7;
        }
#pragma omp parallel
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            if (t == 0)
                team = nt;
            uint64_t h = 0;
            for (long i = t; i < n; i += nt)
                h = h * 31 + a[i];
            if (t < MAX_TEAM)
                part[t] = h;
        }
        uint64_t h = sum;
        for (int t = 0; t < team && t < MAX_TEAM; t++)
            h = h * 1099511628211ull + part[t];
        total = total * 31 + h;
        char line[80];
        int len = snprintf(line, sizeof line, "step %ld %016llx %d\n", s, (unsigned long long)h,
                           team);
        if (write(out, line, (size_t)len) != len) {
            perror("write");
            return 1;
        }
    }
    printf("final %016llx after %ld steps, %d threads\n", (unsigned long long)total, steps, team);
    return 0;
}
