/*
 * A store on a file system without RENAME_NOREPLACE (NFS, many FUSE file systems): the store
 * is on an ickpt-testfs mount with the options run.sh passes (--no-rename-flags, alone, with
 * --no-link, or with --link-erofs as fusepy's file systems answer link(2)). Seven checkpoints, full and incremental, must commit, and garbage
 * collection must delete the versions older than the two newest chains; afterwards the
 * store holds only the marker and the kept versions, `ickpt verify` passes, and a new
 * process restores each kept version to exactly the bytes written.
 */
#include "mounts.h"
#include "store_checks.h"

#define LEN (48 * 4096u + 123) /* a region that ends mid-page */
#define ROUNDS 7

int main(int argc, char **argv) {
    int child = restore_child_main(argc, argv);
    if (child >= 0)
        return child;
    mounts_deadline(40);
    const char *backing = test_subdir("backing"), *mnt = test_subdir("mnt");
    const char *expected = test_subdir("expected");
    testfs_mount(backing, mnt, argv + 1);
    char store[4096];
    snprintf(store, sizeof store, "%s/store", mnt);

    ickpt_config cfg;
    OK(ickpt_config_init(&cfg));
    cfg.dir = store;
    cfg.full_every = 3;
    cfg.keep_chains = 2;
    OK(ickpt_init(&cfg));
    unsigned char *raw = malloc(LEN + 64), *mem = raw + 5; /* unaligned, too */
    CHECK(raw != NULL);
    memset(mem, 0, LEN);
    OK(ickpt_protect(1, mem, LEN));
    uint64_t versions[ROUNDS];
    int full = 0, incremental = 0, kept_from = 0, newest_full = 0;
    uint64_t seed = 42;
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < 40; i++) {
            size_t off = rng_next(&seed) % LEN;
            mem[off] = (unsigned char)rng_next(&seed);
        }
        ickpt_checkpoint_info info;
        OK(ickpt_checkpoint(&info));
        versions[r] = info.version;
        if (info.kind == ICKPT_KIND_FULL) {
            full++;
            kept_from = newest_full;
            newest_full = r;
        }
        incremental += info.kind == ICKPT_KIND_INCREMENTAL;
        expected_save(expected, info.version, mem, LEN);
        printf("version %llu committed (%s, %llu pages)\n", (unsigned long long)info.version,
               info.kind == ICKPT_KIND_FULL ? "full" : "incremental",
               (unsigned long long)info.pages);
    }
    CHECK_MSG(full >= 2 && incremental >= 2, "%d full and %d incremental versions", full,
              incremental);
    OK(ickpt_finalize());
    free(raw);

    /* Kept: the versions from the second newest full one on. */
    const int kept = ROUNDS - kept_from;
    int left = 0;
    int listed = store_versions(store, &left);
    CHECK_MSG(listed == kept && left == 0, "%d versions (%d kept) and %d other files in %s",
              listed, kept, left, store);
    cli_verify(store);
    restore_in_new_process(store, expected, LEN, versions + kept_from, kept);
    printf("fuse_rename: ok\n");
    return 0;
}
