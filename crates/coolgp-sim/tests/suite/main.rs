//! The integration tests of `coolgp-sim` in one binary (one link instead of
//! 3): one module per former test file.

mod calibrate;
mod claims;
mod fleet;
mod members;
mod no_structure;
mod pool;
mod route;
mod scores;
mod union;
