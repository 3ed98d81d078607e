/*
 * The core's calls for coordinated checkpoints (ickpt_coord.h), as the MPI layer uses them: global-commit
 * records (ickpt_global_commit / _latest / _version), refusals (out of order, NULL, a
 * missing record), ickpt_discard_newer, after which the next checkpoint is full and the
 * restart finds the newest global version's bytes; ickpt_global_pin keeps a third record,
 * ickpt_global_at_most walks down to it, ickpt_drained_global (no lower tier) is the newest.
 */
#include "check.h"

#include <ickpt_coord.h>

static unsigned char mem[8 * 4096];

int main(void) {
    OK(test_init(test_dir(), 100));
    OK(ickpt_protect(1, mem, sizeof mem));
    uint64_t g = 0, v = 0;
    CHECK_RC(ickpt_global_latest(&g, &v), ICKPT_ERR_NOT_FOUND);
    for (uint64_t i = 1; i <= 4; i++) {
        mem[i * 4096] = (unsigned char)i;
        ickpt_checkpoint_info info;
        OK(ickpt_checkpoint(&info));
        CHECK(info.version == i);
        if (i <= 3)
            OK(ickpt_global_commit(i, info.version));
    }
    OK(ickpt_global_latest(&g, &v));
    CHECK(g == 3 && v == 3);
    OK(ickpt_global_version(2, &v));
    CHECK(v == 2);
    v = 77;
    CHECK_RC(ickpt_global_version(1, &v), ICKPT_ERR_NOT_FOUND); /* only two are kept */
    CHECK(v == 77);
    CHECK_RC(ickpt_global_commit(3, 4), ICKPT_ERR_INVALID_ARGUMENT);
    CHECK_RC(ickpt_global_commit(4, 99), ICKPT_ERR_NOT_FOUND);
    g = 55;
    v = 66;
    CHECK_RC(ickpt_global_latest(NULL, &v), ICKPT_ERR_INVALID_ARGUMENT);
    CHECK(v == 66);
    CHECK_RC(ickpt_global_latest(&g, NULL), ICKPT_ERR_INVALID_ARGUMENT);
    CHECK(g == 55);
    CHECK_RC(ickpt_global_version(2, NULL), ICKPT_ERR_INVALID_ARGUMENT);

    /* Version 4 was this rank's alone: discard it; the next checkpoint is full. */
    OK(ickpt_discard_newer(3));
    size_t n = 0;
    OK(ickpt_list_versions(NULL, 0, &n));
    CHECK(n == 3);
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));
    CHECK(info.kind == ICKPT_KIND_FULL && info.version == 5);
    OK(ickpt_global_commit(4, 5));

    /* Pinned, global 4 outlives two more records; the walk down from 6 finds it. */
    OK(ickpt_global_pin(4));
    for (uint64_t gl = 5; gl <= 6; gl++) {
        OK(ickpt_checkpoint(&info));
        OK(ickpt_global_commit(gl, info.version));
    }
    uint64_t drained = 0;
    OK(ickpt_drained_global(&drained));
    CHECK(drained == 6);
    OK(ickpt_global_at_most(4, &g, &v));
    CHECK(g == 4 && v == 5);
    OK(ickpt_global_at_most(100, &g, &v));
    CHECK(g == 6);
    CHECK_RC(ickpt_global_at_most(3, &g, &v), ICKPT_ERR_NOT_FOUND);
    CHECK_RC(ickpt_drained_global(NULL), ICKPT_ERR_INVALID_ARGUMENT);
    /* Back to global 4 for the restart below. */
    OK(ickpt_global_at_most(4, &g, &v));
    OK(ickpt_discard_newer(v));
    OK(ickpt_finalize());

    memset(mem, 0, sizeof mem);
    OK(test_init(test_dir(), 100));
    OK(ickpt_protect(1, mem, sizeof mem));
    OK(ickpt_global_latest(&g, &v));
    CHECK(g == 4 && v == 5);
    OK(ickpt_restore(v));
    for (int i = 1; i <= 4; i++)
        CHECK(mem[i * 4096] == i);
    OK(ickpt_finalize());
    printf("global records ok\n");
    return 0;
}
