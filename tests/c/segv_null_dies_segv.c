/*
 * A genuine segfault must still kill the process with SIGSEGV while ickpt's handler is
 * installed: tracked writes work, then a write through NULL (SEGV_MAPERR, not ickpt's) goes
 * to the default action. run.sh expects death by SIGSEGV after the marker line.
 */
#include "check.h"

#include <sys/mman.h>

int main(void) {
    const size_t ps = page_size();
    OK(test_init(test_dir(), 0));
    unsigned char *mem = mmap(NULL, 4 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED);
    OK(ickpt_protect(1, mem, 4 * ps));
    OK(ickpt_checkpoint(NULL));
    mem[10] = 1; /* tracked write faults, handled by ickpt */
    mem[3 * ps + 5] = 2;
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));
    CHECK(info.kind == ICKPT_KIND_INCREMENTAL && info.pages == 2);
    CHECK(mem[10] == 1 && mem[3 * ps + 5] == 2);

    fault_marker();
    write_through_null(42);

    printf("FAIL: a write through NULL did not kill the process\n");
    return 0;
}
