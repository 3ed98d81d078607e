/* What the unmodified test programs of `ickpt run` share: the output file each writes its
 * results to (opened by the program itself, so a restart reopens it at its offset), and a
 * busy wait that gives checkpoints time to land mid-run without sleeping. */
#ifndef PROG_H
#define PROG_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* argv[1], created or truncated; exits with status 2 (fewer than `args` arguments, with
 * `usage`) or 1 (it cannot be opened). */
static inline int open_output(int argc, char **argv, int args, const char *usage) {
    if (argc < args) {
        fprintf(stderr, "usage: %s\n", usage);
        exit(2);
    }
    int out = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0) {
        perror(argv[1]);
        exit(1);
    }
    return out;
}

/* Busy for `ns` nanoseconds of CLOCK_MONOTONIC (read through the vDSO). */
static inline void spin(long ns) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < ns);
}

#endif
