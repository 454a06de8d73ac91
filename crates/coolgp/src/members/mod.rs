//! Faulty members (issue 29, docs/MEMBERS.md): the cross-agent check that finds a member whose
//! rows the rest of the fleet predicts far worse than it predicts everyone else's, and the
//! verdicts that contain it.
//!
//! - [`check`]: per member, the evidence of its rows against the others' model
//!   ([`Evidence::measure`]) and the fleet-wide verdicts ([`judge`]): `Trusted`, `Suspect`,
//!   `Unverifiable` (no one else knows its inputs) or `Unchecked` (no rows to check);
//! - [`best_agreement`]: a member's evidence from its memory rows, or without a memory its
//!   newest [`RECENT_ROWS`] rows ([`check_rows`]), under each
//!   of a few peers' own models, the best-agreeing peer's ([`evidence_among`] in a fleet of
//!   agents; a node takes its peers' own excesses from their status).
//!
//! - [`bound`]: what a neighbour's message may add (its precision per claimed row against the
//!   rest of the fleet's).
//!
//! Containment itself is the agent's: a withheld agent ([`crate::Agent::set_withheld`]) keeps
//! its own data in its own model but sends none of it, so on a tree the rest of the fleet
//! converges to the model without it, exactly.

pub mod bound;
pub mod check;
mod evidence;

pub use check::{judge, CheckOptions, Evidence, Standing};
pub use evidence::{best_agreement, check_rows, evidence_among};

/// Rows an agent without a local memory keeps for the check (`--local-memory 0`): its newest,
/// in a [`crate::local::Memory`] of the `recent` policy ([`crate::Agent::recent_rows`]; not
/// checkpointed, refilled within a few blocks). [`CheckOptions`]'s default `rows`.
pub const RECENT_ROWS: usize = 64;

/// What a fleet does with its suspects (`--suspects`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Policy {
    /// No member check.
    Off,
    /// Check and report (status, summary, logs); change nothing.
    Flag,
    /// Check, report, and contain every suspect: its own data leaves the fused q(u) and the
    /// fleet's q(W) (it is withheld), its rows leave pooled fits and calibration and its
    /// answers leave fleet queries, until its rows check out again.
    #[default]
    Contain,
}

impl Policy {
    /// All policies, in `--suspects` order.
    pub const ALL: [Policy; 3] = [Policy::Off, Policy::Flag, Policy::Contain];

    /// The flag's name: `off`, `flag` or `contain`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Flag => "flag",
            Self::Contain => "contain",
        }
    }

    /// The policy named `name`.
    ///
    /// # Errors
    /// A message naming the known policies.
    pub fn from_name(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| format!("unknown --suspects '{name}': use off, flag or contain"))
    }

    /// True when members are checked (`flag` or `contain`).
    pub fn checks(self) -> bool {
        self != Self::Off
    }
}
