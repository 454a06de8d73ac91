//! The integration tests of `coolgp` in one binary (one link instead of
//! 10): one module per former test file.

mod agent_protocol;
mod codec;
mod common;
mod fleet_site_memory;
mod fleet_sites;
mod fusion_laws;
mod hardening;
mod local;
mod local_cost;
mod members;
mod numerics;
mod projection_groups;
mod shared_projection;
mod site_influence;
mod snapshot;
mod spec_vectors;
