// ickpt_mpi.h from C++: it compiles with the MPI's C++ wrapper and links (extern "C"). Built with
// -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX, as C++ MPI codes usually are: Open MPI's deprecated
// C++ bindings do not pass -Wextra -Werror.
#include <ickpt_mpi.h>

#include <cstdio>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    bool ok = ickpt_mpi_init(MPI_COMM_WORLD, nullptr) == ICKPT_OK &&
              ickpt_mpi_finalize() == ICKPT_OK;
    if (!ok)
        std::fprintf(stderr, "cxx_header: %s\n", ickpt_mpi_last_error());
    else if (rank == 0)
        std::printf("cxx_header: ok\n");
    MPI_Finalize();
    return ok ? 0 : 1;
}
