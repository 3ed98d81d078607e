/*
 * dirty: the workload of `make bench-transparent` (scripts/bench-transparent.py). A buffer of
 * MIB MiB of random bytes; each step rewrites a chosen percentage of its pages, then the
 * program waits for the next step. Whoever drives it decides when it steps and when it is
 * checkpointed, so each checkpoint sees exactly the chosen fraction dirty.
 *
 * Usage: dirty MIB MARKER                          the unmodified program (ickpt run, CRIU)
 *        dirty_api MIB MARKER sync|async [restore] the same built with -DDIRTY_API: it
 *                                                  protects the buffer and checkpoints itself
 *
 * Steps are asked for with SIGUSR1, sent to the main thread (rt_tgsigqueueinfo) with the
 * percentage in si_value; the main thread blocks it and takes it with sigwaitinfo. A
 * process-directed signal could go to a thread the program does not know of (the one
 * `ickpt run` preloads) and, with its default action, end the process.
 *
 * MARKER is a file of one 256-byte record the program rewrites in place (pwrite at offset 0,
 * so its size never changes: CRIU refuses to restore a file whose size did) at each event:
 *   "SEQ PID EVENT T_NS ARG1 ARG2 ARG3 ARG4 ARG5 ARG6"
 * T_NS is CLOCK_REALTIME in nanoseconds, read just before the record is written; events:
 *   ready   initialised                                                ARG1: init ns
 *   step    the pages of a step written                                ARG1: percent,
 *           ARG2: pages written
 *   commit  API only, instead of step (and after ready, for the first, full, checkpoint):
 *           the pages written and checkpointed, the version committed (ickpt_wait)
 *           ARG1 percent, ARG2 pages written, ARG3 ns inside ickpt_checkpoint (what the
 *           program is stopped), ARG4 version, ARG5 its file's bytes, ARG6 commit ns (from
 *           the request until the last page was handed to the store)
 *   wake    sigwaitinfo returned EINTR: the first thing the program does once a checkpoint
 *           that interrupted it is over, and once a restart brought it back (CRIU resumes
 *           the program inside that sigwaitinfo, which returns EINTR; under `ickpt run` the
 *           library waits again instead, and the driver asks for a 0% step to see it run)
 *   resumed API only, with restore: ickpt_restore_latest returned        ARG1 version
 * The time from starting a restart until the record's T_NS is the restart's time.
 *
 * The bytes are random (xorshift), and a step XORs a word of its own into every word of its
 * pages: no page is ever all zeros or compressible, so neither ickpt's compression nor any
 * zero-page shortcut changes what is stored. Step k writes pages (j * n / m + k) mod n,
 * j < m: m = n * percent / 100 pages spread evenly over the buffer, other ones each step.
 */

#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef DIRTY_API
#include <ickpt.h>
#define BUF_ID 1
#define STATE_ID 2
#endif

#define PAGE 4096u
#define RECORD 256

/* What the program needs to go on; the API variant protects it with the buffer. */
static struct {
    uint64_t steps;
    uint64_t seq;
} state;

static int marker_fd = -1;

/* CLOCK_REALTIME: CRIU restores a process into a time namespace whose CLOCK_MONOTONIC goes
 * on from the dump's, so only the real-time clock compares with the driver's. */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "dirty: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void mark(const char *event, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4,
                 uint64_t a5, uint64_t a6)
{
    uint64_t t = now_ns();
    char rec[RECORD];
    memset(rec, ' ', sizeof rec);
    int n = snprintf(rec, sizeof rec, "%" PRIu64 " %d %s %" PRIu64 " %" PRIu64 " %" PRIu64
                     " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64,
                     ++state.seq, (int)getpid(), event, t, a1, a2, a3, a4, a5, a6);
    if (n < 0 || n >= RECORD)
        die("marker record too long");
    rec[n] = ' ';
    rec[RECORD - 1] = '\n';
    if (pwrite(marker_fd, rec, sizeof rec, 0) != (ssize_t)sizeof rec)
        die("writing the marker");
}

static uint64_t parse_mib(const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v == 0 || v > (1u << 20)) {
        fprintf(stderr, "dirty: MIB '%s' is not a number in [1, 1048576]\n", s);
        exit(2);
    }
    return v;
}

