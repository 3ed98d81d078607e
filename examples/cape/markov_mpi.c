/*
 * CAPE (its paper's Fig. 1) with ickpt: Fig. 3's loop over i run in parallel across the ranks
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

#include "markov.h"

/* The job ends if `rc` is a failure; `message` is the library's for it (ickpt_last_error
 * after a call of ickpt.h, ickpt_mpi_last_error after one of ickpt_mpi.h). */
static void check(ickpt_result rc, const char *what, const char *(*message)(void)) {
    if (rc != ICKPT_OK) {
        fprintf(stderr, "markov_mpi: %s: %s\n", what, message());
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
    check(ickpt_mpi_init(MPI_COMM_WORLD, NULL), "ickpt_mpi_init", ickpt_mpi_last_error);
    check(ickpt_protect(2, v, 2 * n * sizeof(float)), "ickpt_protect", ickpt_last_error);
    /* The initialisation, the same on every rank. */
    markov_init(m, v, n);
    /* This rank's rows. */
    const size_t lo = n * (size_t)rank / (size_t)size, hi = n * (size_t)(rank + 1) / (size_t)size;
    double t_loop = MPI_Wtime();
    for (int l = 0, k = 0; l < loop; l++, k = 1 - k) {
        check(ickpt_section_start(NULL), "ickpt_section_start", ickpt_last_error);
        markov_rows(m, v, n, k, lo, hi);
        check(ickpt_mpi_section_exchange(NULL), "ickpt_mpi_section_exchange",
              ickpt_mpi_last_error);
        check(ickpt_section_stop(), "ickpt_section_stop", ickpt_last_error);
    }
    double t_end = MPI_Wtime();
    if (rank == 0) {
        printf("N %zu loop %d ranks %d seconds %.3f loop_seconds %.3f\n", n, loop, size,
               t_end - t0, t_end - t_loop);
        printf("checksum %016llx\n", (unsigned long long)markov_checksum(v + (size_t)(loop % 2) * n, n));
    }
    check(ickpt_mpi_finalize(), "ickpt_mpi_finalize", ickpt_mpi_last_error);
    MPI_Finalize();
    return 0;
}
