/*
 * A write to the application's own read-only page is an access error (SEGV_ACCERR), the
 * same si_code ickpt's tracked pages raise, but the page is not ickpt's: the process must
 * die by SIGSEGV. The read-only page sits between two protected pages to make the lookup
 * non-trivial.
 */
#include "check.h"

#include <sys/mman.h>

int main(void) {
    const size_t ps = page_size();
    OK(test_init(test_dir(), 0));
    unsigned char *mem = mmap(NULL, 3 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED);
    OK(ickpt_protect(1, mem, ps));
    OK(ickpt_protect(2, mem + 2 * ps + 100, 200));
    CHECK(mprotect(mem + ps, ps, PROT_READ) == 0);
    OK(ickpt_checkpoint(NULL));
    mem[7] = 1;             /* tracked */
    mem[2 * ps + 150] = 2;  /* tracked (region 2's page) */
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));
    CHECK(info.kind == ICKPT_KIND_INCREMENTAL && info.pages == 2);
    CHECK(mem[ps + 9] == 0); /* reading the read-only page is fine */

    fault_marker();
    volatile unsigned char *ro = mem + ps + 9;
    *ro = 3;

    printf("FAIL: a write to a read-only page did not kill the process\n");
    return 0;
}
