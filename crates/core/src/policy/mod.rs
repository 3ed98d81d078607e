//! Pure decisions, testable without memory tricks or I/O: the kind of each checkpoint
//! (`kind`) and where a chain ends for a restart's sake (`restart_bound`), what a store keeps
//! (`retention`), the committer's flush order (`flush_order`), and pre-copy's prediction
//! (`prwip`).

mod flush_order;
mod kind;
pub mod prwip;
mod restart_bound;
mod retention;

pub use flush_order::{adaptive_priority, Access};
pub use kind::{
    cost_kind, next_kind, saving, ChainCosts, Cost, CostReason, Head, KindPolicy, MAX_COST_CHAIN,
};
pub use restart_bound::{bounded_kind, valid_bound, ChainBytes, BOUND_EXPECTED};
pub use retention::{collectable, restore_set, Known, Retention};
