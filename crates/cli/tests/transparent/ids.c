/* An unmodified program whose correctness depends on its process and thread ids staying what
 * they were: glibc's error-checking and recursive mutexes record their owner's thread id, and
 * a thread that holds one across a restart must still be its owner after it. Four workers take
 * both mutexes (the recursive one twice) and work while holding them, so a checkpoint mostly
 * finds one of them an owner; each round every worker compares getpid() and gettid() with what
 * they were when it started and counts unlocks the mutex refuses. argv[1] gets a line per
 * round; stdout the totals, which must be zero. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prog.h"

#define WORKERS 4

static pthread_mutex_t checked, recursive;
static pthread_barrier_t barrier;
static long rounds;
static int out;
static pid_t pid_at_start;
static long changed_ids, refused_unlocks;
static uint64_t sum;

static void *worker(void *arg) {
    long id = (long)arg;
    pid_t tid_at_start = gettid();
    uint64_t local = (uint64_t)(id + 1) * 0x9e3779b97f4a7c15ull;
    for (long r = 0; r < rounds; r++) {
        pthread_mutex_lock(&checked);
        pthread_mutex_lock(&recursive);
        pthread_mutex_lock(&recursive);
        for (int i = 0; i < 20000; i++)
            local = local * 6364136223846793005ull + (uint64_t)r;
        sum += local;
        if (gettid() != tid_at_start || getpid() != pid_at_start)
            changed_ids++;
        spin(200000);
        long refused = pthread_mutex_unlock(&recursive) != 0;
        refused += pthread_mutex_unlock(&recursive) != 0;
        refused += pthread_mutex_unlock(&checked) != 0;
        __atomic_add_fetch(&refused_unlocks, refused, __ATOMIC_RELAXED);
        if (pthread_barrier_wait(&barrier) == PTHREAD_BARRIER_SERIAL_THREAD) {
            char line[96];
            int len = snprintf(line, sizeof line, "round %ld %016llx %ld %ld\n", r,
                               (unsigned long long)sum, changed_ids, refused_unlocks);
            if (write(out, line, (size_t)len) != len)
                abort();
        }
        pthread_barrier_wait(&barrier);
    }
    return NULL;
}

int main(int argc, char **argv) {
    out = open_output(argc, argv, 3, "ids OUT ROUNDS");
    rounds = atol(argv[2]);
    pid_at_start = getpid();
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&checked, &a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&recursive, &a);
    pthread_barrier_init(&barrier, NULL, WORKERS);
    pthread_t t[WORKERS];
    for (long i = 0; i < WORKERS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    printf("sum %016llx, ids changed %ld times, %ld unlocks refused\n", (unsigned long long)sum,
           changed_ids, refused_unlocks);
    return 0;
}
