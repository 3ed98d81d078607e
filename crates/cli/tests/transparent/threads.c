/* An unmodified program with 16 threads for `ickpt run` tests: each round every worker
 * updates its own slice under a mutex-protected shared sum, meets the others at a barrier,
 * and one of them signals a condition variable the main thread waits on. Most threads are in
 * futex waits when a checkpoint stops them. Each round appends a checksum line to argv[1];
 * stdout gets the final result once, after pthread_join of every worker. */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prog.h"

#define WORKERS 16
#define SLICE 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static pthread_barrier_t barrier;
static uint64_t shared_sum;
static long rounds_done;
static long rounds;
static uint64_t *data;
static int out;

static void *worker(void *arg) {
    long id = (long)arg;
    uint64_t local = (uint64_t)id * 2654435761u; /* lives on this thread's stack */
    for (long r = 0; r < rounds; r++) {
        uint64_t *mine = data + id * SLICE;
        for (int i = 0; i < SLICE; i++) {
            mine[i] = mine[i] * 6364136223846793005ull + local + (uint64_t)r;
            local ^= mine[i] >> 17;
        }
        pthread_mutex_lock(&lock);
        shared_sum += local * 2654435761u; /* commutative: any order of the workers */
        pthread_mutex_unlock(&lock);
        if (pthread_barrier_wait(&barrier) == PTHREAD_BARRIER_SERIAL_THREAD) {
            pthread_mutex_lock(&lock);
            char line[64];
            int len = snprintf(line, sizeof line, "round %ld %016llx\n", r,
                               (unsigned long long)shared_sum);
            if (write(out, line, (size_t)len) != len)
                abort();
            rounds_done = r + 1;
            pthread_cond_signal(&done_cond);
            pthread_mutex_unlock(&lock);
            spin(1000000);
        }
        pthread_barrier_wait(&barrier);
    }
    return (void *)(uintptr_t)local;
}

int main(int argc, char **argv) {
    out = open_output(argc, argv, 3, "threads OUT ROUNDS");
    rounds = atol(argv[2]);
    data = calloc(WORKERS * SLICE, sizeof *data);
    pthread_barrier_init(&barrier, NULL, WORKERS);
    pthread_t t[WORKERS];
    for (long i = 0; i < WORKERS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    pthread_mutex_lock(&lock);
    while (rounds_done < rounds)
        pthread_cond_wait(&done_cond, &lock);
    pthread_mutex_unlock(&lock);
    uint64_t total = shared_sum;
    for (int i = 0; i < WORKERS; i++) {
        void *r;
        pthread_join(t[i], &r);
        total = total * 1099511628211ull + (uint64_t)(uintptr_t)r;
    }
    printf("final %016llx after %ld rounds\n", (unsigned long long)total, rounds_done);
    return 0;
}
