/* An unmodified program for `ickpt run` tests that spends its time waiting: argv[3] says how.
 *
 *   sleep  usleep(500), nanosleep(500 us) and clock_nanosleep(500 us) each step
 *   poll   poll() and select() on stdin (which never becomes readable), 1 ms timeouts
 *   timer  setitimer(ITIMER_REAL, 1 ms) with a SIGALRM handler counting ticks; each step
 *          waits for the next tick
 *
 * The program counts steps, not time: its output depends only on the step number, and, in the
 * sleep and poll ways, on how many waits failed with EINTR, which nothing here causes: ickpt's
 * checkpoint signal must not either (the library waits again). A timer that no longer ticks (after a
 * restart that did not bring it back) is reported on stderr within about 2 s and the program
 * exits 3, instead of waiting forever. argv[1] gets the signals blocked at the start (none from
 * the tests' harness), then a line per step; stdout gets the final checksum once. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "prog.h"

static volatile sig_atomic_t ticks;
static long interrupted; /* waits cut short (EINTR) */

static void on_alarm(int sig) {
    (void)sig;
    ticks++;
}

static void nap(void) {
    if (usleep(500) != 0 && errno == EINTR)
        interrupted++;
    struct timespec ts = {0, 500000};
    if (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        interrupted++;
    struct timespec cs = {0, 500000};
    if (clock_nanosleep(CLOCK_MONOTONIC, 0, &cs, &cs) == EINTR)
        interrupted++;
}

static void wait_poll(void) {
    struct pollfd p = {.fd = 0, .events = POLLIN};
    int rc = poll(&p, 1, 1);
    if (rc < 0 && errno == EINTR)
        interrupted++;
    else if (rc != 0) {
        fprintf(stderr, "waits: poll returned %d (revents %#x)\n", rc, p.revents);
        exit(1);
    }
    fd_set in;
    FD_ZERO(&in);
    FD_SET(0, &in);
    struct timeval tv = {0, 1000};
    rc = select(1, &in, NULL, NULL, &tv);
    if (rc < 0 && errno == EINTR)
        interrupted++;
    else if (rc != 0) {
        fprintf(stderr, "waits: select returned %d\n", rc);
        exit(1);
    }
}

/* Wait until the timer has ticked more than `seen` times; give up after about 2 s. */
static int wait_tick(long seen) {
    for (int i = 0; i < 4000; i++) {
        if (ticks > seen)
            return 0;
        struct timespec ts = {0, 500000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

int main(int argc, char **argv) {
    int out = open_output(argc, argv, 4, "waits OUT STEPS sleep|poll|timer");
    long steps = atol(argv[2]);
    const char *how = argv[3];
    int timer = strcmp(how, "timer") == 0;
    if (!timer && strcmp(how, "sleep") != 0 && strcmp(how, "poll") != 0) {
        fprintf(stderr, "waits: unknown way of waiting %s\n", how);
        return 2;
    }
    if (timer) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_alarm;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGALRM, &sa, NULL);
        struct itimerval it = {{0, 1000}, {0, 1000}};
        setitimer(ITIMER_REAL, &it, NULL);
    }
    /* The mask it was started with: `ickpt run` must hand on its caller's, as a shell does. */
    sigset_t start_mask;
    sigprocmask(SIG_BLOCK, NULL, &start_mask);
    for (int sig = 1; sig < 65; sig++)
        if (sigismember(&start_mask, sig))
            dprintf(out, "blocked at start: %d\n", sig);
    uint64_t h = 1469598103934665603ull;
    long tick_seen = 0;
    for (long s = 0; s < steps; s++) {
        if (timer) {
            if (wait_tick(tick_seen) != 0) {
                fprintf(stderr,
                        "waits: no SIGALRM for 2 s at step %ld: the interval timer is gone\n",
                        s);
                return 3;
            }
            tick_seen = ticks;
        } else if (how[0] == 's') {
            nap();
        } else {
            wait_poll();
        }
        h = (h ^ (uint64_t)s) * 1099511628211ull;
        char line[64];
        int len = snprintf(line, sizeof line, "step %ld %016llx\n", s, (unsigned long long)h);
        if (write(out, line, (size_t)len) != len) {
            perror("write");
            return 1;
        }
    }
    printf("final %016llx after %ld steps (%s)\n", (unsigned long long)h, steps, how);
    /* The timer's own SIGALRM cuts waits short; nothing else may. */
    if (!timer)
        printf("waits cut short: %ld\n", interrupted);
    return 0;
}
