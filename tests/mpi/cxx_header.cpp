// ickpt_mpi.h from C++: it compiles with the MPI's C++ wrapper and links (extern "C"). Built with
// -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX, as C++ MPI codes usually are: Open MPI's deprecated
// C++ bindings do not pass -Wextra -Werror.
#include <ickpt_mpi.h>

#include <cstdio>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    if (ickpt_mpi_init(MPI_COMM_WORLD, nullptr) != ICKPT_OK)
        std::fprintf(stderr, "%s\n", ickpt_mpi_last_error());
    else
        ickpt_mpi_finalize();
    MPI_Finalize();
    return 0;
}
