/*
 * CAPE (paper 003, Fig. 1) with ickpt: Fig. 3's loop over i run in parallel across the ranks
 * of an MPI job. Every rank initialises the same chain, then for each new vector runs its
 * share of the rows inside a section; ickpt_mpi_section_exchange sends the words each rank
 * changed to every other, which injects them, so every rank holds the whole vector, as the
 * sequential program would: the checksum printed is bit for bit `markov N LOOP none`'s.
 *
 *   mpirun -np R markov_mpi N LOOP
 *
 * Only the vector is protected: the loop writes nothing else (a section copies what it
 * tracks when it starts, so tracking the matrix too would copy it at every iteration).
 */
#include <ickpt_mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define RAND 10000

static uint64_t checksum(const float *v, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *p = (const unsigned char *)v;
    for (size_t i = 0; i < n * sizeof *v; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static void check(ickpt_result rc, const char *what) {
    if (rc != ICKPT_OK) {
        fprintf(stderr, "markov_mpi: %s: %s\n", what, ickpt_mpi_last_error()[0] ? ickpt_mpi_last_error() : ickpt_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3) {
        if (rank == 0)
            fprintf(stderr, "usage: markov_mpi N LOOP\n");
        MPI_Finalize();
        return 2;
    }
    const size_t n = strtoull(argv[1], NULL, 10);
    const int loop = atoi(argv[2]);
    float *m = malloc(n * n * sizeof(float));
    float *v = aligned_alloc(4096, (2 * n * sizeof(float) + 4095) / 4096 * 4096);
    if (m == NULL || v == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    double t0 = MPI_Wtime();
    check(ickpt_mpi_init(MPI_COMM_WORLD, NULL), "ickpt_mpi_init");
    check(ickpt_protect(2, v, 2 * n * sizeof(float)), "ickpt_protect");
    /* The initialisation, the same on every rank. */
    float sum, val;
    srand(1);
    for (size_t i = 0; i < n; i++) {
        sum = 0;
        for (size_t j = 0; j < n; j++, sum += val)
            m[i * n + j] = val = (float)(rand() % RAND);
        for (size_t j = 0; j < n; j++)
            m[i * n + j] /= sum;
    }
    sum = 0;
    for (size_t i = 0; i < n; i++, sum += val)
        v[i] = val = (float)(rand() % RAND);
    for (size_t i = 0; i < n; i++)
        v[i] /= sum;
    /* This rank's rows. */
    const size_t lo = n * (size_t)rank / (size_t)size, hi = n * (size_t)(rank + 1) / (size_t)size;
    double t_loop = MPI_Wtime();
    for (int l = 0, k = 0; l < loop; l++, k = 1 - k) {
        check(ickpt_section_start(NULL), "ickpt_section_start");
        for (size_t i = lo; i < hi; i++) {
            v[(1 - k) * n + i] = 0.f;
            for (size_t j = 0; j < n; j++)
                v[(1 - k) * n + i] += v[k * n + j] * m[j * n + i];
        }
        check(ickpt_mpi_section_exchange(NULL), "ickpt_mpi_section_exchange");
        check(ickpt_section_stop(), "ickpt_section_stop");
    }
    double t_end = MPI_Wtime();
    if (rank == 0) {
        printf("N %zu loop %d ranks %d seconds %.3f loop_seconds %.3f\n", n, loop, size,
               t_end - t0, t_end - t_loop);
        printf("checksum %016llx\n", (unsigned long long)checksum(v + (size_t)(loop % 2) * n, n));
    }
    check(ickpt_mpi_finalize(), "ickpt_mpi_finalize");
    MPI_Finalize();
    return 0;
}
