//! Unknown keys of a configuration file or of Python keywords, refused by name.
//!
//! serde's `deny_unknown_fields` does not work together with `flatten` (which embeds
//! [`crate::AgentArgs`] in the flag structs of simulate and the node), so the structs accept
//! any key and the drivers check the keys given against the known ones with [`check_keys`].

/// Refuses the first of `given` that is not in `known`, with serde's own wording:
/// ``unknown field `agnts`, expected one of `dataset`, `data`, …``.
///
/// # Errors
/// The message above, for the first unknown key.
pub fn check_keys<'a>(
    given: impl IntoIterator<Item = &'a str>,
    known: &[&str],
) -> Result<(), String> {
    match given.into_iter().find(|k| !known.contains(k)) {
        None => Ok(()),
        Some(k) => {
            let list: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
            Err(format!(
                "unknown field `{k}`, expected one of {}",
                list.join(", ")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_key_is_named_with_the_known_ones() {
        assert!(check_keys(["mode", "samples"], &crate::AgentArgs::KEYS).is_ok());
        let e = check_keys(["mode", "modes"], &["mode", "samples"]).expect_err("unknown");
        assert_eq!(
            e,
            "unknown field `modes`, expected one of `mode`, `samples`"
        );
    }
}
