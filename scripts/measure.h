/* What the hand-run measurement programs of scripts/ share: a monotonic clock in
 * milliseconds, and an exit naming the call that failed. */
#ifndef ICKPT_SCRIPTS_MEASURE_H
#define ICKPT_SCRIPTS_MEASURE_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void must(int ok, const char *what) {
    if (!ok) {
        perror(what);
        exit(1);
    }
}

#endif