/* Step k: rewrite percent% of the n pages, spread evenly; returns the pages written. */
static uint64_t step(uint64_t *buf, uint64_t n, uint64_t percent, uint64_t k)
{
    uint64_t m = n * percent / 100;
    uint64_t x = 0x9e3779b97f4a7c15u * (k + 1);
    for (uint64_t j = 0; j < m; j++) {
        uint64_t *p = buf + ((j * n / m + k) % n) * (PAGE / 8);
        for (unsigned w = 0; w < PAGE / 8; w++)
            p[w] ^= x;
    }
    return m;
}

#ifdef DIRTY_API
static void check(const char *call, ickpt_result r)
{
    if (r != ICKPT_OK) {
        fprintf(stderr, "dirty: %s: %s: %s\n", call, ickpt_result_name(r), ickpt_last_error());
        exit(1);
    }
}

/* Checkpoint, wait for the commit, and report both in one record. */
static void checkpoint(uint64_t percent, uint64_t written)
{
    struct ickpt_checkpoint_info info;
    uint64_t t0 = now_ns();
    check("ickpt_checkpoint", ickpt_checkpoint(&info));
    uint64_t stop = now_ns() - t0;
    check("ickpt_wait", ickpt_wait(&info));
    mark("commit", percent, written, stop, info.version, info.bytes, info.commit_ns);
}
#endif

int main(int argc, char **argv)
{
#ifdef DIRTY_API
    if (argc < 4 || argc > 5 || (strcmp(argv[3], "sync") && strcmp(argv[3], "async")) ||
        (argc == 5 && strcmp(argv[4], "restore"))) {
        fprintf(stderr, "usage: dirty_api MIB MARKER sync|async [restore]\n");
        return 2;
    }
    int restore = argc == 5;
#else
    if (argc != 3) {
        fprintf(stderr, "usage: dirty MIB MARKER\n");
        return 2;
    }
#endif
    uint64_t t0 = now_ns();
    uint64_t bytes = parse_mib(argv[1]) << 20, n = bytes / PAGE;
    marker_fd = open(argv[2], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (marker_fd < 0)
        die(argv[2]);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
        die("sigprocmask");
    uint64_t *buf;
    if (posix_memalign((void **)&buf, PAGE, bytes) != 0)
        die("allocating the buffer");
#ifdef DIRTY_API
    struct ickpt_config cfg;
    ickpt_config_init(&cfg);
    cfg.mode = strcmp(argv[3], "async") == 0 ? ICKPT_MODE_ASYNC : ICKPT_MODE_SYNC;
    check("ickpt_init", ickpt_init(&cfg));
    check("ickpt_protect", ickpt_protect(BUF_ID, buf, bytes));
    check("ickpt_protect", ickpt_protect(STATE_ID, &state, sizeof state));
    if (restore) {
        uint64_t v;
        check("ickpt_restore_latest", ickpt_restore_latest(&v));
        mark("resumed", v, 0, 0, 0, 0, 0);
    }
#endif
#ifdef DIRTY_API
    if (!restore) {
#endif
        uint64_t x = 0x2545f4914f6cdd1du ^ (uint64_t)bytes;
        for (uint64_t i = 0; i < bytes / 8; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf[i] = x;
        }
#ifdef DIRTY_API
        mark("ready", now_ns() - t0, 0, 0, 0, 0, 0);
        checkpoint(0, n);
    }
#else
    mark("ready", now_ns() - t0, 0, 0, 0, 0, 0);
#endif
    for (;;) {
        siginfo_t si;
        int s = sigwaitinfo(&set, &si);
        if (s < 0) {
            if (errno != EINTR)
                die("sigwaitinfo");
            mark("wake", 0, 0, 0, 0, 0, 0);
            continue;
        }
        uint64_t percent = (uint64_t)si.si_value.sival_int;
        if (percent > 100) {
            fprintf(stderr, "dirty: asked for %" PRIu64 "%% of the pages\n", percent);
            return 1;
        }
        uint64_t pages = step(buf, n, percent, state.steps++);
#ifdef DIRTY_API
        checkpoint(percent, pages);
#else
        mark("step", percent, pages, 0, 0, 0, 0);
#endif
    }
}
