/* What the stop of an async whole-process checkpoint pays on uffd-async, per way of keeping
 * writes out (docs/design.md "Whole processes", docs/benchmarks.md "Whole-process checkpoints
 * against CRIU"): MIB MiB of populated 4 KiB pages registered with userfaultfd's async
 * write-protect, PCT% of them written spread evenly (as examples/transparent/dirty.c does),
 * then, three times over other pages: PAGEMAP_SCAN taking the written pages and
 * write-protecting them again, the same scan with nothing written, mprotect(PROT_READ) and
 * back over the whole region, and mprotect(PROT_READ) run by run over the written pages
 * (calls refused for vm.max_map_count are counted). Not part of the build or the tests; run
 * by hand (no privilege needed: the userfaultfd is user-mode only):
 *     cc -O2 scripts/scan-fence-cost.c -o /tmp/scan-fence-cost && /tmp/scan-fence-cost 4096 10
 * Output kept in docs/benchmarks/fence-cost/.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "measure.h"

/* Debian 12's headers predate these (Linux 6.7). */
#ifndef PAGEMAP_SCAN
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#define PAGE_IS_WRITTEN (1 << 1)
#define PM_SCAN_WP_MATCHING (1 << 0)
#define PM_SCAN_CHECK_WPASYNC (1 << 1)
struct page_region {
    uint64_t start, end, categories;
};
struct pm_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted,
        category_mask, category_anyof_mask, return_mask;
};
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#endif

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], 0, 10) : 4096;
    size_t pct = argc > 2 ? strtoul(argv[2], 0, 10) : 10;
    size_t len = mib << 20, n = len / 4096, m = n * pct / 100;
    must(mib > 0 && pct > 0 && pct <= 100 && m > 0, "arguments: MIB PCT (1-100)");
    char *p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    must(p != MAP_FAILED, "mmap");
    for (size_t i = 0; i < len; i += 4096)
        p[i] = 1;
    int u = syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
    must(u >= 0, "userfaultfd");
    struct uffdio_api api = {.api = UFFD_API,
                             .features = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED};
    must(ioctl(u, UFFDIO_API, &api) == 0, "UFFDIO_API");
    struct uffdio_register reg = {.range = {(uintptr_t)p, len}, .mode = UFFDIO_REGISTER_MODE_WP};
    must(ioctl(u, UFFDIO_REGISTER, &reg) == 0, "UFFDIO_REGISTER");
    struct uffdio_writeprotect wp = {.range = {(uintptr_t)p, len},
                                     .mode = UFFDIO_WRITEPROTECT_MODE_WP};
    must(ioctl(u, UFFDIO_WRITEPROTECT, &wp) == 0, "UFFDIO_WRITEPROTECT");
    int pm = open("/proc/self/pagemap", O_RDONLY);
    must(pm >= 0, "/proc/self/pagemap");
    struct page_region *runs = calloc(m, sizeof *runs);
    must(runs != 0, "calloc");
    printf("%zu MiB, %zu%% of pages written, spread evenly\n", mib, pct);
    for (int rep = 0; rep < 3; rep++) {
        for (size_t j = 0; j < m; j++)
            p[((j * n / m + rep) % n) * 4096 + 8]++;
        struct pm_scan_arg a = {.size = sizeof a,
                                .flags = PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
                                .start = (uintptr_t)p,
                                .end = (uintptr_t)p + len,
                                .vec = (uintptr_t)runs,
                                .vec_len = m,
                                .category_mask = PAGE_IS_WRITTEN,
                                .return_mask = PAGE_IS_WRITTEN};
        double t = now_ms();
        long k = ioctl(pm, PAGEMAP_SCAN, &a);
        double scan = now_ms() - t;
        must(k >= 0, "PAGEMAP_SCAN");
        struct pm_scan_arg b = a;
        b.flags = 0;
        t = now_ms();
        must(ioctl(pm, PAGEMAP_SCAN, &b) == 0, "PAGEMAP_SCAN, nothing written");
        double idle = now_ms() - t;
        t = now_ms();
        must(mprotect(p, len, PROT_READ) == 0, "mprotect");
        double ro = now_ms() - t;
        t = now_ms();
        must(mprotect(p, len, PROT_READ | PROT_WRITE) == 0, "mprotect");
        double rw = now_ms() - t;
        long refused = 0;
        t = now_ms();
        for (long i = 0; i < k; i++)
            refused += mprotect((void *)(uintptr_t)runs[i].start, runs[i].end - runs[i].start,
                                PROT_READ) != 0;
        double by_run = now_ms() - t;
        must(mprotect(p, len, PROT_READ | PROT_WRITE) == 0, "mprotect");
        printf("rep %d: %ld runs; scan with write-protect %.2f ms, scan of nothing written %.2f "
               "ms; whole region read-only %.2f ms, back %.2f ms; run by run %.2f ms (%ld "
               "refused)\n",
               rep, k, scan, idle, ro, rw, by_run, refused);
    }
    return 0;
}
