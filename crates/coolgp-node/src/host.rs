//! `coolgp host FILE`: many agents in one process (issue 31, docs/NODE.md §15). Each agent
//! is the node of `coolgp node` (its own id, data stream, state directory, checkpoint and
//! key) and all share one zenoh session and one runtime; on the wire a host is
//! indistinguishable from one process per agent, so hosts and single nodes mix in a fleet.
//!
//! The file is a node configuration file (the keys of `coolgp node`) whose top level holds
//! what the agents share — the fleet, the model, the round period and the host's one session
//! (`listen`, `connect`, `tls`) — and one `[[agent]]` table per agent with what is its own
//! (`id`, `data`, `state`, `neighbors`, and any other key it sets differently):
//!
//! ```toml
//! fleet = "city"
//! inducing = 50
//! round-ms = 200
//! listen = ["tcp/127.0.0.1:7447"]
//!
//! [[agent]]
//! id = 0
//! data = "sensors/0.csv"
//! state = "state/0"
//! neighbors = [1]
//!
//! [[agent]]
//! id = 1
//! data = "sensors/1.csv"
//! state = "state/1"
//! neighbors = [0, 2]
//! ```

use std::collections::BTreeSet;
use std::path::PathBuf;

use clap::Args;

use crate::config::{NodeArgs, NodeSettings, ZenohArgs};
use crate::error::{NodeError, Result};

/// Flags of `coolgp host`.
#[derive(Args, Debug, Clone)]
pub struct HostArgs {
    /// The host's file: shared keys at the top, one `[[agent]]` table per agent (module doc;
    /// docs/NODE.md §15).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Log format: text or json [default: the file's, else text]. Each line names its agent.
    #[arg(long)]
    pub log_format: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub zenoh: ZenohArgs,
}

/// What a host runs: every agent's settings and the one session's.
#[derive(Clone, Debug)]
pub struct Host {
    /// The agents, in the file's order.
    pub agents: Vec<NodeSettings>,
    /// The session's endpoints and security (the flags over the file's top level).
    pub zenoh: ZenohArgs,
}

impl HostArgs {
    /// Reads and checks the file: every agent resolved as `coolgp node` resolves its flags
    /// (the agent's keys over the shared ones), the session's keys at the top only.
    ///
    /// # Errors
    /// [`NodeError::Config`] naming the file and, where it is one agent's, the agent: an
    /// unreadable or malformed file, no `[[agent]]`, an unknown key, a session key inside an
    /// agent, an agent named twice, or an agent's settings refused by `coolgp node`'s rules.
    pub fn resolve(&self) -> Result<Host> {
        let path = &self.file;
        let bad = |e: String| NodeError::Config(format!("{}: {e}", path.display()));
        let text = std::fs::read_to_string(path)
            .map_err(|e| NodeError::io("reading host file", path, e))?;
        let mut top: toml::Table = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let agents =
            match top.remove("agent") {
                Some(toml::Value::Array(a)) if !a.is_empty() => a,
                _ => return Err(bad(
                    "no [[agent]] table: list each agent as an [[agent]] table with its id, data, \
                     state and neighbors"
                        .into(),
                )),
            };
        let known = NodeArgs::known_keys();
        coolgp_config::check_keys(top.keys().map(String::as_str), &known).map_err(bad)?;
        let shared: NodeArgs = toml::Value::Table(top)
            .try_into()
            .map_err(|e: toml::de::Error| bad(e.to_string()))?;
        let zenoh = self.zenoh.clone().merged(shared.zenoh.clone());
        let mut seen = BTreeSet::new();
        let mut out = Vec::with_capacity(agents.len());
        for (k, a) in agents.into_iter().enumerate() {
            let toml::Value::Table(t) = a else {
                return Err(bad(format!("agent #{} is not a table", k + 1)));
            };
            let who = t
                .get("id")
                .and_then(toml::Value::as_integer)
                .map_or_else(|| format!("agent #{}", k + 1), |id| format!("agent {id}"));
            let named = |e: String| bad(format!("{who}: {e}"));
            coolgp_config::check_keys(t.keys().map(String::as_str), &known).map_err(named)?;
            if let Some(key) = ZenohArgs::KEYS.iter().find(|key| t.contains_key(**key)) {
                return Err(named(format!(
                    "`{key}` belongs to the host, not to one agent: the agents share one zenoh \
                     session (give it at the top of the file)"
                )));
            }
            let own: NodeArgs = toml::Value::Table(t)
                .try_into()
                .map_err(|e: toml::de::Error| named(e.to_string()))?;
            let mut args = own.merged(shared.clone());
            args.zenoh = zenoh.clone();
            if self.log_format.is_some() {
                args.log_format = self.log_format.clone();
            }
            let s = args.resolve().map_err(|e| named(e.to_string()))?;
            if !seen.insert(s.id) {
                return Err(bad(format!(
                    "agent {} is named twice: every agent of a host needs its own id",
                    s.id
                )));
            }
            out.push(s);
        }
        Ok(Host { agents: out, zenoh })
    }
}
