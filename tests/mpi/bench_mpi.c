/*
 * bench_mpi: what coordination adds to a checkpoint (make bench-mpi, docs/benchmarks.md).
 *
 *   bench_mpi checkpoint MIB PCT REPS   each rank protects MIB MiB of random bytes; each
 *       repetition rewrites PCT% of its pages (distinct random ones, fresh random bytes) and takes a
 *       global checkpoint (ickpt_mpi_checkpoint), then rewrites as many and takes a local
 *       one (ickpt_checkpoint_tagged: the same commit without the agreement and the record),
 *       in alternating order. Both start after an MPI_Barrier and are timed on every rank;
 *       the slowest rank's time counts (the job waits for it). The local versions are never
 *       global: a restart discards those newer than the last global one.
 *   bench_mpi restart MIB               in a job directory a `checkpoint` run left: time
 *       ickpt_mpi_restore_latest (the agreement, the discard and the restore).
 *
 * Rank 0 prints one JSON object per line. Sync mode (ICKPT_MODE is the caller's).
 */
#include <ickpt_mpi.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, size;

static void die(const char *what, ickpt_result r, const char *msg) {
    fprintf(stderr, "bench_mpi: rank %d: %s: %s: %s\n", rank, what, ickpt_result_name(r), msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next(void) {
    uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Rewrite `n` distinct random pages of `m` (`pages` pages) with fresh random bytes: the
 * first n of a partial Fisher-Yates shuffle of `order` (the page numbers, kept between
 * calls). */
static void dirty(uint64_t *m, size_t *order, size_t pages, size_t n) {
    for (size_t k = 0; k < n; k++) {
        size_t j = k + (size_t)(next() % (pages - k)), tmp = order[k];
        order[k] = order[j];
        order[j] = tmp;
        uint64_t *p = m + order[k] * 512;
        for (int i = 0; i < 512; i++)
            p[i] = next();
    }
}

/* The tracking backend ickpt runs, by name. */
static const char *backend(void) {
    ickpt_stats s;
    if (ickpt_get_stats(&s) != ICKPT_OK)
        return "unknown";
    switch (s.backend) {
    case ICKPT_BACKEND_MPROTECT: return "mprotect";
    case ICKPT_BACKEND_UFFD: return "uffd";
    case ICKPT_BACKEND_UFFD_ASYNC: return "uffd-async";
    default: return "unknown";
    }
}

static double slowest(double t) {
    double max = 0;
    MPI_Allreduce(&t, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

static void *setup(size_t mib, size_t *pages) {
    rng += (uint64_t)rank * 0x1234567ULL;
    ickpt_result r = ickpt_mpi_init(MPI_COMM_WORLD, NULL);
    if (r != ICKPT_OK)
        die("init", r, ickpt_mpi_last_error());
    *pages = mib * 256;
    void *m = NULL;
    r = ickpt_malloc(1, *pages * 4096, &m);
    if (r != ICKPT_OK)
        die("malloc", r, ickpt_last_error());
    return m;
}

static int checkpoint(size_t mib, int pct, int reps) {
    size_t pages;
    uint64_t *m = setup(mib, &pages);
    size_t *order = malloc(pages * sizeof *order);
    if (order == NULL)
        die("malloc", ICKPT_ERR_IO, "out of memory");
    for (size_t i = 0; i < pages; i++)
        order[i] = i;
    dirty(m, order, pages, pages); /* all random */
    ickpt_result r = ickpt_mpi_checkpoint(0);
    if (r != ICKPT_OK)
        die("first checkpoint", r, ickpt_mpi_last_error());
    size_t n = pages * (size_t)pct / 100;
    double *global = calloc((size_t)reps, sizeof *global), *local = calloc((size_t)reps, sizeof *local);
    double *ratio = calloc((size_t)reps, sizeof *ratio);
    for (int rep = 0; rep < reps; rep++) {
        for (int step = 0; step < 2; step++) {
            int coordinated = (step == 0) == (rep % 2 == 0);
            dirty(m, order, pages, n);
            MPI_Barrier(MPI_COMM_WORLD);
            double t = now();
            if (coordinated) {
                r = ickpt_mpi_checkpoint((uint64_t)rep + 1);
                if (r != ICKPT_OK)
                    die("checkpoint", r, ickpt_mpi_last_error());
                global[rep] = slowest(now() - t);
            } else {
                r = ickpt_checkpoint_tagged((uint64_t)rep + 1, NULL);
                if (r != ICKPT_OK)
                    die("local checkpoint", r, ickpt_last_error());
                local[rep] = slowest(now() - t);
            }
        }
        ratio[rep] = global[rep] / local[rep];
    }
    const char *tracked_by = backend();
    ickpt_mpi_finalize();
    if (rank == 0) {
        printf("{\"what\": \"checkpoint\", \"ranks\": %d, \"mib_per_rank\": %zu, \"dirty_percent\": %d, "
               "\"backend\": \"%s\", \"reps\": %d, \"ratios\": [",
               size, mib, pct, tracked_by, reps);
        for (int i = 0; i < reps; i++)
            printf("%s%.4f", i ? ", " : "", ratio[i]);
        double mr = median(ratio, reps), mg = median(global, reps), ml = median(local, reps);
        printf("], \"median_ratio\": %.4f, \"global_ms\": %.3f, \"local_ms\": %.3f}\n", mr,
               mg * 1e3, ml * 1e3);
    }
    free(order);
    free(global);
    free(local);
    free(ratio);
    return 0;
}

static int restart(size_t mib) {
    size_t pages;
    setup(mib, &pages);
    MPI_Barrier(MPI_COMM_WORLD);
    double t = now();
    uint64_t g, tag;
    ickpt_result r = ickpt_mpi_restore_latest(&g, &tag);
    if (r != ICKPT_OK)
        die("restore", r, ickpt_mpi_last_error());
    double took = slowest(now() - t);
    ickpt_mpi_finalize();
    if (rank == 0)
        printf("{\"what\": \"restart\", \"ranks\": %d, \"mib_per_rank\": %zu, \"global\": %llu, "
               "\"restart_ms\": %.3f}\n",
               size, mib, (unsigned long long)g, took * 1e3);
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rc = 2;
    if (argc == 5 && strcmp(argv[1], "checkpoint") == 0)
        rc = checkpoint((size_t)atol(argv[2]), atoi(argv[3]), atoi(argv[4]));
    else if (argc == 3 && strcmp(argv[1], "restart") == 0)
        rc = restart((size_t)atol(argv[2]));
    else if (rank == 0)
        fprintf(stderr, "usage: bench_mpi checkpoint MIB PCT REPS | restart MIB\n");
    MPI_Finalize();
    return rc;
}
