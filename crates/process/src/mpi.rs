//! MPI ranks are refused whole-process checkpoints: one rank restarted alone cannot rejoin its
//! job, whose other ranks and connections are gone.

/// Variables an MPI launcher (Open MPI, MPICH/Hydra, PMIx) sets in every rank.
const RANK_VARS: [&str; 3] = ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"];

/// The refusal, naming the variable that says this is an MPI rank, if one does.
pub fn refusal() -> Option<String> {
    let var = RANK_VARS
        .into_iter()
        .find(|v| std::env::var_os(v).is_some())?;
    Some(format!(
        "this is an MPI rank ({var} is set): a whole MPI process cannot be restarted on its own. \
         Checkpoint MPI programs with the MPI API instead (#include <ickpt_mpi.h>, docs/mpi.md)."
    ))
}
