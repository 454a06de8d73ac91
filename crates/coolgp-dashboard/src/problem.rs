//! What the page lists at the top: [`Problem`]s, and the wording of those that read the same
//! in both modes (full statuses and briefs), so a suspect reads alike at 3 agents and at 1,000.

use coolgp_node::status::MemberJson;
use serde::Serialize;

/// Something the operator should see now.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Problem {
    /// The node concerned, `None` for the dashboard's own connection or the fleet.
    pub node: Option<u64>,
    /// What is wrong, in words.
    pub message: String,
}

/// Node `id` is a suspect of the member check (issue 29) and withholds its own data; its own
/// evidence `member` (score, z² on the informed rows), when it sends one, is quoted.
pub fn suspect(id: u64, member: Option<&MemberJson>) -> Problem {
    let evidence = member.map_or(String::new(), |m| {
        let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3}"));
        format!(
            " (score {}, z2 {} on {} of {} rows)",
            f(m.score),
            f(m.z2),
            m.informed,
            m.rows
        )
    });
    Problem {
        node: Some(id),
        message: format!(
            "is a suspect of the member check{evidence}: its own data is withheld from the fleet"
        ),
    }
}
