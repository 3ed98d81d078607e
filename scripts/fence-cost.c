/* What a fence costs (docs/design.md "The fence"): mprotect(PROT_READ) and back over
 * 256 MiB of populated pages, whole, and run by run over a random 1 / 10 / 50% of the pages
 * (one mprotect per run of consecutive chosen pages, as a fence over the dirty runs only would
 * need). Then what the mprotect backend's re-protect costs: the same runs opened (as its first
 * writes open them, splitting the mapping), then one mprotect(PROT_READ) over the whole
 * region, which merges the pieces back. Not part of the build or the tests; run by hand:
 *     cc -O2 scripts/fence-cost.c -o /tmp/fence-cost && /tmp/fence-cost
 * Output kept in docs/benchmarks/fence-cost/.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "measure.h"

/* mprotect each run of consecutive chosen pages to `prot`; returns the runs. */
static size_t each_run(char *p, size_t ps, const char *sel, size_t n, int prot) {
    size_t runs = 0;
    for (size_t i = 0; i < n;) {
        if (!sel[i]) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && sel[j])
            j++;
        must(mprotect(p + i * ps, (j - i) * ps, prot) == 0, "mprotect run");
        runs++;
        i = j;
    }
    return runs;
}

int main(void) {
    size_t ps = (size_t)sysconf(_SC_PAGESIZE), sz = 256u << 20, n = sz / ps;
    char *p = mmap(0, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    must(p != MAP_FAILED, "mmap");
    /* Page-sized entries, as ickpt's tracked memory after its first epoch. */
    must(madvise(p, sz, MADV_NOHUGEPAGE) == 0, "madvise");
    memset(p, 1, sz);
    printf("256 MiB, %zu pages of %zu bytes\n", n, ps);
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_ms();
        must(mprotect(p, sz, PROT_READ) == 0, "mprotect");
        double t1 = now_ms();
        must(mprotect(p, sz, PROT_READ | PROT_WRITE) == 0, "mprotect");
        double t2 = now_ms();
        printf("whole region: fence %.2f ms, lift %.2f ms\n", t1 - t0, t2 - t1);
    }
    const double shares[] = {0.01, 0.10, 0.50};
    char *sel = malloc(n);
    must(sel != NULL, "malloc");
    for (int f = 0; f < 3; f++) {
        srand(1);
        size_t chosen = 0;
        for (size_t i = 0; i < n; i++) {
            sel[i] = rand() < shares[f] * RAND_MAX;
            chosen += sel[i];
        }
        double t0 = now_ms();
        size_t runs = each_run(p, ps, sel, n, PROT_READ);
        double t1 = now_ms();
        each_run(p, ps, sel, n, PROT_READ | PROT_WRITE);
        double t2 = now_ms();
        printf("%.1f%% of pages in %zu runs: fence run by run %.2f ms (%.2f us a run), "
               "lift %.2f ms\n",
               100.0 * chosen / n, runs, t1 - t0, (t1 - t0) * 1e3 / runs, t2 - t1);
        /* The mprotect backend: tracked (read-only) region, the runs opened by first writes,
         * then re-protected whole at the next checkpoint. */
        must(mprotect(p, sz, PROT_READ) == 0, "mprotect");
        for (int rep = 0; rep < 3; rep++) {
            each_run(p, ps, sel, n, PROT_READ | PROT_WRITE);
            double t3 = now_ms();
            must(mprotect(p, sz, PROT_READ) == 0, "mprotect");
            double t4 = now_ms();
            printf("  re-protect whole after opening those runs: %.2f ms (%.2f us a run)\n",
                   t4 - t3, (t4 - t3) * 1e3 / runs);
        }
        must(mprotect(p, sz, PROT_READ | PROT_WRITE) == 0, "mprotect");
    }
    free(sel);
    must(munmap(p, sz) == 0, "munmap");
    return 0;
}
