//! Malformed config files, generated: arbitrary text and the documented examples with values
//! swapped for wrong types, extreme numbers, unicode and deep nesting, lines dropped, repeated
//! or added. Parsing and validation never panic or hang, and whatever is accepted exports to a
//! file that reads back as the same form.
//!
//! The budget is fixed so CI stays fast: `PROPTEST_CASES` (default [`CASES`]) cases per
//! property, each bounded by a per-case timeout.

use std::path::Path;

use proptest::prelude::*;
use proptest::sample::Index;
use switchyard::config::{Config, ConfigForm};

const CASES: u32 = 256;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(CASES);
    ProptestConfig { cases, timeout: 10_000, ..ProptestConfig::default() }
}

/// The environment the examples reference: any variable resolves.
fn env(var: &str) -> Option<String> {
    (!var.is_empty()).then(|| "sk-test-0000000000000000".to_owned())
}

/// Every TOML code block of `docs/configuration.md`.
fn documented_examples() -> Vec<String> {
    let doc = include_str!("../../../docs/configuration.md");
    doc.split("```toml\n")
        .skip(1)
        .map(|block| block.split("```").next().unwrap().to_owned())
        .collect()
}

/// A TOML value a field does not expect.
fn wild_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("9223372036854775807".to_owned()),
        Just("-9223372036854775808".to_owned()),
        Just("-1".to_owned()),
        Just("0".to_owned()),
        Just("1e400".to_owned()),
        Just("inf".to_owned()),
        Just("nan".to_owned()),
        Just("true".to_owned()),
        Just("1979-05-27T07:32:00Z".to_owned()),
        Just("\"\"".to_owned()),
        Just("\"\\u0000\u{202E}🚂\"".to_owned()),
        Just("\"env:\"".to_owned()),
        Just("\"keychain:\"".to_owned()),
        Just("\"http://[::1\"".to_owned()),
        Just("[]".to_owned()),
        Just("{}".to_owned()),
        Just("[1, \"a\", {x = 1}]".to_owned()),
        (1..2000_usize).prop_map(|n| format!("{}1{}", "[".repeat(n), "]".repeat(n))),
        (1..2000_usize).prop_map(|n| format!("{}1{}", "{a=".repeat(n), "}".repeat(n))),
        any::<i64>().prop_map(|n| n.to_string()),
        "[a-z0-9_/:. -]{0,20}".prop_map(|s| format!("{s:?}")),
    ]
}

#[derive(Clone, Debug)]
enum Edit {
    /// The value of the line's `key = value` replaced.
    Value(Index, String),
    Drop(Index),
    Repeat(Index),
    /// An unknown key, or a known one in the wrong place.
    Add(Index, String, String),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (any::<Index>(), wild_value()).prop_map(|(i, v)| Edit::Value(i, v)),
        1 => any::<Index>().prop_map(Edit::Drop),
        1 => any::<Index>().prop_map(Edit::Repeat),
        1 => (any::<Index>(), "[a-z_]{1,12}", wild_value()).prop_map(|(i, k, v)| Edit::Add(i, k, v)),
    ]
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for edit in edits {
        if lines.is_empty() {
            break;
        }
        match edit {
            Edit::Value(i, value) => {
                let at = i.index(lines.len());
                let line = &mut lines[at];
                if let Some((key, _)) = line.split_once(" = ") {
                    *line = format!("{key} = {value}");
                }
            }
            Edit::Drop(i) => {
                lines.remove(i.index(lines.len()));
            }
            Edit::Repeat(i) => {
                let at = i.index(lines.len());
                lines.insert(at, lines[at].clone());
            }
            Edit::Add(i, key, value) => {
                lines.insert(i.index(lines.len()), format!("{key} = {value}"));
            }
        }
    }
    lines.join("\n")
}

/// Parses and validates `text`; when it is accepted, its export must read back as the same form.
fn check(text: &str) -> Result<(), TestCaseError> {
    let Ok(config) = Config::parse(text, Path::new("switchyard.toml"), &env) else { return Ok(()) };
    let exported = config.form.to_toml();
    let again = ConfigForm::from_toml(&exported).map_err(|p| {
        TestCaseError::fail(format!("the export does not parse: {p:?}\n{exported}"))
    })?;
    prop_assert_eq!(&again, &config.form, "{}", exported);
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_text_is_refused_or_accepted_never_a_panic(text in "(?s).{0,400}") {
        check(&text)?;
    }

    #[test]
    fn arbitrary_bytes_read_as_text_are_refused_or_accepted_never_a_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..400)
    ) {
        check(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn edited_documented_examples_are_refused_or_round_trip(
        example in prop::sample::select(documented_examples()),
        edits in prop::collection::vec(edit(), 1..4),
    ) {
        check(&apply(&example, &edits))?;
    }
}
