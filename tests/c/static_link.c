/*
 * Built against libickpt.a (run.sh checks the binary does not load libickpt.so), twice: with
 * pkg-config's ickpt-static flags, and fully static (cc -static, pkg-config --static ickpt). A
 * short protect / checkpoint / write / restore round trip proves the static library is
 * complete (signal handling, store, format) with only those flags.
 */
#include "check.h"

#include <sys/mman.h>

int main(void) {
    const size_t ps = page_size();
    const size_t len = 8 * ps;
    unsigned char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED);
    unsigned char *want = malloc(len);
    CHECK(want != NULL);

    OK(test_init(test_dir(), 0));
    OK(ickpt_protect(1, mem, len));
    for (size_t i = 0; i < len; i++)
        mem[i] = (unsigned char)(i * 7 + 1);
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));
    CHECK(info.kind == ICKPT_KIND_FULL && info.pages == 8);
    mem[3 * ps] = 0xEE;
    OK(ickpt_checkpoint(&info));
    CHECK(info.kind == ICKPT_KIND_INCREMENTAL && info.pages == 1);
    memcpy(want, mem, len);

    memset(mem, 0, len);
    uint64_t v = 0;
    OK(ickpt_latest(&v));
    CHECK(v == info.version);
    OK(ickpt_restore(v));
    CHECK_MEM_EQ(mem, want, len);
    OK(ickpt_finalize());
    free(want);
    printf("static_link: ok (ickpt %s)\n", ickpt_version());
    return 0;
}
