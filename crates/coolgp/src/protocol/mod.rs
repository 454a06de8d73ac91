//! The agent as a sans-IO state machine, its messages and its events.

pub mod agent;
pub mod codec;
mod config;
pub mod event;
mod fleet_projection;
mod fleet_sites;
mod fusion;
mod inbound;
mod learner_check;
pub mod memory;
pub mod message;
pub mod snapshot;

pub use agent::{Agent, AgentConfig, FusionRule, ProjectionMode, View};
pub use event::Event;
pub use message::{validate_excess, AgentId, Body, Header, Message, ProjectionShare, RejectReason};
pub use snapshot::{AgentSnapshot, InboundSnapshot};
