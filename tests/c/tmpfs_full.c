/*
 * A really full device: the store on a 4 MiB tmpfs that a filler file has partly taken.
 * Checkpoints of a 512 KiB region, every page rewritten each time, commit until the device
 * is full; that one fails with ICKPT_ERR_NO_SPACE and a message naming its file and saying
 * the earlier checkpoints are intact. Then every listed version verifies (`ickpt verify`)
 * and restores exactly in a new process; with the filler deleted, a new instance restores
 * the newest version and its next checkpoint commits and restores exactly too.
 */
#include "mounts.h"
#include "store_checks.h"

#include <fcntl.h>

#define LEN (128 * 4096u)
#define FILLER (1536 * 1024u)
#define MAX_VERSIONS 16

static void write_filler(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    CHECK_MSG(fd >= 0, "%s: %s", path, strerror(errno));
    static unsigned char block[64 * 1024];
    memset(block, 0xF1, sizeof block);
    for (size_t done = 0; done < FILLER; done += sizeof block)
        CHECK_MSG(write(fd, block, sizeof block) == (ssize_t)sizeof block, "%s: %s", path,
                  strerror(errno));
    CHECK(close(fd) == 0);
}

int main(int argc, char **argv) {
    int child = restore_child_main(argc, argv);
    if (child >= 0)
        return child;
    mounts_deadline(40);
    const char *mnt = test_subdir("mnt"), *expected = test_subdir("expected");
    tmpfs_mount(mnt, "4m");
    char store[4096], filler[4096];
    snprintf(store, sizeof store, "%s/store", mnt);
    snprintf(filler, sizeof filler, "%s/filler", mnt);
    write_filler(filler);

    OK(test_init(store, 0));
    unsigned char *mem = NULL;
    OK(ickpt_malloc(1, LEN, (void **)&mem));
    uint64_t versions[MAX_VERSIONS];
    int n = 0, rc = ICKPT_OK;
    while (n < MAX_VERSIONS) {
        fill_random(mem, LEN, 100 + (uint64_t)n);
        ickpt_checkpoint_info info;
        rc = ickpt_checkpoint(&info);
        if (rc != ICKPT_OK)
            break;
        versions[n++] = info.version;
        expected_save(expected, info.version, mem, LEN);
        printf("version %llu committed (%llu pages)\n", (unsigned long long)info.version,
               (unsigned long long)info.pages);
    }
    CHECK_MSG(rc == ICKPT_ERR_NO_SPACE, "after %d versions: %s, not ICKPT_ERR_NO_SPACE (%s)", n,
              ickpt_result_name(rc), rc == ICKPT_OK ? "the device never filled" : ickpt_last_error());
    CHECK_MSG(n >= 2, "only %d versions fit before the device was full", n);
    const char *msg = ickpt_last_error();
    printf("full: %s\n", msg);
    CHECK_MSG(strstr(msg, store) != NULL && strstr(msg, ".ickpt") != NULL,
              "the message does not name the version file: \"%s\"", msg);
    CHECK_MSG(strstr(msg, "earlier checkpoints are intact") != NULL,
              "the message does not say the earlier checkpoints are intact: \"%s\"", msg);
    uint64_t latest = 0;
    OK(ickpt_latest(&latest));
    CHECK(latest == versions[n - 1]);
    OK(ickpt_finalize());

    int left = 0;
    int listed = store_versions(store, &left);
    CHECK_MSG(listed == n && left == 0, "%d versions (%d committed) and %d other files in %s",
              listed, n, left, store);
    cli_verify(store);
    restore_in_new_process(store, expected, LEN, versions, n);

    /* Space again: the next checkpoint of a new instance commits. */
    CHECK_MSG(unlink(filler) == 0, "%s: %s", filler, strerror(errno));
    OK(test_init(store, 0));
    OK(ickpt_malloc(1, LEN, (void **)&mem));
    OK(ickpt_restore(latest));
    fill_random(mem, LEN, 999);
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));
    expected_save(expected, info.version, mem, LEN);
    printf("after freeing space: version %llu committed\n", (unsigned long long)info.version);
    OK(ickpt_finalize());
    cli_verify(store);
    restore_in_new_process(store, expected, LEN, &info.version, 1);
    printf("tmpfs_full: ok\n");
    return 0;
}
