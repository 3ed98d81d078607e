/*
 * The MPI layer's promises, checked from inside the job (tests/mpi/run.sh runs it):
 *
 *   protocol run STEPS PAGES   each rank fills PAGES pages with values that depend on (rank,
 *                              step) only, checkpoints after every step with tag = steps
 *                              done, and on a restart checks that every rank restored the
 *                              same global version and tag and exactly that step's bytes.
 *                              Killed anywhere and run again, it finishes; the last line is
 *                              "protocol: done" with the restart point.
 *   protocol fresh STEPS PAGES like run, but starts from zeroed memory without restoring
 *                              (tags 1..STEPS continue the job's global numbering), after a
 *                              crash that left ranks' records one version apart.
 *   protocol init              only init and finalize: prints "protocol: init: ok", or the
 *                              failure (result and message) and exits 1 after MPI_Finalize
 *                              (no MPI_Abort, whose teardown can lose the output), for the
 *                              refusals tests/mpi/run.sh expects.
 *   protocol refused           init must fail with ICKPT_ERR_CORRUPT on every rank: a rank's
 *                              store was removed, so no global version is on every rank.
 *   protocol fault             run with ICKPT_FAULT on one rank only: the first checkpoint
 *                              fails on every rank with that rank's code, the ranks that
 *                              committed discard their part, no global version exists; the
 *                              next checkpoint is global 1.
 *   protocol misuse            rank 0 calls ickpt_mpi_wait while the others checkpoint:
 *                              ICKPT_ERR_COLLECTIVE on every rank, and the job goes on.
 *
 * Exits 0 on success; on a failed check prints it and calls MPI_Abort.
 */
#include <ickpt_mpi.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, size;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "protocol: rank %d: %s:%d: check failed: %s: ", rank, __FILE__, \
                    __LINE__, #cond);                                                      \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, " (last error: %s)\n", ickpt_mpi_last_error());               \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                  \
        }                                                                                  \
    } while (0)

/* The value of word i on this rank after `step` steps. */
static uint64_t value(long step, size_t i) {
    uint64_t z = (uint64_t)step * 0x9e3779b97f4a7c15ULL + (uint64_t)rank * 0xbf58476d1ce4e5b9ULL + i;
    z ^= z >> 31;
    return z * 0x94d049bb133111ebULL;
}

/* Step `step` rewrites a quarter of the words, a different quarter each step. */
static void do_step(uint64_t *m, size_t words, long step) {
    for (size_t i = (size_t)step % 4; i < words; i += 4)
        m[i] = value(step, i);
}

/* What memory holds after `steps` steps from zero. */
static int matches(const uint64_t *m, size_t words, long steps) {
    for (size_t i = 0; i < words; i++) {
        long last = -1;
        for (long s = steps; s >= 1 && s > steps - 4; s--)
            if ((size_t)s % 4 == i % 4) {
                last = s;
                break;
            }
        uint64_t want = last < 0 ? 0 : value(last, i);
        if (m[i] != want)
            return 0;
    }
    return 1;
}

