/*
 * The CAPE paper's Fig. 3 (successive elements of a Markov chain) with ickpt's program sections,
 * as Table II measures it:
 *
 *   markov N LOOP MODE [STOP]
 *     MODE none  no checkpoints;
 *          loc2  tracking starts at location 1, after the initialisation (which a restart
 *                simply redoes); a save at location 2, after each new vector;
 *          all   tracking starts at location 0; a save at location 1 (the whole
 *                initialisation) and at each location 2.
 *     STOP       end the process (as a crash would) right after iteration STOP's save.
 *
 * Run again in the same ICKPT_DIR, it recovers: the saves are injected and the loop resumes
 * after the last one. It prints the state vector's checksum (the same however often it was
 * stopped) and, with sections, the save sizes.
 */
#include <ickpt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "markov.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what) {
    fprintf(stderr, "markov: %s: %s\n", what, ickpt_last_error());
    exit(1);
}

/* Time spent in ickpt's section calls: the checkpoints' own cost, apart from the noise of
 * the run around them. */
static double in_ickpt;

/* CALL, timed into in_ickpt; the program ends, naming WHAT, if it fails. */
#define TIMED(what, call)                                                                  \
    do {                                                                                   \
        double t_ = now();                                                                 \
        if ((call) != ICKPT_OK)                                                            \
            die(what);                                                                     \
        in_ickpt += now() - t_;                                                            \
    } while (0)

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: markov N LOOP none|loc2|all [STOP]\n");
        return 2;
    }
    const size_t n = strtoull(argv[1], NULL, 10);
    const int loop = atoi(argv[2]);
    const char *mode = argv[3];
    const int stop = argc > 4 ? atoi(argv[4]) : -1;
    const int sections = strcmp(mode, "none") != 0, all = strcmp(mode, "all") == 0;
    double t0 = now();
    float *m = aligned_alloc(4096, (n * n * sizeof(float) + 4095) / 4096 * 4096);
    float *v = aligned_alloc(4096, (2 * n * sizeof(float) + 4095) / 4096 * 4096);
    if (m == NULL || v == NULL)
        return 1;
    if (sections) {
        if (ickpt_init(NULL) != ICKPT_OK)
            die("ickpt_init");
        if (ickpt_protect(1, m, n * n * sizeof(float)) != ICKPT_OK ||
            ickpt_protect(2, v, 2 * n * sizeof(float)) != ICKPT_OK)
            die("ickpt_protect");
    }
    uint64_t resume = 0;
    ickpt_section_info info;
    double loc1_bytes = 0, loc2_bytes = 0, loc2_pages = 0;
    int loc2_saves = 0;
    /* Location 0. */
    if (all)
        TIMED("section start at location 0", ickpt_section_start(&resume));
    if (resume == 0) {
        markov_init(m, v, n);
        /* Location 1. */
        if (all) {
            TIMED("save at location 1", ickpt_section_save("init", &info));
            loc1_bytes = (double)info.delta_bytes;
        }
    }
    if (sections && !all)
        TIMED("section start at location 1", ickpt_section_start(&resume));
    /* Saves done before this run: in `all` mode the first was location 1's. */
    int l = (int)resume - (all && resume > 0);
    for (int k = l % 2; l < loop; l++, k = 1 - k) {
        markov_rows(m, v, n, k, 0, n);
        /* Location 2. */
        if (sections) {
            TIMED("save at location 2", ickpt_section_save("loop", &info));
            loc2_bytes += (double)info.delta_bytes;
            loc2_pages += (double)info.pages;
            loc2_saves++;
        }
        if (l == stop) {
            printf("stopped after iteration %d\n", l);
            fflush(stdout);
            _exit(0);
        }
    }
    if (sections && (ickpt_section_stop() != ICKPT_OK || ickpt_finalize() != ICKPT_OK))
        die("section stop");
    printf("N %zu loop %d mode %s resumed %llu seconds %.3f ickpt_seconds %.4f\n", n, loop,
           mode, (unsigned long long)resume, now() - t0, in_ickpt);
    if (loc1_bytes > 0)
        printf("location1_bytes %.0f\n", loc1_bytes);
    if (loc2_saves > 0)
        printf("location2_bytes %.1f location2_page_bytes %.1f\n", loc2_bytes / loc2_saves,
               loc2_pages * (double)sysconf(_SC_PAGESIZE) / loc2_saves);
    printf("checksum %016llx\n", (unsigned long long)markov_checksum(v + (size_t)(loop % 2) * n, n));
    return 0;
}
