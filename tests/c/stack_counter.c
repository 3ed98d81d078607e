/*
 * The loop counter in protected memory on the stack, as VeloC and FTI codes do it:
 * `ickpt_protect(1, &i, sizeof i)` in the function that loops, a checkpoint at the top of
 * every fifth iteration, a run killed part-way and a new process that restores and finishes.
 * A counter on the stack shares its page with the frames of every call the loop makes, ickpt's
 * own included: before threads protecting their own stack got an alternate signal stack, the
 * restore (mprotect, uffd-async) died by SIGSEGV inside ickpt.
 *
 * Phases: sync and async mode, with and without copy-on-write room (each a killed child and a
 * restoring parent); then threads that each protect a counter on their own stack, write it
 * across checkpoints taken by main, and unprotect it before they exit (their alternate stacks
 * are released and made again).
 */
#include "check.h"

#include <pthread.h>
#include <sys/wait.h>

#define N 40
#define CRASH_AT 23 /* the last checkpoint before it is at the top of iteration 20 */
#define DATA 3000

static void work(double *data, uint64_t *acc, int i) {
    for (int k = 0; k < DATA; k++)
        data[k] = data[k] * 0.75 + (double)((i * 7 + k) % 13);
    acc[i % 8] += (uint64_t)(data[i % DATA] * 1000.0) + (uint64_t)i;
}

/* Runs the loop with its state on this frame; returns the iteration it started from. */
static int compute(const char *dir, uint32_t mode, uint64_t cow_bytes, int crash_at, double *out,
                   uint64_t *acc_out) {
    ickpt_config cfg;
    OK(ickpt_config_init(&cfg));
    cfg.dir = dir;
    cfg.mode = mode;
    cfg.cow_bytes = cow_bytes;
    OK(ickpt_init(&cfg));
    int i = 0;
    uint64_t acc[8] = {0};
    double *data = calloc(DATA, sizeof *data);
    CHECK(data != NULL);
    OK(ickpt_protect(1, &i, sizeof i));
    OK(ickpt_protect(2, acc, sizeof acc));
    OK(ickpt_protect(3, data, DATA * sizeof *data));
    uint64_t v;
    if (ickpt_latest(&v) == ICKPT_OK)
        OK(ickpt_restore(v));
    const int from = i;
    for (; i < N; i++) {
        if (i % 5 == 0)
            OK(ickpt_checkpoint(NULL));
        if (i == crash_at) {
            OK(ickpt_wait(NULL)); /* async: the checkpoint at 20 is on disk */
            raise(SIGKILL);
        }
        work(data, acc, i);
    }
    OK(ickpt_finalize());
    memcpy(out, data, DATA * sizeof *data);
    memcpy(acc_out, acc, sizeof acc);
    free(data);
    return from;
}

static void crash_then_restart(const char *dir, uint32_t mode, uint64_t cow_bytes) {
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        double got[DATA];
        uint64_t acc[8];
        compute(dir, mode, cow_bytes, CRASH_AT, got, acc);
        _exit(5); /* not reached: killed at CRASH_AT */
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
              "the first run must be killed at iteration %d (status %#x)", CRASH_AT, status);

    static double got[DATA], want[DATA];
    uint64_t acc[8], want_acc[8] = {0};
    const int from = compute(dir, mode, cow_bytes, -1, got, acc);
    CHECK_MSG(from == 20, "restarted at iteration %d, expected 20", from);
    memset(want, 0, sizeof want);
    for (int i = 0; i < N; i++)
        work(want, want_acc, i);
    CHECK_MEM_EQ(got, want, sizeof want);
    CHECK_MEM_EQ(acc, want_acc, sizeof want_acc);
    printf("stack_counter: mode %u, cow_bytes %llu: restarted at %d and finished\n", mode,
           (unsigned long long)cow_bytes, from);
}

/* ---- threads protecting their own stack ---- */

static pthread_barrier_t bar;

static void *own_counter(void *arg) {
    const uint64_t id = (uint64_t)(uintptr_t)arg;
    volatile uint64_t j = 0;
    OK(ickpt_protect(id, (void *)&j, sizeof j));
    for (int round = 0; round < 3; round++) {
        j = j * 3 + id + (uint64_t)round; /* faults: main checkpointed since the last write */
        pthread_barrier_wait(&bar);       /* main checkpoints */
        pthread_barrier_wait(&bar);
    }
    const uint64_t seen = j;
    OK(ickpt_unprotect(id));
    return (void *)(uintptr_t)seen;
}

static void threads(const char *dir) {
    OK(test_init(dir, 0));
    for (int gen = 0; gen < 3; gen++) {
        pthread_t t[2];
        CHECK(pthread_barrier_init(&bar, NULL, 3) == 0);
        for (int k = 0; k < 2; k++)
            CHECK(pthread_create(&t[k], NULL, own_counter, (void *)(uintptr_t)(10 + k)) == 0);
        for (int round = 0; round < 3; round++) {
            pthread_barrier_wait(&bar);
            /* Restoring what was just taken changes no byte, and protects their stacks again
             * while they wait. */
            ickpt_checkpoint_info info;
            OK(ickpt_checkpoint(&info));
            OK(ickpt_restore(info.version));
            pthread_barrier_wait(&bar);
        }
        for (int k = 0; k < 2; k++) {
            void *ret;
            CHECK(pthread_join(t[k], &ret) == 0);
            uint64_t want = 0, id = 10 + (uint64_t)k;
            for (int round = 0; round < 3; round++)
                want = want * 3 + id + (uint64_t)round;
            CHECK_MSG((uint64_t)(uintptr_t)ret == want, "thread %d saw %llu, expected %llu", k,
                      (unsigned long long)(uintptr_t)ret, (unsigned long long)want);
        }
        pthread_barrier_destroy(&bar);
    }
    OK(ickpt_finalize());
}

int main(void) {
    alarm(50); /* a hang is a failure */
    crash_then_restart(test_subdir("sync"), ICKPT_MODE_SYNC, 16u << 20);
    crash_then_restart(test_subdir("async"), ICKPT_MODE_ASYNC, 16u << 20);
    /* No copy-on-write room: the checkpointing thread's own writes to its stack page during
     * the commit must not abort it (they take one of the slots kept for ickpt's threads). */
    crash_then_restart(test_subdir("sync-cow0"), ICKPT_MODE_SYNC, 0);
    crash_then_restart(test_subdir("async-cow0"), ICKPT_MODE_ASYNC, 0);
    threads(test_subdir("threads"));
    return 0;
}
