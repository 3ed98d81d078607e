/*
 * One store, one live process: a second process opening a store held by another gets
 * ICKPT_ERR_STORE_LOCKED; the store opens again once the holder finalizes, exits, or is
 * killed with SIGKILL (a crash must not leave the store locked forever).
 *
 * Children report through their exit status: 0 = got what was expected, 1 = a CHECK failed,
 * 10 + code = ickpt_init returned `code` instead.
 */
#include "check.h"

#include <signal.h>
#include <sys/wait.h>

/* Child side: init and compare with the expected result; on success, optionally do work. */
static int child_try_init(const char *dir, int want, int work) {
    int r = test_init(dir, 0);
    if (r != want) {
        fprintf(stderr, "child %d: ickpt_init returned %s, expected %s (last error: \"%s\")\n",
                (int)getpid(), ickpt_result_name(r), ickpt_result_name(want), ickpt_last_error());
        return 10 + r;
    }
    if (r != ICKPT_OK) {
        if (ickpt_last_error()[0] == '\0') {
            fprintf(stderr, "child: ickpt_init failed without a message\n");
            return 1;
        }
        /* The refused process is left uninitialised. */
        if (ickpt_finalize() != ICKPT_ERR_NOT_INITIALIZED)
            return 1;
        return 0;
    }
    if (work) {
        static char data[100];
        uint64_t v = 0;
        if (ickpt_latest(&v) != ICKPT_OK || v == 0)
            return 2;
        if (ickpt_protect(1, data, sizeof data) != ICKPT_OK)
            return 3;
        if (ickpt_restore(v) != ICKPT_OK) /* written by the parent */
            return 4;
        for (size_t i = 0; i < sizeof data; i++)
            if (data[i] != (char)(i + 1))
                return 5;
        data[0] = 42;
        if (ickpt_checkpoint(NULL) != ICKPT_OK)
            return 6;
    }
    if (ickpt_finalize() != ICKPT_OK)
        return 7;
    return 0;
}

static int wait_status(pid_t pid) {
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    fprintf(stderr, "child %d died by signal %d\n", (int)pid, WIFSIGNALED(st) ? WTERMSIG(st) : -1);
    return 1000;
}

#define CHECK_CHILD(pid, what)                                                             \
    do {                                                                                   \
        int s_ = wait_status(pid);                                                         \
        CHECK_MSG(s_ == 0, "%s: child exit status %d%s", what, s_,                         \
                  s_ >= 10 && s_ < 100 ? " (10 + the code ickpt_init returned)" : "");     \
    } while (0)

/* A genuinely new process (fork + exec of this program) that tries to open the store. */
static pid_t spawn_exec_child(const char *self, const char *dir, int want) {
    char code[16];
    snprintf(code, sizeof code, "%d", want);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        execl(self, "store_locked", "--try-init", dir, code, (char *)NULL);
        _exit(99);
    }
    return pid;
}

/* Fork a process that opens the store and holds it until *release is closed (then exits
 * without ickpt_finalize). Returns its pid once it holds the store, or -1. */
static pid_t start_holder(const char *dir, int *release) {
    int held[2], rel[2];
    if (pipe(held) != 0 || pipe(rel) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(held[0]);
        close(rel[1]);
        if (test_init(dir, 0) != ICKPT_OK) {
            fprintf(stderr, "holder: init: %s\n", ickpt_last_error());
            _exit(97);
        }
        if (write(held[1], "h", 1) != 1)
            _exit(96);
        char ch;
        while (read(rel[0], &ch, 1) > 0) {
        }
        _exit(0);
    }
    close(held[1]);
    close(rel[0]);
    char ch;
    ssize_t n = read(held[0], &ch, 1);
    close(held[0]);
    *release = rel[1];
    return n == 1 ? pid : -1;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--try-init") == 0)
        return child_try_init(argv[2], atoi(argv[3]), 0);

    const char *dir = test_dir();
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    self[n] = '\0';

    /* 1. A process started before the parent's init tries once the parent holds the store. */
    int go[2];
    CHECK(pipe(go) == 0);
    fflush(NULL);
    pid_t a = fork();
    CHECK(a >= 0);
    if (a == 0) {
        close(go[1]);
        char c;
        if (read(go[0], &c, 1) != 1)
            _exit(98);
        _exit(child_try_init(dir, ICKPT_ERR_STORE_LOCKED, 0));
    }
    close(go[0]);
    OK(test_init(dir, 0));
    CHECK(write(go[1], "g", 1) == 1);
    close(go[1]);
    CHECK_CHILD(a, "forked process while the parent holds the store");

    /* 2. An exec'd process as well (the lock must not depend on inherited state). */
    CHECK_CHILD(spawn_exec_child(self, dir, ICKPT_ERR_STORE_LOCKED),
                "exec'd process while the parent holds the store");

    /* The refused opens did not disturb the holder. */
    static char data[100];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)(i + 1);
    OK(ickpt_protect(1, data, sizeof data));
    ickpt_checkpoint_info info;
    OK(ickpt_checkpoint(&info));
    OK(ickpt_finalize());

    /* 3. After finalize, a new process opens it, restores, checkpoints. */
    fflush(NULL);
    pid_t c = fork();
    CHECK(c >= 0);
    if (c == 0)
        _exit(child_try_init(dir, ICKPT_OK, 1));
    CHECK_CHILD(c, "forked process after the parent finalized");
    CHECK_CHILD(spawn_exec_child(self, dir, ICKPT_OK), "exec'd process after the parent finalized");

    /* 4. A live holder that exits without finalize: locked while it lives, free after. */
    int release;
    pid_t d = start_holder(dir, &release);
    CHECK_MSG(d > 0, "the holder process failed to open the store");
    CHECK_RC(test_init(dir, 0), ICKPT_ERR_STORE_LOCKED);
    CHECK(strstr(ickpt_last_error(), dir) != NULL); /* names the directory */
    uint64_t v = 0;
    CHECK_RC(ickpt_latest(&v), ICKPT_ERR_NOT_INITIALIZED);
    CHECK_CHILD(spawn_exec_child(self, dir, ICKPT_ERR_STORE_LOCKED),
                "exec'd process while another process holds the store");
    close(release);
    CHECK_CHILD(d, "holder");
    OK(test_init(dir, 0));
    OK(ickpt_finalize());

    /* 5. A holder killed with SIGKILL. */
    pid_t e = start_holder(dir, &release);
    CHECK_MSG(e > 0, "the second holder failed to open the store");
    CHECK_RC(test_init(dir, 0), ICKPT_ERR_STORE_LOCKED);
    CHECK(kill(e, SIGKILL) == 0);
    int st;
    CHECK(waitpid(e, &st, 0) == e && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    close(release);
    OK(test_init(dir, 0));
    /* Everything committed so far is still there: parent's version plus the child's. */
    OK(ickpt_latest(&v));
    CHECK(v > info.version);
    OK(ickpt_finalize());

    printf("store_locked: ok\n");
    return 0;
}
