//! The built `coolgp` binary, run as a user would, in one binary: one module per theme.

mod common;
mod experiments;
mod refusals;
mod simulate;
mod vocab_export;
