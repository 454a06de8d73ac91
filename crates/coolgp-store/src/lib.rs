//! # coolgp-store — the files coolgp writes
//!
//! - [`checkpoint`]: the checkpoint format, one safetensors file with every matrix of an
//!   agent's state and JSON metadata, checksummed (the table of tensors is in the module docs
//!   and in docs/NODE.md). [`checkpoint::to_bytes`] and [`checkpoint::from_bytes`] turn an
//!   [`coolgp::Agent`] into bytes and back, bit for bit.
//! - [`vocab_file`]: the vocabulary file (JSON: Z, jitter, seed, fingerprint).
//!
//! What it is **not**: no network, no async runtime, no command line, no logging; where the
//! files live and when they are written is the caller's business (`coolgp-node` keeps a
//! checkpoint and its predecessor in a state directory and writes them durably; Python's
//! `Agent.save` writes one file). The byte format is versioned
//! ([`checkpoint::FORMAT_VERSION`]); files written by earlier builds of the same version read.
//!
//! ## Example
//! ```
//! use std::sync::Arc;
//! use coolgp::{Agent, AgentConfig, Vocabulary};
//! use coolgp_store::checkpoint::{self, AgentMeta, ModelIdentity, NodeMeta, StreamPos};
//!
//! let vocab = Arc::new(Vocabulary::default_design(6, 2, 0)?);
//! let agent = Agent::new(1, vocab.clone(), 3, AgentConfig::default())?;
//! let mut meta = NodeMeta {
//!     model: ModelIdentity {
//!         fleet: "demo".into(),
//!         id: 1,
//!         fingerprint: vocab.fingerprint().to_string(),
//!         m: vocab.m(),
//!         d_latent: vocab.d_latent(),
//!         inputs: vec!["a".into(), "b".into(), "c".into()],
//!         target: "y".into(),
//!     },
//!     stream: StreamPos::default(),
//!     blocks: 0,
//!     points: 0,
//!     round: 0,
//!     written_unix_ms: 0,
//!     agent: AgentMeta::default(),
//! };
//! let bytes = checkpoint::to_bytes(&agent, &mut meta)?;
//! let back = checkpoint::from_bytes("in-memory".as_ref(), &bytes, &vocab, 3)?;
//! assert_eq!(back.snapshot, agent.snapshot());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

pub mod checkpoint;
pub mod error;
pub mod vocab_file;

pub use error::{Result, StoreError};
