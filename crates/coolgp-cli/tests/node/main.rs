//! The tests of `coolgp-cli` that start real node processes, in one binary (one link instead of
//! 3): one module per former test file.

mod common;
mod dashboard;
mod node_fleet;
mod node_heal;
mod node_host;
mod node_influence;
mod node_local;
mod node_members;
mod node_pooled;
mod node_projection;
mod node_security;
