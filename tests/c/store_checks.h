/*
 * Checks of a store from outside the process that wrote it:
 *
 *   expected_save(path, mem, n)     keep the bytes a version must restore to, in a file
 *   restore_in_new_process(...)     a fresh process (this program, re-executed) restores
 *                                   versions into new memory and compares each with its file;
 *                                   main() hands argv to restore_child_main first
 *   cli_verify(store)               `ickpt verify --dir store` (run.sh passes the staged
 *                                   command in ICKPT_TEST_CLI) must exit 0
 *   store_versions(store, &left)    version files in the store; names any other file
 *
 * Each version holds one region, id 1, of the length given.
 */
#ifndef ICKPT_TEST_STORE_CHECKS_H
#define ICKPT_TEST_STORE_CHECKS_H

#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <sys/wait.h>

static inline void expected_path(char *buf, size_t n, const char *prefix, uint64_t version) {
    snprintf(buf, n, "%s-v%llu.bin", prefix, (unsigned long long)version);
}

static inline void expected_save(const char *prefix, uint64_t version, const void *mem, size_t n) {
    char path[4096];
    expected_path(path, sizeof path, prefix, version);
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f != NULL, "%s: %s", path, strerror(errno));
    CHECK_MSG(fwrite(mem, 1, n, f) == n && fclose(f) == 0, "%s: short write", path);
}

/* Run argv (argv[0] a path) to completion; its exit status, or -1 if a signal ended it. */
static inline int run_program(char *const argv[]) {
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* The signals a mount test's watcher takes must work on the program as usual. */
        sigset_t all;
        sigfillset(&all);
        sigprocmask(SIG_UNBLOCK, &all, NULL);
        execv(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The new process: argv = self restore STORE PREFIX LEN VERSION... */
static inline int restore_child_main(int argc, char **argv) {
    if (argc < 6 || strcmp(argv[1], "restore") != 0)
        return -1;
    const char *store = argv[2], *prefix = argv[3];
    const size_t len = strtoull(argv[4], NULL, 10);
    OK(test_init(store, 0));
    void *p = NULL;
    OK(ickpt_malloc(1, len, &p));
    unsigned char *want = malloc(len);
    CHECK(want != NULL);
    for (int i = 5; i < argc; i++) {
        uint64_t v = strtoull(argv[i], NULL, 10);
        char path[4096];
        expected_path(path, sizeof path, prefix, v);
        FILE *f = fopen(path, "rb");
        CHECK_MSG(f != NULL, "%s: %s", path, strerror(errno));
        CHECK_MSG(fread(want, 1, len, f) == len, "%s: shorter than %zu bytes", path, len);
        fclose(f);
        memset(p, 0xEE, len);
        OK(ickpt_restore(v));
        CHECK_MSG(first_diff(p, want, len) < 0,
                  "version %llu restored in a new process differs from what was written, "
                  "first at byte %ld", (unsigned long long)v, first_diff(p, want, len));
        printf("new process: version %llu restored exactly (%zu bytes)\n",
               (unsigned long long)v, len);
    }
    OK(ickpt_finalize());
    free(want);
    return 0;
}

/* Versions `versions[0..n)` of `store` must restore, in a new process, to the bytes saved
 * under `prefix`. The caller must have finalized (the new process takes the store's lock). */
static inline void restore_in_new_process(const char *store, const char *prefix, size_t len,
                                          const uint64_t *versions, int n) {
    char self[4096], lens[32], vs[16][24];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(k > 0);
    self[k] = '\0';
    snprintf(lens, sizeof lens, "%zu", len);
    char *argv[24] = {self, "restore", (char *)store, (char *)prefix, lens};
    CHECK(n >= 1 && n <= 16);
    for (int i = 0; i < n; i++) {
        snprintf(vs[i], sizeof vs[i], "%llu", (unsigned long long)versions[i]);
        argv[5 + i] = vs[i];
    }
    argv[5 + n] = NULL;
    int rc = run_program(argv);
    CHECK_MSG(rc == 0, "the restoring process failed (exit %d); its report is above", rc);
}

static inline void cli_verify(const char *store) {
    const char *cli = getenv("ICKPT_TEST_CLI");
    CHECK_MSG(cli != NULL && cli[0] != '\0',
              "ICKPT_TEST_CLI is not set; run this test through tests/c/run.sh");
    char *argv[] = {(char *)cli, "verify", "--dir", (char *)store, NULL};
    int rc = run_program(argv);
    CHECK_MSG(rc == 0, "ickpt verify --dir %s: exit %d; its report is above", store, rc);
    printf("ickpt verify --dir %s: every version verifies\n", store);
}

/* The committed version files in the store; anything else but the marker and the lock file
 * (a temporary a checkpoint left behind) is named and counted in *leftovers. */
static inline int store_versions(const char *store, int *leftovers) {
    DIR *d = opendir(store);
    CHECK_MSG(d != NULL, "%s: %s", store, strerror(errno));
    int n = 0;
    *leftovers = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] == 'v' && l > 6 && strcmp(e->d_name + l - 6, ".ickpt") == 0) {
            n++;
        } else if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
                   strcmp(e->d_name, "ickpt-store") && strcmp(e->d_name, "ickpt-lock")) {
            printf("left in %s: %s\n", store, e->d_name);
            ++*leftovers;
        }
    }
    closedir(d);
    return n;
}

#endif
