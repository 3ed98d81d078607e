/*
 * Adaptive (ACCK) granularity from C: a region written front to back stops trapping once the
 * heads of its pieces are written, and every version still restores exactly. With the
 * uffd-async backend first writes never reach ickpt, so nothing is released.
 */
#include "check.h"

#include <sys/mman.h>

int main(void) {
    const size_t ps = page_size();
    const size_t npages = 4096; /* 64 pieces of 64 pages; a head is 7 pages */
    unsigned char *mem = mmap(NULL, npages * ps, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED);
    memset(mem, 1, npages * ps);
    ickpt_config cfg;
    OK(ickpt_config_init(&cfg));
    cfg.dir = test_dir();
    cfg.full_every = 100;
    cfg.granularity = ICKPT_GRANULARITY_ADAPTIVE;
    OK(ickpt_init(&cfg));
    OK(ickpt_protect(1, mem, npages * ps));
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));
    ickpt_stats st0, st;
    OK(ickpt_get_stats(&st0));

    /* A sweep over everything: far fewer traps than pages. */
    for (size_t p = 0; p < npages; p++)
        mem[p * ps + 17] = (unsigned char)(p * 3);
    OK(ickpt_checkpoint(&info));
    CHECK(info.pages == npages);
    OK(ickpt_get_stats(&st));
    const uint64_t traps = st.faults - st0.faults;
    printf("sweep of %zu pages: %llu traps, %llu pages released, %llu huge spans\n", npages,
           (unsigned long long)traps, (unsigned long long)st.acck_released_pages,
           (unsigned long long)st.acck_huge_spans);
    if (st.backend == ICKPT_BACKEND_UFFD_ASYNC) {
        CHECK(st.acck_released_pages == 0);
    } else {
        CHECK_MSG(traps < npages / 4, "%llu traps for %zu pages", (unsigned long long)traps,
                  npages);
        CHECK(st.acck_released_pages + traps >= npages - 2);
        CHECK(st.monitor_ns > 0);
    }

    /* Monitored page by page again: a scattered write is one page. */
    mem[1000 * ps + 5] = 42;
    OK(ickpt_checkpoint(&info));
    CHECK(info.pages == 1);
    CHECK_RESTORES_TO_NOW(info.version, mem, npages * ps);
    OK(ickpt_finalize());
    printf("acck: ok\n");
    return 0;
}
