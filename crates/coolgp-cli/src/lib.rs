//! The library side of the `coolgp` command line: the `coolgp vocab` command ([`vocab_file`];
//! the file format itself is `coolgp-store`'s). The `simulate` options, their workload and
//! configuration are `coolgp-sim`'s ([`coolgp_sim::args`]), the agent options
//! `coolgp-config`'s.

pub mod vocab_file;
