//! GLOSSARY.md matches the code: every path it names exists, and every name a table row puts
//! in a file (`code` column, `where` column) occurs in that file.
//!
//! The glossary's tables have a `code` and a `where` column. `where` holds one path from the
//! repository root; `code` holds backticked names (`Vocabulary::z()`, `Site { prec, shift }`),
//! each identifier of which must occur in that file as a whole word. Any backticked span that
//! looks like a path (`crates/coolgp/src/model/`) must exist too. A failure lists every entry
//! to fix, by line.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The repository root: this crate is `crates/coolgp-data`.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The backticked spans of `text`, in order.
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The cells of a markdown table row (`| a | b |` → `["a", "b"]`); `\|` does not split.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut out = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                out.last_mut().expect("one cell at least").push('|');
                chars.next();
            }
            '|' => out.push(String::new()),
            _ => out.last_mut().expect("one cell at least").push(c),
        }
    }
    out.iter().map(|c| c.trim().to_string()).collect()
}

/// Whether `span` reads as a repository path: path characters only, with a `/`.
fn is_path(span: &str) -> bool {
    span.contains('/')
        && !span.starts_with('/')
        && span
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-' | '.'))
}

/// The identifiers in a code span (`Learner::Frozen(UnitStats)` → Learner, Frozen, UnitStats).
fn identifiers(span: &str) -> Vec<&str> {
    span.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|t| {
            t.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        })
        .collect()
}

/// Whether `word` occurs in `text` with no identifier character on either side.
fn has_word(text: &str, word: &str) -> bool {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// Every problem of the glossary text, one line each, naming the glossary line to fix.
fn problems(glossary: &str, root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut files: BTreeMap<String, Option<String>> = BTreeMap::new();
    // (code column, where column) of the table being read, if it has both.
    let mut columns: Option<(usize, usize)> = None;
    let mut tables = 0;
    let mut rows = 0;
    for (i, line) in glossary.lines().enumerate() {
        let at = format!("GLOSSARY.md:{}", i + 1);
        for span in backticked(line) {
            if is_path(span) && !root.join(span).exists() {
                out.push(format!("{at}: the path `{span}` does not exist"));
            }
        }
        if !line.trim_start().starts_with('|') {
            columns = None;
            continue;
        }
        let row = cells(line);
        if row
            .iter()
            .all(|c| c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
        {
            continue; // the separator row
        }
        let Some((code_col, where_col)) = columns else {
            let find = |name: &str| row.iter().position(|c| c.eq_ignore_ascii_case(name));
            columns = find("code").zip(find("where"));
            tables += usize::from(columns.is_some());
            continue; // a header row
        };
        rows += 1;
        let code = row.get(code_col).map(String::as_str).unwrap_or("");
        let place = row.get(where_col).map(String::as_str).unwrap_or("");
        let names: Vec<&str> = backticked(code).into_iter().flat_map(identifiers).collect();
        let paths = backticked(place);
        if names.is_empty() {
            continue;
        }
        let [path] = paths[..] else {
            out.push(format!(
                "{at}: the `where` column must hold exactly one backticked path, found {:?}",
                paths
            ));
            continue;
        };
        let text = files
            .entry(path.to_string())
            .or_insert_with(|| fs::read_to_string(root.join(path)).ok());
        let Some(text) = text else {
            out.push(format!(
                "{at}: cannot read `{path}` (moved? fix the row's `where`)"
            ));
            continue;
        };
        for name in names {
            if !has_word(text, name) {
                out.push(format!(
                    "{at}: `{name}` does not occur in `{path}` (fix the row's `where` or its \
                     `code`: {code})"
                ));
            }
        }
    }
    if tables == 0 || rows == 0 {
        out.push("GLOSSARY.md: no table with `code` and `where` columns".to_string());
    }
    out
}

#[test]
fn every_glossary_entry_names_a_file_that_holds_it() {
    let root = repo_root();
    let glossary = fs::read_to_string(root.join("GLOSSARY.md")).expect("GLOSSARY.md at the root");
    let found = problems(&glossary, &root);
    assert!(
        found.is_empty(),
        "GLOSSARY.md is out of date with the code:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_checker_catches_a_wrong_place_and_a_missing_path() {
    let root = repo_root();
    let text = "\
| paper | code | where |
|---|---|---|
| data | `handle_block` | `crates/coolgp/src/protocol/agent.rs` |
| wrong | `handle_block` | `crates/coolgp/src/model/kernel.rs` |
| gone | `x` | `crates/nowhere.rs` |
";
    let found = problems(text, &root);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(
        found[0].starts_with("GLOSSARY.md:4: `handle_block` does not occur"),
        "{}",
        found[0]
    );
    assert!(
        found[1].starts_with("GLOSSARY.md:5: the path `crates/nowhere.rs`"),
        "{}",
        found[1]
    );
    assert!(
        found[2].starts_with("GLOSSARY.md:5: cannot read"),
        "{}",
        found[2]
    );
}

#[test]
fn names_match_whole_words_only() {
    assert!(has_word("pub fn site_step(", "site_step"));
    assert!(!has_word("pub fn site_steps(", "site_step"));
    assert_eq!(
        identifiers("Learner::Frozen(UnitStats)"),
        ["Learner", "Frozen", "UnitStats"]
    );
    assert_eq!(
        identifiers("Site { prec, shift }"),
        ["Site", "prec", "shift"]
    );
    assert!(is_path("crates/coolgp/src/model/"));
    assert!(!is_path("Vocabulary::z()"));
}
