/*
 * ickpt_mpi: coordinated checkpoints of an MPI job on top of ickpt (the hybrid
 * full/incremental paper's coordinated versions).
 *
 * Every rank keeps its own ickpt store under one job directory (DIR/rank-NNNNN); a version is
 * *global* once every rank has committed its part: then each rank records it (a global-commit
 * record, docs/FORMAT.md). A restart restores, on every rank, the newest global version all
 * ranks recorded, and discards what is newer, so ranks never restart at different points.
 *
 * The calls marked COLLECTIVE must be called by every rank of the communicator given to
 * ickpt_mpi_init, in the same order. Each first checks that all ranks are in the same call;
 * if not, every rank gets ICKPT_ERR_COLLECTIVE with a message naming what the ranks called.
 * A collective call that fails on one rank fails on every rank with the same result code,
 * and ickpt_mpi_last_error() names the rank and its problem. Memory is protected with the
 * serial calls of ickpt.h (ickpt_protect, ickpt_malloc), rank by rank.
 *
 * Link with `pkg-config --cflags --libs ickpt-mpi`, built with the MPI compiler wrapper of
 * the MPI this library was built with (docs/mpi.md). The library also defines MPI's receive,
 * collective and completion calls (MPI_Recv, PMPI_Recv, ...), which take the first writes of
 * a receive buffer's protected pages before calling MPI's own: MPI may then receive straight
 * into protected memory on every backend (docs/mpi.md, "Memory written by MPI itself").
 */
#ifndef ICKPT_MPI_H
#define ICKPT_MPI_H

#include <ickpt.h>
#include <mpi.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * COLLECTIVE. Start ickpt on every rank of `comm`. `cfg` (may be NULL: the defaults) is
 * the serial configuration; its `dir` (or ICKPT_DIR when NULL) names the *job* directory,
 * created if missing (owner-only), in which rank r gets the store DIR/rank-r (five digits).
 * The job directory records the number of ranks: a restart with another number is refused
 * (ICKPT_ERR_INVALID_ARGUMENT). The directory must be one all ranks see (a shared file
 * system): rank 0 creates it and checks the number of ranks. Init already agrees on the
 * job's newest global version and discards anything newer on every rank (as a restart does),
 * so a job started afresh in an old directory continues its numbering; if the ranks' newest
 * records are more than one version apart (a rank's store was lost or replaced), it fails
 * with ICKPT_ERR_CORRUPT and discards nothing. ickpt keeps a duplicate of `comm` for its own
 * messages.
 */
ickpt_result ickpt_mpi_init(MPI_Comm comm, const ickpt_config *cfg);

/*
 * COLLECTIVE. Restart: find the newest global version every rank recorded, discard on
 * every rank the versions newer than it (so no later restart can pick them), and restore
 * it into each rank's protected memory. `*global` receives its number and `*tag` this
 * rank's tag (the value given to ickpt_mpi_checkpoint). ICKPT_ERR_NOT_FOUND on every rank
 * when there is none (a first run; no version being global, every rank's are discarded).
 */
ickpt_result ickpt_mpi_restore_latest(uint64_t *global, uint64_t *tag);

/*
 * COLLECTIVE. Checkpoint every rank's protected memory as the next global version,
 * carrying `tag` (an iteration number, say).
 * Sync mode: returns once the version is global: every rank committed it and recorded it.
 * Async mode (cfg.mode = ICKPT_MODE_ASYNC): returns once this rank's pages are scheduled;
 * the version becomes global at the next collective call (ickpt_mpi_checkpoint,
 * ickpt_mpi_wait or ickpt_mpi_finalize), which first waits for it, agrees and records it,
 * and returns its failure, if it failed on any rank (starting nothing new then).
 * On failure on any rank, every rank discards its part and the previous global version stays
 * the newest; the next checkpoint is taken afresh.
 */
ickpt_result ickpt_mpi_checkpoint(uint64_t tag);

/*
 * COLLECTIVE. Async mode: make the checkpoint in flight global (or report, on every rank,
 * that it failed). Returns at once when none is in flight.
 */
ickpt_result ickpt_mpi_wait(void);

/*
 * COLLECTIVE. Finish the checkpoint in flight (as ickpt_mpi_wait), then stop ickpt on
 * every rank. ickpt is stopped even when this returns an error.
 */
ickpt_result ickpt_mpi_finalize(void);

/*
 * Local. The newest global version this rank knows of (0 before the first), and the
 * version of its own store holding it.
 */
ickpt_result ickpt_mpi_global(uint64_t *global, uint64_t *version);

/*
 * Local. The message of the last failed ickpt_mpi call on this rank ("" if none), naming
 * the rank where the failure happened.
 */
/*
 * COLLECTIVE. CAPE's parallel for-loop (docs/sections.md): every rank ran its
 * share of a loop's iterations inside a section (ickpt_section_start); each rank's words
 * changed since the start (or its last take or save) go to every rank, which injects them
 * all in rank order, so every rank ends with the state of the whole loop, as if it had run
 * every iteration. The section stays open: call ickpt_section_stop after (a save in it holds
 * the whole loop's words). The iterations must write disjoint words (the loop is parallel):
 * where two ranks wrote one word, every rank ends with the higher rank's value. `info`
 * (optional) receives this rank's take. A rank whose take or inject fails fails the call on
 * every rank; every delta is checked before any is injected.
 */
ickpt_result ickpt_mpi_section_exchange(ickpt_section_info *info);

const char *ickpt_mpi_last_error(void);

/* For Fortran (module ickpt_mpi): ickpt_mpi_init with a Fortran communicator handle. */
ickpt_result ickpt_mpi_init_f(MPI_Fint comm, const ickpt_config *cfg);

#ifdef __cplusplus
}
#endif

#endif /* ICKPT_MPI_H */
