//! The key-expression layout of a fleet (one place, documented in `docs/NODE.md`).
//!
//! | key expression                     | what                                   |
//! |------------------------------------|----------------------------------------|
//! | `coolgp/<fleet>/<from>/msg/<to>`   | model messages (codec bytes), put      |
//! | `coolgp/<fleet>/<agent>/predict`   | prediction queryable (JSON in and out) |
//! | `coolgp/<fleet>/*/predict`         | every agent's predictions (`query --all`) |
//! | `coolgp/<fleet>/<agent>/status`    | status queryable (JSON out)            |
//! | `coolgp/<fleet>/<agent>/alive`     | liveliness token (membership)          |
//!
//! `<fleet>` is a name of letters, digits, `-`, `_` and `.`; agent ids are decimal `u64`.

use crate::error::{NodeError, Result};

/// The first chunk of every key.
pub const ROOT: &str = "coolgp";

/// Longest fleet name accepted.
pub const MAX_FLEET_LEN: usize = 64;

/// Checks that a fleet name is a single, wildcard-free key chunk.
///
/// # Errors
/// [`NodeError::Config`] for an empty, too long or otherwise unusable name.
pub fn validate_fleet(fleet: &str) -> Result<()> {
    let ok = !fleet.is_empty()
        && fleet.len() <= MAX_FLEET_LEN
        && fleet
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(NodeError::Config(format!(
            "fleet name '{fleet}': use 1 to {MAX_FLEET_LEN} letters, digits, '-', '_' or '.'"
        )))
    }
}

/// `coolgp/<fleet>/<from>/msg/<to>`: where `from` publishes its messages to `to`.
pub fn message(fleet: &str, from: u64, to: u64) -> String {
    format!("{ROOT}/{fleet}/{from}/msg/{to}")
}

/// `coolgp/<fleet>/*/msg/<to>`: everything addressed to `to`.
pub fn inbox(fleet: &str, to: u64) -> String {
    format!("{ROOT}/{fleet}/*/msg/{to}")
}

/// `coolgp/<fleet>/*/msg/*`: every model message of a fleet (monitoring).
pub fn all_messages(fleet: &str) -> String {
    format!("{ROOT}/{fleet}/*/msg/*")
}

/// `coolgp/<fleet>/<agent>/predict`.
pub fn predict(fleet: &str, agent: u64) -> String {
    format!("{ROOT}/{fleet}/{agent}/predict")
}

/// `coolgp/<fleet>/*/predict`: every agent's prediction queryable (`coolgp query --all`).
pub fn predict_all(fleet: &str) -> String {
    format!("{ROOT}/{fleet}/*/predict")
}

/// The agent id of a predict key, `None` if the key does not have that layout.
pub fn parse_predict(key: &str) -> Option<u64> {
    parse_agent_key(key, "predict")
}

/// `coolgp/<fleet>/<agent>/status`.
pub fn status(fleet: &str, agent: u64) -> String {
    format!("{ROOT}/{fleet}/{agent}/status")
}

/// `coolgp/<fleet>/*/status`: every agent's status queryable (`coolgp status --all`, with
/// `?brief`).
pub fn status_all(fleet: &str) -> String {
    format!("{ROOT}/{fleet}/*/status")
}

/// The agent id of a status key, `None` if the key does not have that layout.
pub fn parse_status(key: &str) -> Option<u64> {
    parse_agent_key(key, "status")
}

/// `coolgp/<fleet>/<agent>/alive`: the agent's liveliness token.
pub fn alive(fleet: &str, agent: u64) -> String {
    format!("{ROOT}/{fleet}/{agent}/alive")
}

/// `coolgp/<fleet>/*/alive`: every member's liveliness token.
pub fn alive_all(fleet: &str) -> String {
    format!("{ROOT}/{fleet}/*/alive")
}

/// `(from, to)` of a message key, `None` if the key does not have the message layout.
pub fn parse_message(key: &str) -> Option<(u64, u64)> {
    let mut it = key.split('/');
    let (root, _fleet, from, msg, to) =
        (it.next()?, it.next()?, it.next()?, it.next()?, it.next()?);
    if root != ROOT || msg != "msg" || it.next().is_some() {
        return None;
    }
    Some((from.parse().ok()?, to.parse().ok()?))
}

/// The agent id of a liveliness key, `None` if the key does not have that layout.
pub fn parse_alive(key: &str) -> Option<u64> {
    parse_agent_key(key, "alive")
}

/// The agent id of `coolgp/<fleet>/<agent>/<last>`, `None` for any other layout.
fn parse_agent_key(key: &str, last: &str) -> Option<u64> {
    let mut it = key.split('/');
    let (root, _fleet, agent, tail) = (it.next()?, it.next()?, it.next()?, it.next()?);
    if root != ROOT || tail != last || it.next().is_some() {
        return None;
    }
    agent.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_round_trips() {
        assert_eq!(message("f", 1, 2), "coolgp/f/1/msg/2");
        assert_eq!(parse_message(&message("f", 1, 2)), Some((1, 2)));
        assert_eq!(parse_message("coolgp/f/x/msg/2"), None);
        assert_eq!(parse_message("coolgp/f/1/msg/2/extra"), None);
        assert_eq!(parse_alive(&alive("f", 7)), Some(7));
        assert_eq!(parse_predict(&predict("f", 7)), Some(7));
        assert_eq!(parse_predict(&alive("f", 7)), None);
        assert_eq!(parse_predict("coolgp/f/7/predict/x"), None);
        assert_eq!(predict_all("f"), "coolgp/f/*/predict");
        assert_eq!(status_all("f"), "coolgp/f/*/status");
        assert_eq!(parse_status(&status("f", 12)), Some(12));
        assert_eq!(parse_status(&predict("f", 12)), None);
        assert!(validate_fleet("lab-1.a_b").is_ok());
        assert!(validate_fleet("a/b").is_err());
        assert!(validate_fleet("a*").is_err());
        assert!(validate_fleet("").is_err());
    }
}
