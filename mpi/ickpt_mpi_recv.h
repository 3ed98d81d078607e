/*
 * Private to libickpt_mpi (not installed): what ickpt_mpi.c needs of the receive wrappers in
 * ickpt_mpi_recv.c.
 */
#ifndef ICKPT_MPI_RECV_H
#define ICKPT_MPI_RECV_H

/*
 * Open again, for the kernel, the buffers of receives still pending (MPI_Irecv and the other
 * non-blocking receives and collectives, started persistent receives): a checkpoint has just
 * protected their pages again. Called right after the local checkpoint, before any MPI call:
 * the agreement that follows runs MPI's progress engine, which may write into them.
 */
__attribute__((visibility("hidden"))) void ickpt_mpi_recv_reopen_pending(void);

#endif
