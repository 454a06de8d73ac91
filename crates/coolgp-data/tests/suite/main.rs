//! The integration tests of `coolgp-data` in one binary (one link instead of
//! 4): one module per former test file.

mod builtin;
mod csv;
mod data_dir;
mod glossary;
