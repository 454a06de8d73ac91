//! The library side of the `coolgp` command line: the `simulate` flags ([`args::SimArgs`]), how
//! they become a workload ([`workload::prepare`]) and a simulator configuration
//! ([`args::sim_config`]), and the vocabulary file format ([`vocab_file`]).
//!
//! The binary and the Python package (`coolgp.simulate`, `coolgp.Vocabulary.load`) share these
//! modules, so a Python keyword means exactly what its flag means.

pub mod args;
pub mod summary;
pub mod vocab_file;
pub mod workload;
