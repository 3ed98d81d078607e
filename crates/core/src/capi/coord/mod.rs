//! The calls for layers that coordinate the stores of several processes (the MPI layer,
//! `mpi/ickpt_mpi.c`), declared in `include/ickpt_coord.h` in the order of the modules below, which
//! is generated from this module alone:
//! a program that only checkpoints itself has no use for them, so `ickpt.h` leaves them out.

use super::*;

mod resolve;

mod job;

mod globals;

pub use globals::*;
pub use job::*;
pub use resolve::*;
