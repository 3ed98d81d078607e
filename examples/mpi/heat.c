/*
 * 1-D heat diffusion over MPI ranks: heat.c is the original, heat_ickpt.c the same code with
 * coordinated checkpoints (ickpt_mpi.h); `diff heat.c heat_ickpt.c` is the whole cost of
 * adoption. Killed at any moment and run again with the same ICKPT_DIR, heat_ickpt resumes
 * every rank from the same global version and prints the checksum an uninterrupted run does.
 *
 * In this directory, with ickpt installed and PKG_CONFIG_PATH naming its pkgconfig directory
 * (README.md; `--oversubscribe` is Open MPI's, for more ranks than cores):
 *   mpicc -O2 heat.c -o heat && mpirun --oversubscribe -np 4 ./heat [STEPS [CELLS]]
 *   mpicc -O2 heat_ickpt.c -o heat_ickpt $(pkg-config --cflags --libs ickpt-mpi)
 *   ICKPT_DIR=$HOME/heat-job mpirun --oversubscribe -np 4 ./heat_ickpt [STEPS [CELLS [EVERY]]]
 *
 * Each rank owns CELLS cells of a rod (default 1,000,000) and exchanges one halo cell with
 * each neighbour per step, received into local variables (receiving straight into the
 * protected arrays works too: libickpt_mpi prepares receive buffers, docs/mpi.md); heat_ickpt checkpoints every EVERY steps (default 100). Two arrays
 * alternate: after step `it` the temperatures are in a[] when it is odd, b[] when even, so
 * the step count alone says where the state is. At the end rank 0 prints a checksum of the
 * whole rod, bit-identical run after run.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long steps = argc > 1 ? atol(argv[1]) : 2000;
    long cells = argc > 2 ? atol(argv[2]) : 1000000;
    size_t bytes = (size_t)(cells + 2) * sizeof(double);
    double *a = calloc(1, bytes), *b = calloc(1, bytes);
    if (a == NULL || b == NULL) {
        fprintf(stderr, "heat: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0)
        for (long i = 1; i <= cells / 10; i++)
            b[i] = 100.0; /* a hot end */
    long it = 0;
    for (; it < steps; it++) {
        double *u = it % 2 == 0 ? b : a, *v = it % 2 == 0 ? a : b;
        int left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
        int right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
        double from_right = 0.0, from_left = 0.0; /* the ends stay at 0 */
        MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 0, &from_right, 1, MPI_DOUBLE, right, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&u[cells], 1, MPI_DOUBLE, right, 1, &from_left, 1, MPI_DOUBLE, left, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        u[0] = from_left;
        u[cells + 1] = from_right;
        for (long i = 1; i <= cells; i++)
            v[i] = u[i] + 0.25 * (u[i - 1] - 2.0 * u[i] + u[i + 1]);
    }
    double *u = it % 2 == 0 ? b : a, local = 0.0, total = 0.0;
    for (long i = 1; i <= cells; i++)
        local += u[i] * (double)((i + rank * cells) % 1000 + 1);
    MPI_Reduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("heat: %d ranks, %ld cells each, %ld steps, checksum %.17g\n", size, cells, steps,
               total);
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