/* Every rank has the same value of x. */
static int same_everywhere(uint64_t x) {
    uint64_t lo, hi;
    MPI_Allreduce(&x, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&x, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

static int run(long steps, size_t pages, int restore) {
    size_t words = pages * 4096 / sizeof(uint64_t);
    uint64_t *m = NULL;
    CHECK(ickpt_mpi_init(MPI_COMM_WORLD, NULL) == ICKPT_OK, "init");
    CHECK(ickpt_malloc(1, words * sizeof *m, (void **)&m) == ICKPT_OK, "malloc");
    uint64_t global = 0, tag = 0;
    long step = 0;
    ickpt_result r = restore ? ickpt_mpi_restore_latest(&global, &tag) : ICKPT_ERR_NOT_FOUND;
    CHECK(r == ICKPT_OK || r == ICKPT_ERR_NOT_FOUND, "restore returned %s", ickpt_result_name(r));
    CHECK(same_everywhere((uint64_t)r), "ranks got different results from the restore");
    if (r == ICKPT_OK) {
        CHECK(same_everywhere(global) && same_everywhere(tag),
              "ranks restored different versions: global %llu tag %llu here",
              (unsigned long long)global, (unsigned long long)tag);
        CHECK(matches(m, words, (long)tag), "memory is not step %llu's",
              (unsigned long long)tag);
        step = (long)tag;
    } else {
        CHECK(matches(m, words, 0), "a first run starts from zeroed memory");
    }
    long restarted_at = step;
    while (step < steps) {
        step++;
        do_step(m, words, step);
        r = ickpt_mpi_checkpoint((uint64_t)step);
        CHECK(r == ICKPT_OK, "checkpoint of step %ld: %s", step, ickpt_result_name(r));
    }
    CHECK(ickpt_mpi_wait() == ICKPT_OK, "wait");
    uint64_t g, v;
    CHECK(ickpt_mpi_global(&g, &v) == ICKPT_OK, "global");
    CHECK(same_everywhere(g) && g >= (uint64_t)steps, "global %llu after %ld steps",
          (unsigned long long)g, steps);
    CHECK(ickpt_mpi_finalize() == ICKPT_OK, "finalize");
    if (rank == 0)
        printf("protocol: done: %d ranks, %ld steps, restarted at step %ld\n", size, steps,
               restarted_at);
    return 0;
}

static int init_only(void) {
    ickpt_result r = ickpt_mpi_init(MPI_COMM_WORLD, NULL);
    if (r == ICKPT_OK)
        r = ickpt_mpi_finalize();
    if (r != ICKPT_OK) {
        printf("protocol: init: rank %d: %s: %s\n", rank, ickpt_result_name(r), ickpt_mpi_last_error());
        fflush(stdout);
        return 1;
    }
    if (rank == 0)
        printf("protocol: init: ok\n");
    return 0;
}

static int refused(void) {
    ickpt_result r = ickpt_mpi_init(MPI_COMM_WORLD, NULL);
    CHECK(r == ICKPT_ERR_CORRUPT, "init gave %s", ickpt_result_name(r));
    CHECK(strstr(ickpt_mpi_last_error(), "held by every rank") != NULL, "the message says why");
    if (rank == 0)
        printf("protocol: refused: ok\n");
    return 0;
}

static int fault(void) {
    uint64_t *m = NULL;
    CHECK(ickpt_mpi_init(MPI_COMM_WORLD, NULL) == ICKPT_OK, "init");
    CHECK(ickpt_malloc(1, 64 * 4096, (void **)&m) == ICKPT_OK, "malloc");
    do_step(m, 64 * 4096 / 8, 1);
    ickpt_result r = ickpt_mpi_checkpoint(1);
    CHECK(r != ICKPT_OK && same_everywhere((uint64_t)r),
          "a checkpoint failing on one rank fails on every rank with one code (%s here)",
          ickpt_result_name(r));
    /* Rank 0 is the one with the fault (tests/mpi/run.sh sets ICKPT_FAULT on it alone). */
    CHECK(strstr(ickpt_mpi_last_error(), "rank 0:") != NULL, "the message names rank 0");
    size_t n = 99;
    CHECK(ickpt_list_versions(NULL, 0, &n) == ICKPT_OK && n == 0,
          "%zu version(s) left on this rank after the failed global one", n);
    uint64_t g = 9, v = 9;
    CHECK(ickpt_mpi_global(&g, &v) == ICKPT_OK && g == 0, "global %llu", (unsigned long long)g);
    CHECK(ickpt_mpi_checkpoint(2) == ICKPT_OK, "the next checkpoint");
    CHECK(ickpt_mpi_global(&g, &v) == ICKPT_OK && g == 1, "global %llu", (unsigned long long)g);
    CHECK(ickpt_mpi_finalize() == ICKPT_OK, "finalize");
    if (rank == 0)
        printf("protocol: fault: ok (%s)\n", ickpt_result_name(r));
    return 0;
}

static int misuse(void) {
    uint64_t *m = NULL;
    CHECK(ickpt_mpi_init(MPI_COMM_WORLD, NULL) == ICKPT_OK, "init");
    CHECK(ickpt_malloc(1, 4096, (void **)&m) == ICKPT_OK, "malloc");
    ickpt_result r = rank == 0 ? ickpt_mpi_wait() : ickpt_mpi_checkpoint(1);
    CHECK(r == ICKPT_ERR_COLLECTIVE, "mismatched calls gave %s", ickpt_result_name(r));
    CHECK(strstr(ickpt_mpi_last_error(), "ickpt_mpi_wait") != NULL &&
              strstr(ickpt_mpi_last_error(), "ickpt_mpi_checkpoint") != NULL,
          "the message names both calls");
    CHECK(ickpt_mpi_checkpoint(1) == ICKPT_OK, "the job goes on");
    CHECK(ickpt_mpi_finalize() == ICKPT_OK, "finalize");
    if (rank == 0)
        printf("protocol: misuse: ok\n");
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rc = 2;
    if (argc == 4 && strcmp(argv[1], "run") == 0)
        rc = run(atol(argv[2]), (size_t)atol(argv[3]), 1);
    else if (argc == 4 && strcmp(argv[1], "fresh") == 0)
        rc = run(atol(argv[2]), (size_t)atol(argv[3]), 0);
    else if (argc == 2 && strcmp(argv[1], "init") == 0)
        rc = init_only();
    else if (argc == 2 && strcmp(argv[1], "refused") == 0)
        rc = refused();
    else if (argc == 2 && strcmp(argv[1], "fault") == 0)
        rc = fault();
    else if (argc == 2 && strcmp(argv[1], "misuse") == 0)
        rc = misuse();
    else if (rank == 0)
        fprintf(stderr, "usage: protocol run|fresh STEPS PAGES | init | refused | fault | misuse\n");
    MPI_Finalize();
    return rc;
}
