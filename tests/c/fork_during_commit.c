/*
 * fork() while an async commit runs: the child inherits pages scheduled for a commit whose
 * committer thread did not come along. Its writes to them must not wait for that committer
 * (they would hang forever); the parent's commit must finish unharmed.
 *
 * The commit is held open by slow emulated storage (64 pages at 256 KiB/s take about a
 * second), so the fork lands inside it; the checks hold wherever it lands.
 */
#include "check.h"

#include <sys/wait.h>

#define NPAGES 64

int main(void) {
    const size_t ps = page_size();
    ickpt_config cfg;
    OK(ickpt_config_init(&cfg));
    cfg.dir = test_dir();
    cfg.mode = ICKPT_MODE_ASYNC;
    cfg.cow_bytes = 0; /* every write to a scheduled page would wait for the committer */
    cfg.bandwidth = 256u << 10;
    OK(ickpt_init(&cfg));
    void *p = NULL;
    OK(ickpt_malloc(1, NPAGES * ps, &p));
    unsigned char *mem = p;
    memset(mem, 7, NPAGES * ps);
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));

    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* Scheduled pages, no committer: these writes must simply go through. */
        for (size_t i = 0; i < NPAGES; i++)
            mem[i * ps] = 9;
        for (size_t i = 0; i < NPAGES; i++)
            if (mem[i * ps] != 9)
                _exit(3);
        _exit(0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);

    ickpt_checkpoint_info done;
    OK(ickpt_wait(&done));
    CHECK(done.version == info.version);
    mem[0] = 1;
    OK(ickpt_restore(info.version));
    for (size_t i = 0; i < NPAGES * ps; i++)
        CHECK(mem[i] == 7);
    OK(ickpt_finalize());
    printf("fork_during_commit: child wrote through, parent's version intact\n");
    return 0;
}
