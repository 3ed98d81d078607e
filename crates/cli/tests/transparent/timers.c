/* An unmodified program for `ickpt run` tests that keeps POSIX timers and names its threads.
 *
 *   a  CLOCK_MONOTONIC, every 1 ms, SIGEV_SIGNAL: SIGRTMIN+1 to the process, sigev_value 1
 *   b  CLOCK_MONOTONIC, every 1 ms, SIGEV_THREAD_ID: SIGRTMIN+1 to the worker, sigev_value 2
 *   c  CLOCK_REALTIME, SIGEV_SIGNAL, never armed
 *   d  CLOCK_MONOTONIC, SIGEV_NONE, a single shot 1000 s away, read with timer_gettime
 *
 * Each step waits for a tick of a and of b; every 100 steps the program writes the names of
 * both threads (from /proc/self/task/TID/comm) and checks that its timers are still those it
 * made: the ids it holds are listed in /proc/self/timers with their signal and value, c is
 * disarmed and d armed. It counts steps, not time, so its output is an uninterrupted run's
 * whatever the checkpoints and restarts. A timer that no longer ticks is reported on stderr
 * within about 2 s and the program exits 3, instead of waiting forever. argv[1] gets the
 * lines, stdout the final checksum. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "prog.h"

#ifndef sigev_notify_thread_id /* glibc before 2.35 names it only inside the union */
#define sigev_notify_thread_id _sigev_un._tid
#endif

static volatile sig_atomic_t a_ticks, b_ticks, b_elsewhere, done;
static volatile pid_t worker_tid;

static void on_tick(int sig, siginfo_t *si, void *ctx) {
    (void)sig;
    (void)ctx;
    if (si->si_value.sival_int == 1)
        a_ticks++;
    else if (si->si_value.sival_int == 2) {
        b_ticks++;
        if (gettid() != worker_tid)
            b_elsewhere++;
    }
}

static void *worker(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "tm-worker");
    worker_tid = gettid();
    while (!done)
        pause();
    return NULL;
}

static timer_t make(clockid_t clock, int notify, int sig, int value, pid_t tid) {
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = notify;
    ev.sigev_signo = sig;
    ev.sigev_value.sival_int = value;
    ev.sigev_notify_thread_id = tid;
    timer_t t;
    if (timer_create(clock, &ev, &t) != 0) {
        perror("timer_create");
        exit(1);
    }
    return t;
}

static void arm(timer_t t, long interval_ns, long first_s) {
    struct itimerspec its = {{0, interval_ns}, {first_s, first_s ? 0 : interval_ns}};
    if (timer_settime(t, 0, &its, NULL) != 0) {
        perror("timer_settime");
        exit(1);
    }
}

static int tick_after(volatile sig_atomic_t *ticks, long seen) {
    for (int i = 0; i < 4000; i++) {
        if (*ticks > seen)
            return 0;
        struct timespec ts = {0, 500000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

static void name_of(pid_t tid, char *name, size_t len) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f || !fgets(name, (int)len, f)) {
        perror(path);
        exit(1);
    }
    fclose(f);
    name[strcspn(name, "\n")] = 0;
}

/* Whether /proc/self/timers lists `id` with signal `sig` and value `value`. */
static int listed(long id, int sig, int value) {
    FILE *f = fopen("/proc/self/timers", "r");
    if (!f) {
        perror("/proc/self/timers");
        exit(1);
    }
    char line[128];
    long cur = -1;
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        int s;
        unsigned long long v;
        if (sscanf(line, "ID: %ld", &cur) == 1)
            continue;
        if (cur == id && sscanf(line, "signal: %d/%llx", &s, &v) == 2)
            found = s == sig && v == (unsigned long long)value;
    }
    fclose(f);
    return found;
}

int main(int argc, char **argv) {
    int out = open_output(argc, argv, 3, "timers OUT STEPS");
    long steps = atol(argv[2]);
    prctl(PR_SET_NAME, "tm-main");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_tick;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGRTMIN + 1, &sa, NULL);
    pthread_t w;
    pthread_create(&w, NULL, worker, NULL);
    while (!worker_tid)
        sched_yield();
    /* Three made and deleted first: the kernel gives ids in order, so a restart that made the
     * timers again without asking for their ids would give them others. */
    for (int i = 0; i < 3; i++)
        timer_delete(make(CLOCK_MONOTONIC, SIGEV_NONE, 0, 0, 0));
    timer_t a = make(CLOCK_MONOTONIC, SIGEV_SIGNAL, SIGRTMIN + 1, 1, 0);
    timer_t b = make(CLOCK_MONOTONIC, SIGEV_THREAD_ID, SIGRTMIN + 1, 2, worker_tid);
    timer_t c = make(CLOCK_REALTIME, SIGEV_SIGNAL, SIGRTMIN + 2, 3, 0);
    timer_t d = make(CLOCK_MONOTONIC, SIGEV_NONE, 0, 4, 0);
    arm(a, 1000000, 0);
    arm(b, 1000000, 0);
    arm(d, 0, 1000);
    /* glibc's timer_t of a signalling timer is the kernel's id. */
    long ids[4] = {(long)(intptr_t)a, (long)(intptr_t)b, (long)(intptr_t)c, (long)(intptr_t)d};
    dprintf(out, "timers %ld %ld %ld %ld\n", ids[0], ids[1], ids[2], ids[3]);
    uint64_t h = 1469598103934665603ull;
    long seen_a = 0, seen_b = 0;
    for (long s = 0; s < steps; s++) {
        if (tick_after(&a_ticks, seen_a) != 0 || tick_after(&b_ticks, seen_b) != 0) {
            fprintf(stderr, "timers: no tick of timer %s for 2 s at step %ld: it is gone\n",
                    a_ticks > seen_a ? "b" : "a", s);
            return 3;
        }
        seen_a = a_ticks;
        seen_b = b_ticks;
        h = (h ^ (uint64_t)s) * 1099511628211ull;
        char line[160];
        int len = snprintf(line, sizeof line, "step %ld %016llx\n", s, (unsigned long long)h);
        if (s % 100 == 0) {
            char mine[32], its[32];
            name_of(gettid(), mine, sizeof mine);
            name_of(worker_tid, its, sizeof its);
            struct itimerspec cs, ds;
            int c_ok = timer_gettime(c, &cs) == 0 && cs.it_value.tv_sec == 0 &&
                       cs.it_value.tv_nsec == 0;
            int d_ok = timer_gettime(d, &ds) == 0 && ds.it_value.tv_sec > 0 &&
                       ds.it_value.tv_sec <= 1000;
            int ids_ok = listed(ids[0], SIGRTMIN + 1, 1) && listed(ids[1], SIGRTMIN + 1, 2) &&
                         listed(ids[2], SIGRTMIN + 2, 3) && listed(ids[3], 0, 4);
            len = snprintf(line, sizeof line,
                           "step %ld %016llx names %s %s ids %s disarmed %s armed %s\n", s,
                           (unsigned long long)h, mine, its, ids_ok ? "same" : "CHANGED",
                           c_ok ? "yes" : "NO", d_ok ? "yes" : "NO");
        }
        if (write(out, line, (size_t)len) != len) {
            perror("write");
            return 1;
        }
    }
    done = 1;
    pthread_join(w, NULL);
    printf("final %016llx after %ld steps; b ticks elsewhere than the worker: %d\n",
           (unsigned long long)h, steps, (int)b_elsewhere);
    return 0;
}
