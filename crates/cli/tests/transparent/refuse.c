/* An unmodified program for the refusal tests of `ickpt run`: it does what stdin tells it,
 * one command a line, and reports each step on stderr, where the test waits for it.
 *
 *   hold WHAT  take up something a checkpoint must refuse, and keep it:
 *                socket   a socket (descriptor above 2)
 *                pipe     a pipe between two of its threads, one blocked reading it
 *                child    a child process (which dies with its parent)
 *                shared   a MAP_SHARED|MAP_ANONYMOUS mapping
 *                sigmask  a thread that blocks every signal until released
 *                cputimer a POSIX timer on the thread's own CPU clock
 *              then print "held WHAT ..." naming it (descriptor, pid, address, tid)
 *   release    give it back; print "released"
 *   work       one step of work; print "worked N"
 *   finish     print the final checksum on stdout and exit 0
 *
 * Each command also appends a line to argv[1], so the output depends only on the commands:
 * the same script gives the same file with or without checkpoints and restarts. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int out;
static uint64_t sum = 1469598103934665603ull;
static uint64_t *heap;

static int sock = -1;
static int pipefd[2] = {-1, -1};
static pthread_t reader;
static pid_t child = -1;
static char *shared;
static pthread_t masked;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int masked_go;
static pid_t masked_tid;

static void note(const char *line) {
    size_t n = strlen(line);
    for (size_t i = 0; i < n; i++)
        sum = (sum ^ (unsigned char)line[i]) * 1099511628211ull;
    if (write(out, line, n) != (ssize_t)n || write(out, "\n", 1) != 1) {
        perror("write");
        exit(1);
    }
}

static void *read_pipe(void *arg) {
    (void)arg;
    char c;
    if (read(pipefd[0], &c, 1) != 1)
        abort();
    return NULL;
}

static void *block_signals(void *arg) {
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pthread_mutex_lock(&lock);
    masked_tid = (pid_t)syscall(SYS_gettid);
    pthread_cond_broadcast(&cond);
    while (!masked_go)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    pthread_sigmask(SIG_UNBLOCK, &all, NULL);
    return NULL;
}

static timer_t cputimer;
static int has_cputimer;

static void hold(const char *what) {
    char line[160];
    if (strcmp(what, "socket") == 0) {
        sock = socket(AF_UNIX, SOCK_STREAM, 0);
        snprintf(line, sizeof line, "held socket fd %d", sock);
    } else if (strcmp(what, "pipe") == 0) {
        if (pipe(pipefd) != 0)
            abort();
        pthread_create(&reader, NULL, read_pipe, NULL);
        snprintf(line, sizeof line, "held pipe fd %d %d", pipefd[0], pipefd[1]);
    } else if (strcmp(what, "child") == 0) {
        child = fork();
        if (child == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            for (;;)
                pause();
        }
        snprintf(line, sizeof line, "held child pid %d", (int)child);
    } else if (strcmp(what, "shared") == 0) {
        shared = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (shared == MAP_FAILED)
            abort();
        memset(shared, 7, 1 << 20);
        snprintf(line, sizeof line, "held shared at %lx", (unsigned long)shared);
    } else if (strcmp(what, "sigmask") == 0) {
        masked_go = 0;
        masked_tid = 0;
        pthread_create(&masked, NULL, block_signals, NULL);
        pthread_mutex_lock(&lock);
        while (masked_tid == 0)
            pthread_cond_wait(&cond, &lock);
        snprintf(line, sizeof line, "held sigmask tid %d", (int)masked_tid);
        pthread_mutex_unlock(&lock);
    } else if (strcmp(what, "cputimer") == 0) {
        struct sigevent ev;
        memset(&ev, 0, sizeof ev);
        ev.sigev_notify = SIGEV_NONE;
        if (timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &cputimer) != 0)
            abort();
        has_cputimer = 1;
        snprintf(line, sizeof line, "held cputimer id %ld", (long)(intptr_t)cputimer);
    } else {
        fprintf(stderr, "refuse: unknown thing to hold: %s\n", what);
        exit(2);
    }
    fprintf(stderr, "%s\n", line);
    snprintf(line, sizeof line, "hold %s", what);
    note(line);
}

static void release(void) {
    if (sock >= 0) {
        close(sock);
        sock = -1;
    }
    if (pipefd[0] >= 0) {
        if (write(pipefd[1], "x", 1) != 1)
            abort();
        pthread_join(reader, NULL);
        close(pipefd[0]);
        close(pipefd[1]);
        pipefd[0] = pipefd[1] = -1;
    }
    if (child > 0) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        child = -1;
    }
    if (shared) {
        munmap(shared, 1 << 20);
        shared = NULL;
    }
    if (masked_tid) {
        pthread_mutex_lock(&lock);
        masked_go = 1;
        pthread_cond_broadcast(&cond);
        pthread_mutex_unlock(&lock);
        pthread_join(masked, NULL);
        masked_tid = 0;
    }
    if (has_cputimer) {
        timer_delete(cputimer);
        has_cputimer = 0;
    }
    note("release");
    fprintf(stderr, "released\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: refuse OUT < commands\n");
        return 2;
    }
    out = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0) {
        perror(argv[1]);
        return 1;
    }
    heap = calloc(1 << 16, sizeof *heap);
    long steps = 0;
    char cmd[128];
    fprintf(stderr, "ready\n");
    while (fgets(cmd, sizeof cmd, stdin)) {
        cmd[strcspn(cmd, "\n")] = 0;
        if (strncmp(cmd, "hold ", 5) == 0) {
            hold(cmd + 5);
        } else if (strcmp(cmd, "release") == 0) {
            release();
        } else if (strcmp(cmd, "work") == 0) {
            for (int i = 0; i < 1 << 16; i++)
                heap[i] = heap[i] * 6364136223846793005ull + (uint64_t)(i + steps);
            char line[64];
            snprintf(line, sizeof line, "work %ld %016llx", steps,
                     (unsigned long long)heap[steps % (1 << 16)]);
            note(line);
            fprintf(stderr, "worked %ld\n", ++steps);
        } else if (strcmp(cmd, "finish") == 0) {
            printf("final %016llx after %ld steps\n", (unsigned long long)sum, steps);
            return 0;
        } else {
            fprintf(stderr, "refuse: unknown command %s\n", cmd);
            return 2;
        }
    }
    fprintf(stderr, "refuse: stdin ended before finish\n");
    return 1;
}
