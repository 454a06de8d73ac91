//! The library side of the `coolgp` command line: the vocabulary file format ([`vocab_file`]),
//! which the binary and the Python package (`coolgp.Vocabulary.load`) share. The `simulate`
//! options, their workload and configuration are `coolgp-sim`'s ([`coolgp_sim::args`]).

pub mod vocab_file;
