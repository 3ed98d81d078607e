/* The cost of a first touch of anonymous memory, page by page, in two states: memory the guest
 * has not used lately (which free page reporting may have handed back to the host) and memory
 * freed and taken again at once (still backed by the host). On a VM whose balloon reports free
 * pages, the first costs a host fault per page; docs/benchmarks.md ("free page reporting").
 *
 *   cc -O2 scripts/first-touch-cost.c -o /tmp/first-touch-cost && /tmp/first-touch-cost 10240
 *
 * The argument is the size in MiB, a multiple of 64. Prints the machine, the kernel's
 * page-reporting counters, and microseconds per page for each pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void show(const char *file) {
    char path[256], buf[64] = "";
    snprintf(path, sizeof path, "/sys/module/page_reporting/parameters/%s", file);
    FILE *f = fopen(path, "r");
    if (f && fgets(buf, sizeof buf, f))
        buf[strcspn(buf, "\n")] = 0;
    printf("%s=%s ", file, f ? buf : "(absent)");
    if (f)
        fclose(f);
}

static void machine(void) {
    char line[256], model[256] = "unknown cpu";
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
            model[strcspn(model, "\n")] = 0;
            break;
        }
    if (f)
        fclose(f);
    struct utsname u;
    uname(&u);
    printf("%s, Linux %s\n", model, u.release);
    show("page_reporting_order");
    show("reported_kib");
    printf("\n");
}

int main(int argc, char **argv) {
    const size_t chunk = 64 << 20, page = 4096;
    size_t size = (argc > 1 ? strtoull(argv[1], 0, 10) : 1024) << 20;
    if (size == 0 || size % chunk) {
        fprintf(stderr, "usage: %s MIB (a multiple of 64)\n", argv[0]);
        return 2;
    }
    machine();
    char *p = mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    madvise(p, size, MADV_NOHUGEPAGE); /* 4 KiB pages, as the page cache takes them */
    double t = now();
    for (size_t i = 0; i < size; i += page)
        p[i] = 1;
    t = now() - t;
    printf("%zu MiB, first touch:                      %.2f us/page\n", size >> 20,
           t * 1e6 / (size / page));
    t = now();
    for (size_t o = 0; o < size; o += chunk) {
        madvise(p + o, chunk, MADV_DONTNEED);
        for (size_t i = o; i < o + chunk; i += page)
            p[i] = 1;
    }
    t = now() - t;
    printf("%zu MiB, freed and touched again by 64 MiB: %.2f us/page\n", size >> 20,
           t * 1e6 / (size / page));
    show("reported_kib");
    printf("\n");
    return 0;
}
