//! Fusion: pairwise and multi-agent (Eq. 4.10), communication graphs, tree message passing
//! (exact on trees) and push-sum (loopy or lossy graphs with fixed links) — spec §7.

pub mod pairwise;
pub mod pushsum;
pub mod topology;
pub mod tree;

pub use pairwise::{fuse_all, fuse_pair, sum_excess};
pub use pushsum::{Mass, PushSum};
pub use topology::Topology;
