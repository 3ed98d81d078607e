/*
 * Tiny helpers shared by the C API tests. Every test is a small main() that exits 0 on
 * success and 1 (after printing where and why) on the first failed check.
 *
 *   OK(call)              the call must return ICKPT_OK
 *   CHECK_RC(call, want)  the call must return `want`; for a failure code, ickpt_last_error()
 *                         must then be non-empty (the ABI promises a message)
 *   CHECK(cond)           any condition; the report shows the last result seen
 */
#ifndef ICKPT_TEST_CHECK_H
#define ICKPT_TEST_CHECK_H

#include <ickpt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int t_last_rc __attribute__((unused)) = 0;

/* Line-buffered stdout, so progress lines and failure reports interleave in order. */
__attribute__((constructor)) static void t_line_buffered(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
}

static inline void t_report(const char *file, int line, const char *what) {
    const char *msg = ickpt_last_error();
    fprintf(stderr, "%s:%d: CHECK failed: %s\n  last result: %s, last error: \"%s\"\n", file,
            line, what, ickpt_result_name(t_last_rc), msg ? msg : "(NULL)");
    fflush(stderr);
}

static inline void t_fail_rc(const char *file, int line, const char *call, int want, int got) {
    const char *msg = ickpt_last_error();
    fprintf(stderr, "%s:%d: %s\n  returned %s (%d), expected %s (%d)\n  last error: \"%s\"\n",
            file, line, call, ickpt_result_name(got), got, ickpt_result_name(want), want,
            msg ? msg : "(NULL)");
    fflush(stderr);
    exit(1);
}

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            t_report(__FILE__, __LINE__, #cond);                                           \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#define CHECK_MSG(cond, ...)                                                               \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            t_report(__FILE__, __LINE__, #cond);                                           \
            fprintf(stderr, "  ");                                                         \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n");                                                         \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#define CHECK_RC(call, want)                                                               \
    do {                                                                                   \
        int t_got_ = (int)(call);                                                          \
        t_last_rc = t_got_;                                                                \
        if (t_got_ != (int)(want))                                                         \
            t_fail_rc(__FILE__, __LINE__, #call, (int)(want), t_got_);                     \
        if (t_got_ != ICKPT_OK) {                                                          \
            const char *t_msg_ = ickpt_last_error();                                       \
            if (t_msg_ == NULL || t_msg_[0] == '\0') {                                     \
                t_report(__FILE__, __LINE__,                                               \
                         "ickpt_last_error() is empty after the failed call " #call);      \
                exit(1);                                                                   \
            }                                                                              \
        }                                                                                  \
    } while (0)

#define OK(call) CHECK_RC(call, ICKPT_OK)

/* The store directory run.sh made for this test (fresh and empty). */
static inline const char *test_dir(void) {
    const char *d = getenv("ICKPT_TEST_DIR");
    if (d == NULL || d[0] == '\0') {
        fprintf(stderr, "ICKPT_TEST_DIR is not set; run this test through tests/c/run.sh\n");
        exit(2);
    }
    return d;
}

/* A subdirectory of the test directory, as a static-lifetime string. */
static inline const char *test_subdir(const char *name) {
    static char bufs[8][4096];
    static int next = 0;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", test_dir(), name);
    return b;
}

/* Initialise with defaults except the store directory and full_every. */
static inline int test_init(const char *dir, uint32_t full_every) {
    ickpt_config cfg;
    int r = ickpt_config_init(&cfg);
    if (r != ICKPT_OK)
        return r;
    cfg.dir = dir;
    if (full_every != 0)
        cfg.full_every = full_every;
    return ickpt_init(&cfg);
}

static inline size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* Deterministic PRNG (splitmix64), so expected memory can be recomputed anywhere. */
static inline uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* `n` bytes (a multiple of 8) of PRNG output from `seed`. */
static inline void fill_random(void *mem, size_t n, uint64_t seed) {
    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t x = rng_next(&seed);
        memcpy((unsigned char *)mem + i, &x, 8);
    }
}

/* The result code ickpt_result_name() calls `name` (a test's argument); exits if none. */
static inline int result_code_named(const char *name) {
    for (int c = 0; c < 64; c++)
        if (strcmp(ickpt_result_name(c), name) == 0)
            return c;
    fprintf(stderr, "unknown result name %s\n", name);
    exit(2);
}

/* Printed just before a deliberate fault; run.sh looks for it. */
static inline void fault_marker(void) {
    static const char m[] = "ickpt-test: about to fault\n";
    fflush(stdout);
    fflush(stderr);
    if (write(1, m, sizeof m - 1) < 0)
        _exit(3);
}

/* Deliberate faults: `*p = v` where p may be NULL. The fault is the point, so UBSan's null
 * check (which would stop the program before the MMU raises SIGSEGV) is left out here, and the
 * function is not inlined (GCC would inline it with its caller's checks). */
#define T_DELIBERATE_FAULT __attribute__((no_sanitize("null"), noinline))

/* A genuine segfault (SEGV_MAPERR): a write through NULL. */
T_DELIBERATE_FAULT __attribute__((unused)) static void write_through_null(int v) {
    volatile int *volatile np = NULL;
    *np = v;
}

/* First index where a and b differ, or -1. */
static inline long first_diff(const void *a, const void *b, size_t n) {
    const unsigned char *x = a, *y = b;
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i])
            return (long)i;
    return -1;
}

#define CHECK_MEM_EQ(got, want, n)                                                         \
    do {                                                                                   \
        long t_at_ = first_diff((got), (want), (n));                                       \
        CHECK_MSG(t_at_ < 0, "%s and %s (%zu bytes) differ first at byte %ld: %#x != %#x", \
                  #got, #want, (size_t)(n), t_at_,                                         \
                  t_at_ < 0 ? 0 : ((const unsigned char *)(got))[t_at_],                   \
                  t_at_ < 0 ? 0 : ((const unsigned char *)(want))[t_at_]);                 \
    } while (0)

/* Version `version` must restore `mem` to its bytes now: keep a copy, wipe, restore, compare. */
#define CHECK_RESTORES_TO_NOW(version, mem, n)                                             \
    do {                                                                                   \
        unsigned char *t_want_ = malloc(n);                                                \
        CHECK(t_want_ != NULL);                                                            \
        memcpy(t_want_, (mem), (n));                                                       \
        memset((mem), 0, (n));                                                             \
        OK(ickpt_restore(version));                                                        \
        CHECK_MEM_EQ((mem), t_want_, (n));                                                 \
        free(t_want_);                                                                     \
    } while (0)

/* Install `handler` for SIGSEGV as an application would: SA_SIGINFO handlers go in
 * sa_sigaction, plain ones in sa_handler. */
static inline int set_segv_handler(void (*plain)(int),
                                   void (*info)(int, siginfo_t *, void *), int flags) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    if (info != NULL) {
        sa.sa_sigaction = info;
        flags |= SA_SIGINFO;
    } else {
        sa.sa_handler = plain;
    }
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGSEGV, &sa, NULL);
}

#endif
