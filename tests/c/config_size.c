/*
 * ickpt_config's struct_size (docs/abi.md rule 7). A program built against an older, shorter
 * ickpt_config works: the fields it lacks take their defaults, and nothing past its struct is
 * read (each struct ends right before an inaccessible page). One built against a longer, newer
 * ickpt_config works while the fields this library does not know are zero, and is refused
 * when one is set. Sizes no version can have are refused.
 */
#include "check.h"

#include <stddef.h>
#include <sys/mman.h>

/* The symbol programs built before ickpt_config_init_sized call (the header's macro hides
 * it; the parentheses keep the macro from expanding here). */
ickpt_result(ickpt_config_init)(ickpt_config *cfg);

/* A newer program's struct: this library's fields, then fields it does not know. */
struct config_next {
    ickpt_config known;
    uint64_t future[2];
};

/* `size` writable bytes that end right before an inaccessible page. */
static void *before_guard_page(size_t size) {
    const size_t ps = page_size();
    unsigned char *m = mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    CHECK(mprotect(m + ps, ps, PROT_NONE) == 0);
    return m + ps - size;
}

/* Four checkpoints of a small region must come out full, incremental, incremental, full:
 * full_every 3 reached ickpt_init. */
static void check_full_every_3(void) {
    static unsigned char buf[4096];
    const uint32_t want[4] = {ICKPT_KIND_FULL, ICKPT_KIND_INCREMENTAL, ICKPT_KIND_INCREMENTAL,
                              ICKPT_KIND_FULL};
    ickpt_checkpoint_info info;
    OK(ickpt_protect(1, buf, sizeof buf));
    for (int i = 0; i < 4; i++) {
        buf[i] = (unsigned char)(i + 1);
        OK(ickpt_checkpoint(&info));
        CHECK_MSG(info.kind == want[i], "checkpoint %d: kind %u, expected %u", i, info.kind, want[i]);
    }
    OK(ickpt_finalize());
}

int main(void) {
    /* Every size ickpt_config has had: the first layout ended after dir, the next after
     * bandwidth, then after cow_bytes. */
    const size_t sizes[] = {offsetof(ickpt_config, bandwidth), offsetof(ickpt_config, mode),
                            offsetof(ickpt_config, granularity), offsetof(ickpt_config, precopy),
                            sizeof(ickpt_config)};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "size-%zu", sizes[i]);
        ickpt_config cfg;
        OK(ickpt_config_init(&cfg));
        cfg.struct_size = (uint32_t)sizes[i];
        cfg.full_every = 3;
        cfg.dir = test_subdir(name);
        void *old = before_guard_page(sizes[i]);
        memcpy(old, &cfg, sizes[i]);
        OK(ickpt_init(old));
        check_full_every_3();
        printf("struct_size %zu: accepted, defaults for the rest\n", sizes[i]);
    }

    /* ickpt_config_init (the header's macro) fills the caller's struct and nothing past it,
     * whatever size the program was built with. */
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        ickpt_config *old = before_guard_page(sizes[i]);
        OK(ickpt_config_init_sized(old, sizes[i]));
        CHECK(old->struct_size == sizes[i] && old->full_every == 10 && old->dir == NULL);
    }
    CHECK_RC(ickpt_config_init_sized(before_guard_page(8), 8), ICKPT_ERR_INVALID_ARGUMENT);
    ickpt_config *frozen = before_guard_page(64);
    OK((ickpt_config_init)(frozen));
    CHECK(frozen->struct_size == 64 && frozen->keep_chains == 2);
    printf("ickpt_config_init: writes the caller's size only\n");

    /* Longer, with what this library does not know zero. */
    struct config_next next;
    memset(&next, 0, sizeof next);
    OK(ickpt_config_init(&next.known));
    next.known.struct_size = sizeof next;
    next.known.full_every = 3;
    next.known.dir = test_subdir("longer");
    OK(ickpt_init(&next.known));
    check_full_every_3();

    /* ... and with a field this library does not know set. */
    next.future[1] = 1;
    CHECK_RC(ickpt_init(&next.known), ICKPT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(ickpt_last_error(), "struct_size") != NULL);
    next.future[1] = 0;
    next.future[0] = 1ull << 63;
    CHECK_RC(ickpt_init(&next.known), ICKPT_ERR_INVALID_ARGUMENT);
    printf("struct_size %zu: accepted with zeros past this library's fields, refused otherwise\n",
           sizeof next);

    /* Sizes no ickpt_config has: shorter than the first, not a multiple of its alignment,
     * larger than a page (then not a byte of it may be read). */
    const uint32_t bad[] = {0, 4, offsetof(ickpt_config, dir), offsetof(ickpt_config, mode) + 4,
                            sizeof(ickpt_config) + 1, 4096 + 8};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ickpt_config cfg;
        OK(ickpt_config_init(&cfg));
        cfg.struct_size = bad[i];
        cfg.dir = test_subdir("never-created");
        ickpt_config *at = before_guard_page(sizeof cfg);
        *at = cfg;
        CHECK_RC(ickpt_init(at), ICKPT_ERR_INVALID_ARGUMENT);
    }
    CHECK_RC(ickpt_finalize(), ICKPT_ERR_NOT_INITIALIZED);
    printf("config_size: ok\n");
    return 0;
}
