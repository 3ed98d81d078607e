/*
 * Real file systems under a test's store: the FUSE fault injector ickpt-testfs (run.sh
 * passes its path in ICKPT_TESTFS) and a small tmpfs. They need root and, for FUSE,
 * /dev/fuse; run.sh checks that before running these tests.
 *
 * Every mount a test makes is undone however the test ends: at exit (a failed CHECK exits),
 * on SIGALRM (the deadline set by mounts_deadline), and on SIGTERM/SIGINT/SIGHUP (run.sh's
 * timeout). A thread of its own takes those signals: a thread blocked in a request to a hung
 * FUSE server runs no signal handler until it is killed. If the test dies by SIGKILL, ickpt-testfs (in a process group of its own) gets
 * SIGTERM (PR_SET_PDEATHSIG) and detaches its mount itself; run.sh detaches whatever is still
 * mounted below the store after each test.
 */
#ifndef ICKPT_TEST_MOUNTS_H
#define ICKPT_TEST_MOUNTS_H

#include "check.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>

#define FUSE_SUPER_MAGIC 0x65735546
#define MOUNTS_MAX 4

/* What mounts_undo must undo (at exit, or from the watcher thread: m_lock). */
static pthread_mutex_t m_lock = PTHREAD_MUTEX_INITIALIZER;
static char m_points[MOUNTS_MAX][4096];
static pid_t m_servers[MOUNTS_MAX];
static int m_count = 0;
static pid_t m_owner = 0;

static inline void m_nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Detach every mount (newest first) and reap its server. Forked children, which inherit the
 * atexit handler, leave them alone. */
static void mounts_undo(void) {
    if (getpid() != m_owner)
        return;
    pthread_mutex_lock(&m_lock);
    while (m_count > 0) {
        int i = m_count - 1;
        umount2(m_points[i], MNT_DETACH);
        pid_t pid = m_servers[i];
        if (pid > 0) {
            kill(pid, SIGTERM);
            int waited = 0;
            while (waitpid(pid, NULL, WNOHANG) == 0 && waited < 5000) {
                m_nap_ms(10);
                waited += 10;
            }
            if (waited >= 5000) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
            }
        }
        m_count = i;
    }
    pthread_mutex_unlock(&m_lock);
}

static sigset_t m_signals;

static void *m_watch(void *arg) {
    (void)arg;
    int sig = 0;
    sigwait(&m_signals, &sig);
    fprintf(stderr, "mounts.h: %s; unmounting\n",
            sig == SIGALRM ? "the test's deadline passed" : strsignal(sig));
    fflush(stderr);
    /* Killing the server also fails whatever request of this process it left hanging. */
    mounts_undo();
    _exit(sig == SIGALRM ? 1 : 128 + sig);
}

/* The test fails (SIGALRM) if it has not finished after `seconds`; mounts are undone on
 * every way out. Call first, before any thread starts (they must all block the signals). */
static inline void mounts_deadline(unsigned seconds) {
    m_owner = getpid();
    CHECK(atexit(mounts_undo) == 0);
    sigemptyset(&m_signals);
    const int sigs[] = {SIGALRM, SIGTERM, SIGINT, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaddset(&m_signals, sigs[i]);
    CHECK(pthread_sigmask(SIG_BLOCK, &m_signals, NULL) == 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, m_watch, NULL) == 0);
    CHECK(pthread_detach(t) == 0);
    alarm(seconds);
}

static inline void m_mkdirs(const char *path) {
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            CHECK_MSG(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", p, strerror(errno));
            *s = '/';
        }
    }
    CHECK_MSG(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", p, strerror(errno));
}

static inline void m_slot(const char *point, pid_t server) {
    CHECK_MSG(m_owner == getpid(), "call mounts_deadline first");
    pthread_mutex_lock(&m_lock);
    CHECK(m_count < MOUNTS_MAX);
    snprintf(m_points[m_count], sizeof m_points[m_count], "%s", point);
    m_servers[m_count] = server;
    m_count++;
    pthread_mutex_unlock(&m_lock);
}

/* Mount ickpt-testfs: a passthrough of `backing` at `point`, with the fault options in
 * `opts` (NULL-terminated). Returns once the mount answers (10 s deadline). */
static inline void testfs_mount(const char *backing, const char *point, char *const opts[]) {
    const char *bin = getenv("ICKPT_TESTFS");
    CHECK_MSG(bin != NULL && bin[0] != '\0',
              "ICKPT_TESTFS is not set; run this test through tests/c/run.sh");
    CHECK_MSG(access(bin, X_OK) == 0, "%s: %s (build it: make testfs)",
              bin, strerror(errno));
    m_mkdirs(backing);
    m_mkdirs(point);
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)bin;
    argv[n++] = (char *)backing;
    argv[n++] = (char *)point;
    for (int i = 0; opts[i] != NULL; i++) {
        CHECK(n < 15);
        argv[n++] = opts[i];
    }
    argv[n] = NULL;
    printf("mounting:");
    for (int i = 0; i < n; i++)
        printf(" %s", argv[i]);
    printf("\n");
    fflush(NULL);

    const pid_t parent = getpid();
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* The server must not outlive a test killed outright, nor die with it by a signal
         * sent to the test's process group (as timeout(1) does) before detaching its mount:
         * it leaves the group and gets SIGTERM when the test dies. */
        if (setpgid(0, 0) != 0 || prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
            _exit(126);
        sigprocmask(SIG_UNBLOCK, &m_signals, NULL);
        execv(bin, argv);
        _exit(127);
    }
    m_slot(point, pid);

    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        struct statfs sf;
        if (statfs(point, &sf) == 0 && sf.f_type == FUSE_SUPER_MAGIC)
            return;
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            pthread_mutex_lock(&m_lock);
            m_servers[m_count - 1] = 0;
            pthread_mutex_unlock(&m_lock);
            CHECK_MSG(0, "ickpt-testfs ended before mounting %s (%s %d); its message is above",
                      point, WIFEXITED(st) ? "exit status" : "signal",
                      WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        CHECK_MSG(now.tv_sec - start.tv_sec < 10, "%s: not mounted after 10 s", point);
        m_nap_ms(5);
    }
}

/* Mount a tmpfs of `size` (mount(8) syntax: "4m") at `point`. */
static inline void tmpfs_mount(const char *point, const char *size) {
    m_mkdirs(point);
    char opts[64];
    snprintf(opts, sizeof opts, "size=%s,mode=0755", size);
    CHECK_MSG(mount("ickpt-test-tmpfs", point, "tmpfs", MS_NOSUID | MS_NODEV, opts) == 0,
              "mount -t tmpfs -o %s %s: %s (the test needs root)", opts, point, strerror(errno));
    m_slot(point, 0);
}

#endif
