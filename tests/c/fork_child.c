/*
 * A child forked after ickpt_init is another live process: the store is held by its parent,
 * so the child must not be able to commit into it. (Its ickpt_init may say
 * ICKPT_ERR_STORE_LOCKED, or ICKPT_ERR_ALREADY_INITIALIZED since it inherited the parent's
 * state; but its ickpt_checkpoint must fail, or parent and child both write "version N+1"
 * into one store and one silently replaces the other.)
 *
 * Child exit status: 0 = refused as required, 10 + code = unexpected ickpt_init result,
 * 20 = the child committed a version into the parent's store.
 */
#include "check.h"

#include <dirent.h>
#include <sys/mman.h>
#include <sys/wait.h>

static int version_files(const char *dir) {
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] == 'v' && strstr(e->d_name, ".ickpt") != NULL;
    closedir(d);
    return n;
}

int main(void) {
    const char *dir = test_dir();
    const size_t ps = page_size();
    unsigned char *data = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(data != MAP_FAILED);
    OK(test_init(dir, 0));
    OK(ickpt_protect(1, data, ps));
    data[0] = 'A';
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));
    const uint64_t v1 = info.version;

    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int r = test_init(dir, 0);
        printf("child: ickpt_init: %s (%s)\n", ickpt_result_name(r), ickpt_last_error());
        if (r != ICKPT_ERR_STORE_LOCKED && r != ICKPT_ERR_ALREADY_INITIALIZED)
            _exit(10 + r);
        data[0] = 'c';
        ickpt_checkpoint_info ci;
        r = ickpt_checkpoint(&ci);
        if (r == ICKPT_OK) {
            printf("child: ickpt_checkpoint committed version %llu into its parent's store\n",
                   (unsigned long long)ci.version);
            fflush(stdout);
            _exit(20);
        }
        printf("child: ickpt_checkpoint refused: %s (%s)\n", ickpt_result_name(r),
               ickpt_last_error());
        _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK_MSG(WIFEXITED(st), "the child died (status %#x)", st);
    CHECK_MSG(WEXITSTATUS(st) != 20,
              "a child forked after ickpt_init committed a version into the store its parent "
              "holds (two live processes writing one store)");
    CHECK_MSG(WEXITSTATUS(st) == 0, "child exit status %d", WEXITSTATUS(st));

    uint64_t v = 0;
    OK(ickpt_latest(&v));
    CHECK(v == v1);
    CHECK(version_files(dir) == 1);

    /* The parent carries on. */
    data[0] = 'p';
    OK(ickpt_checkpoint(&info));
    CHECK(info.kind == ICKPT_KIND_INCREMENTAL && info.parent == v1 && info.pages == 1);
    data[0] = 0;
    OK(ickpt_restore(info.version));
    CHECK(data[0] == 'p');
    OK(ickpt_finalize());
    printf("fork_child: ok\n");
    return 0;
}
