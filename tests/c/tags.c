/*
 * Tags: each version carries the application's value given to ickpt_checkpoint_tagged (an
 * iteration number here), in sync and in async mode; ickpt_checkpoint gives 0. After
 * finalize and a fresh init, ickpt_restore_latest_tagged returns the newest version and its
 * tag and the memory of that iteration; ickpt_version_tag reads any version's tag; NULL
 * out-parameters are refused and leave the other one untouched.
 */
#include "check.h"

static uint64_t iter[512];

/* Every init starts a new chain (a full version): keep them all. */
static void init(uint32_t mode) {
    ickpt_config cfg;
    OK(ickpt_config_init(&cfg));
    cfg.mode = mode;
    cfg.dir = test_dir();
    cfg.keep_chains = 10;
    OK(ickpt_init(&cfg));
}

static void run(uint32_t mode, uint64_t first_tag) {
    init(mode);
    OK(ickpt_protect(1, iter, sizeof iter));
    for (uint64_t i = 0; i < 3; i++) {
        uint64_t tag = first_tag + i;
        iter[tag % 512] = tag;
        ickpt_checkpoint_info info;
        OK(ickpt_checkpoint_tagged(tag, &info));
        OK(ickpt_wait(&info));
    }
    OK(ickpt_finalize());
}

int main(void) {
    run(ICKPT_MODE_SYNC, 100);  /* versions 1..3, tags 100..102 */
    run(ICKPT_MODE_ASYNC, 200); /* versions 4..6, tags 200..202 */

    init(ICKPT_MODE_SYNC);
    OK(ickpt_protect(1, iter, sizeof iter));
    ickpt_checkpoint_info info;
    memset(iter, 0, sizeof iter);
    iter[7] = 7;
    OK(ickpt_checkpoint(&info)); /* version 7, no tag */
    CHECK(info.version == 7);
    uint64_t tag = 99;
    OK(ickpt_version_tag(7, &tag));
    CHECK_MSG(tag == 0, "an untagged version has tag 0, got %llu", (unsigned long long)tag);
    for (uint64_t v = 1; v <= 6; v++) {
        OK(ickpt_version_tag(v, &tag));
        uint64_t want = v <= 3 ? 99 + v : 196 + v;
        CHECK_MSG(tag == want, "version %llu: tag %llu, want %llu", (unsigned long long)v,
                  (unsigned long long)tag, (unsigned long long)want);
    }
    tag = 12345;
    CHECK_RC(ickpt_version_tag(99, &tag), ICKPT_ERR_NOT_FOUND);
    CHECK(tag == 12345);
    CHECK_RC(ickpt_version_tag(1, NULL), ICKPT_ERR_INVALID_ARGUMENT);
    OK(ickpt_finalize());

    /* Delete version 7 by hand: the restart then finds version 6 and its tag. */
    char path[4096];
    snprintf(path, sizeof path, "%s/v00000007.ickpt", test_dir());
    CHECK(unlink(path) == 0);

    init(ICKPT_MODE_SYNC);
    OK(ickpt_protect(1, iter, sizeof iter));
    memset(iter, 0, sizeof iter);
    /* Out-parameters are written only on success: sentinels a restore would not give. */
    uint64_t v = 4242;
    tag = 4343;
    CHECK_RC(ickpt_restore_latest_tagged(&v, NULL), ICKPT_ERR_INVALID_ARGUMENT);
    CHECK(v == 4242);
    CHECK_RC(ickpt_restore_latest_tagged(NULL, &tag), ICKPT_ERR_INVALID_ARGUMENT);
    CHECK(tag == 4343);
    OK(ickpt_restore_latest_tagged(&v, &tag));
    CHECK_MSG(v == 6 && tag == 202, "restored version %llu tag %llu, want 6 and 202",
              (unsigned long long)v, (unsigned long long)tag);
    for (uint64_t t = 100; t <= 102; t++)
        CHECK(iter[t % 512] == t);
    for (uint64_t t = 200; t <= 202; t++)
        CHECK(iter[t % 512] == t);
    CHECK(iter[7] == 0);
    OK(ickpt_finalize());
    printf("tags ok\n");
    return 0;
}
