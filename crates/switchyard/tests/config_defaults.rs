//! Issue 32, point 4: every field `docs/configuration.md` does not call required is optional,
//! and where its documented default is one literal value, leaving the field out gives exactly
//! what writing that value gives. The tables are read from the document itself, so a field
//! documented later is checked without anyone touching this file, and a table under a heading
//! this file does not know fails the test until it learns where that table's fields go.

use std::path::Path;

use switchyard::config::{Config, ConfigForm};

const DOC: &str = include_str!("../../../docs/configuration.md");

/// One documented field: the table's heading, the field, its Default cell.
#[derive(Debug)]
struct Documented {
    heading: String,
    field: String,
    default: String,
}

/// Every row of every `| Field | Default | ... |` table, under its `###` heading.
fn documented() -> Vec<Documented> {
    let mut heading = String::new();
    let mut in_table = false;
    let mut rows = Vec::new();
    for line in DOC.lines() {
        if let Some(h) = line.strip_prefix("### ") {
            h.trim().clone_into(&mut heading);
            in_table = false;
        } else if line.starts_with("| Field | Default |") {
            in_table = true;
        } else if in_table && line.starts_with("|---") {
        } else if in_table && line.starts_with('|') {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let (fields, default) = (cells[1], cells[2]);
            for field in fields.split(',') {
                let field = field.trim().trim_matches('`');
                rows.push(Documented {
                    heading: heading.clone(),
                    field: field.to_owned(),
                    default: default.to_owned(),
                });
            }
        } else {
            in_table = false;
        }
    }
    rows
}

/// The smallest config in which the table under `heading` applies, with `field` (a line of
/// TOML, or nothing) where that table's fields go. `None`: the table has no optional field
/// that can stand alone (see the match).
fn context(heading: &str, field: &str) -> Option<String> {
    const PROVIDER: &str = "[[providers]]\nid = \"p\"\nkind = \"openai\"\n";
    Some(match heading {
        "`[server]`" => format!("{PROVIDER}[server]\n{field}\n"),
        "`[[providers]]`" => format!("[[providers]]\nid = \"p\"\nkind = \"openai\"\n{field}\n"),
        "`[[providers.models]]`" => {
            format!("{PROVIDER}[[providers.models]]\nid = \"m\"\n{field}\n")
        }
        "`[[providers.credentials]]`" => {
            format!("{PROVIDER}[[providers.credentials]]\nid = \"c\"\n{field}\n")
        }
        "`[[combos]]`" => format!(
            "{PROVIDER}models = [\"m\"]\n[[combos]]\nname = \"c\"\ntargets = [{{ target = \"p/m\" }}]\n{field}\n"
        ),
        h if h.starts_with("`[settings.") => {
            let section = h.trim_matches('`');
            format!("{PROVIDER}{section}\n{field}\n")
        }
        // Every alias field is required; `[team]` exists only with its `database_url`, whose
        // default is "no team": the configs above, which have none.
        "Aliases and `default_route`" | "`[team]`" => return None,
        other => panic!(
            "docs/configuration.md has a Field/Default table under {other:?}: teach this test where its fields go"
        ),
    })
}

fn load(text: &str) -> Result<Config, String> {
    let env = |var: &str| (var == "SWITCHYARD_DEFAULTS_TEST_KEY").then(|| "sk-test".to_owned());
    Config::parse(text, Path::new("defaults.toml"), &env).map_err(|e| e.to_string())
}

/// What the app runs on, without the form (which remembers what was written).
fn running(mut config: Config) -> String {
    let notifications = format!("{:?}", config.form.settings.notifications);
    config.form = ConfigForm::default();
    format!("{config:?} {notifications}")
}

/// The documented default as a TOML value, when the Default cell is one literal: `4141`,
/// `true`, `[404, 429, 503]`, `{ strategy = "fill_first" }`, or a bare word (`priority`,
/// `api_key`) for an enumeration's string.
fn literal(default: &str) -> Option<String> {
    let inner = default.strip_prefix('`')?.strip_suffix('`')?;
    if inner.contains('`') {
        return None;
    }
    let parses = |value: &str| toml::from_str::<toml::Table>(&format!("x = {value}")).is_ok();
    if parses(inner) {
        Some(inner.to_owned())
    } else if inner.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Some(format!("\"{inner}\""))
    } else {
        None
    }
}

#[test]
fn every_field_the_docs_call_optional_may_be_left_out_and_means_its_documented_default() {
    let rows = documented();
    assert!(rows.len() > 50, "the tables were read: {} rows", rows.len());
    let mut literals = 0;
    for row in &rows {
        if row.default.starts_with("required") || row.field.contains('.') {
            // Required (the context writes it), or a field of a map (`keys.NAME.daily`).
            continue;
        }
        let Some(left_out) = context(&row.heading, "") else { continue };
        let without = load(&left_out).unwrap_or_else(|e| {
            panic!("{} `{}` left out: {e}\n---\n{left_out}", row.heading, row.field)
        });
        let Some(value) = literal(&row.default) else { continue };
        let written = context(&row.heading, &format!("{} = {value}", row.field)).unwrap();
        let with = load(&written).unwrap_or_else(|e| {
            panic!("{} `{} = {value}` (its documented default): {e}", row.heading, row.field)
        });
        assert_eq!(
            running(without),
            running(with),
            "{} `{}`: leaving it out is not the documented default {value}",
            row.heading,
            row.field
        );
        literals += 1;
    }
    assert!(literals > 30, "{literals} literal defaults compared");
}

#[test]
fn round_robin_without_sticky_means_one() {
    let text = |selection: &str| {
        format!("[[providers]]\nid = \"p\"\nkind = \"openai\"\nselection = {selection}\n")
    };
    let without = load(&text("{ strategy = \"round_robin\" }")).expect("sticky is optional");
    let with = load(&text("{ strategy = \"round_robin\", sticky = 1 }")).unwrap();
    assert_eq!(running(without), running(with));
}
