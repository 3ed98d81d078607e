/*
 * A store on an ickpt-testfs mount whose writes or fsyncs start failing part-way:
 *   fuse_faults RESULT_NAME OPTION     (run.sh: ICKPT_ERR_IO --eio-after, ICKPT_ERR_IO
 *                                       --eio-fsync-after, ICKPT_ERR_NO_SPACE --enospc-after)
 * OPTION gets 1.5 region lengths as its byte count: version 1 (a full one, one region
 * length and a little) commits below it; version 2 rewrites every page and crosses it, so
 * its write (or, for the fsync fault, its commit's fsync) fails. ickpt_checkpoint must return
 * RESULT_NAME with a message naming version 2's file, list only version 1, leave no
 * temporary behind, and version 1 must still verify and restore exactly in a new process.
 */
#include "mounts.h"
#include "store_checks.h"

#define LEN (256 * 4096u)

int main(int argc, char **argv) {
    int child = restore_child_main(argc, argv);
    if (child >= 0)
        return child;
    if (argc != 3) {
        fprintf(stderr, "usage: %s RESULT_NAME TESTFS_OPTION\n", argv[0]);
        return 2;
    }
    const int want = result_code_named(argv[1]);
    mounts_deadline(40);
    const char *backing = test_subdir("backing"), *mnt = test_subdir("mnt");
    const char *expected = test_subdir("expected");
    char limit[32];
    snprintf(limit, sizeof limit, "%u", LEN + LEN / 2);
    char *opts[] = {argv[2], limit, NULL};
    testfs_mount(backing, mnt, opts);
    char store[4096];
    snprintf(store, sizeof store, "%s/store", mnt);

    OK(test_init(store, 0));
    unsigned char *mem = NULL;
    OK(ickpt_malloc(1, LEN, (void **)&mem));
    fill_random(mem, LEN, 1);
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));
    const uint64_t v1 = info.version;
    CHECK(info.kind == ICKPT_KIND_FULL);
    expected_save(expected, v1, mem, LEN);
    printf("version %llu committed\n", (unsigned long long)v1);

    fill_random(mem, LEN, 2);
    memset(&info, 0x5C, sizeof info);
    CHECK_RC(ickpt_checkpoint(&info), want);
    const char *msg = ickpt_last_error();
    printf("version 2 failed as injected: %s: %s\n", ickpt_result_name(want), msg);
    char file[4200];
    snprintf(file, sizeof file, "%s/v%08llu.ickpt", store, (unsigned long long)(v1 + 1));
    CHECK_MSG(strstr(msg, file) != NULL, "the message does not name %s: \"%s\"", file, msg);
    uint64_t latest = 0;
    OK(ickpt_latest(&latest));
    CHECK_MSG(latest == v1, "latest is %llu after the failed checkpoint, not %llu",
              (unsigned long long)latest, (unsigned long long)v1);
    OK(ickpt_finalize());

    int left = 0;
    int listed = store_versions(store, &left);
    CHECK_MSG(listed == 1 && left == 0, "%d versions and %d other files in %s", listed, left,
              store);
    cli_verify(store);
    restore_in_new_process(store, expected, LEN, &v1, 1);
    printf("fuse_faults (%s): ok\n", argv[2]);
    return 0;
}
