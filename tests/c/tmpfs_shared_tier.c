/*
 * The shared tier through the C API, as the README shows it. A store whose shared directory
 * is a 256 KiB tmpfs: versions of a 512 KiB region never fit there, yet every checkpoint
 * commits (locally); ickpt_wait_drained and ickpt_finalize fail with ICKPT_ERR_NO_SPACE
 * naming the shared directory. Then the same with a roomy shared directory given through
 * ICKPT_SHARED_DIR: after finalize every version is there, the local directory is deleted
 * (another node), and a new instance restores the newest version's bytes from the shared
 * copy and goes on numbering after it.
 */
#include "mounts.h"

#include <dirent.h>

#define LEN (128 * 4096u)

static void remove_store(const char *dir) {
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "%s: %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        CHECK_MSG(unlinkat(dirfd(d), e->d_name, 0) == 0, "%s/%s: %s", dir, e->d_name,
                  strerror(errno));
    }
    closedir(d);
    CHECK_MSG(rmdir(dir) == 0, "%s: %s", dir, strerror(errno));
}

static int file_count(const char *dir, char prefix) {
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] == prefix;
    closedir(d);
    return n;
}

int main(void) {
    mounts_deadline(60);
    const char *mnt = test_subdir("small");
    tmpfs_mount(mnt, "256k");
    char local[4096], shared[4096];
    snprintf(local, sizeof local, "%s/local-full", test_dir());
    snprintf(shared, sizeof shared, "%s/shared", mnt);

    ickpt_config cfg;
    OK(ickpt_config_init(&cfg));
    cfg.dir = local;
    cfg.shared_dir = shared;
    OK(ickpt_init(&cfg));
    unsigned char *mem = NULL;
    OK(ickpt_malloc(1, LEN, (void **)&mem));
    for (uint64_t i = 0; i < 3; i++) {
        fill_random(mem, LEN, 10 + i);
        OK(ickpt_checkpoint(NULL)); /* the full shared tier is no business of a checkpoint */
    }
    CHECK_RC(ickpt_wait_drained(), ICKPT_ERR_NO_SPACE);
    const char *msg = ickpt_last_error();
    printf("drain: %s\n", msg);
    CHECK_MSG(strstr(msg, shared) != NULL && strstr(msg, "shared tier") != NULL,
              "the message does not name the shared directory: \"%s\"", msg);
    CHECK_RC(ickpt_finalize(), ICKPT_ERR_NO_SPACE);
    CHECK_MSG(file_count(shared, 'v') == 0, "a version reached the full shared tier");
    CHECK_MSG(file_count(local, 'v') == 3, "%d versions in %s", file_count(local, 'v'), local);

    /* A roomy shared directory, from the environment. */
    static unsigned char want[LEN];
    char local2[4096], shared2[4096];
    snprintf(local2, sizeof local2, "%s/local", test_dir());
    snprintf(shared2, sizeof shared2, "%s/shared-roomy", test_dir());
    CHECK(setenv("ICKPT_SHARED_DIR", shared2, 1) == 0);
    cfg.dir = local2;
    cfg.shared_dir = NULL;
    OK(ickpt_init(&cfg));
    OK(ickpt_malloc(1, LEN, (void **)&mem));
    for (uint64_t i = 0; i < 4; i++) {
        fill_random(mem, LEN, 20 + i);
        OK(ickpt_checkpoint(NULL));
    }
    memcpy(want, mem, LEN);
    OK(ickpt_finalize()); /* waits for the drain */
    CHECK_MSG(file_count(shared2, 'v') == 4, "%d versions in %s", file_count(shared2, 'v'),
              shared2);

    remove_store(local2); /* the node is gone */
    OK(ickpt_init(&cfg));
    OK(ickpt_malloc(1, LEN, (void **)&mem));
    memset(mem, 0, LEN);
    uint64_t v = 0;
    OK(ickpt_restore_latest(&v));
    CHECK_MSG(v == 4, "restored version %llu, not 4", (unsigned long long)v);
    long at = first_diff(mem, want, LEN);
    CHECK_MSG(at < 0, "restored bytes differ at %ld", at);
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));
    CHECK_MSG(info.version == 5, "the next version is %llu, not 5",
              (unsigned long long)info.version);
    OK(ickpt_finalize());
    CHECK_MSG(file_count(shared2, 'v') == 5, "%d versions in %s, not 1-5",
              file_count(shared2, 'v'), shared2);
    printf("tmpfs_shared_tier: ok\n");
    return 0;
}
