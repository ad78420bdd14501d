//! The config kept in the state file (the desktop app, `serve` without `--config`), read so
//! that a newer version's config is never lost.
//!
//! Invariants:
//! - A config of this build's form version or an older one reads strictly, like a `--config`
//!   file: an unknown field is an error there, never a silent default.
//! - A config of a newer form version (or one that does not read strictly) is read tolerantly:
//!   what this build does not understand (an unknown field, a provider of an unknown kind, a
//!   combo target on a provider so set aside) is set aside, the rest runs. Such a config is
//!   read-only: nothing this build does saves over it, so the newer build finds it as it left
//!   it.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;
use switchyard_store::{Store, StoreError, StoredSection};
use ts_rs::TS;

use super::{Config, ConfigForm, Problem};

/// The settings section of the state file that holds the config when no file does, and the
/// version of its form. Raise the version with every change an older build would misread
/// (a new field, a new kind): the older build then runs the config read-only.
pub const STORED_CONFIG: (&str, u32) = ("config", 1);

/// How many things a tolerant read sets aside at most before giving up: one per field or
/// list item, so a config has far fewer.
const MAX_SET_ASIDE: usize = 1_000;

/// The stored config as this build runs it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StoredConfig {
    pub form: ConfigForm,
    /// Set when the config is more than this build understands: it must not be saved over.
    pub read_only: Option<ReadOnly>,
}

/// Why the stored config is read-only here, and what of it this build left out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export, rename = "ReadOnlyConfig")]
pub struct ReadOnly {
    /// The Switchyard that saved it, when it said.
    pub written_by: Option<String>,
    /// The form version it was saved with.
    pub version: u32,
    /// What this build set aside, each as a field path (`providers[id=quantum]`,
    /// `providers[id=openai].region`) and why.
    pub set_aside: Vec<String>,
    /// What the user reads.
    pub message: String,
}

impl ReadOnly {
    fn new(section: &StoredSection, set_aside: Vec<String>) -> Self {
        let by = match &section.written_by {
            Some(version) => format!("Switchyard {version}"),
            None => "another version of Switchyard".to_owned(),
        };
        let ours = switchyard_store::VERSION;
        let message = if section.version > STORED_CONFIG.1 {
            let update = match &section.written_by {
                Some(version) => format!("update to {version} or newer"),
                None => "update Switchyard".to_owned(),
            };
            format!(
                "the config was written by {by}, newer than this one ({ours}): it runs what \
                 this version understands and is read-only here; {update} to edit it"
            )
        } else {
            format!(
                "the config saved by {by} does not read as this version ({ours}) expects: it \
                 runs what this version understands and is read-only; `switchyard config \
                 export` shows it, and `switchyard config import --over-newer FILE` replaces it"
            )
        };
        Self {
            written_by: section.written_by.clone(),
            version: section.version,
            set_aside,
            message,
        }
    }

    /// A stored config that could not be read at all (the file is locked or damaged): this
    /// run starts without it, and must not save over it.
    pub fn unreadable(error: &StoreError) -> Self {
        Self {
            written_by: None,
            version: 0,
            set_aside: vec![format!("(everything): {error}")],
            message: format!(
                "the stored config cannot be read ({error}): this run starts without it and \
                 saves nothing over it; restart once the state file is readable"
            ),
        }
    }

    /// Adds what validation set aside to the list.
    fn also_set_aside(&mut self, more: impl IntoIterator<Item = String>) {
        self.set_aside.extend(more);
    }
}

/// Reads the stored config; `None` when none was ever saved.
pub async fn read(store: &Store) -> Result<Option<StoredConfig>, StoreError> {
    Ok(store.settings(STORED_CONFIG.0).await?.map(|section| from_section(&section)))
}

/// Saves `form` as the stored config, as this build's form version. Callers check first that
/// the stored one is not read-only here.
pub async fn save(
    store: &Store,
    form: &ConfigForm,
    now: switchyard_core::UnixMillis,
) -> Result<(), StoreError> {
    let (section, version) = STORED_CONFIG;
    store.save_settings(section, version, form, now).await
}

/// The config a section holds, read strictly or, for a newer one, tolerantly.
pub fn from_section(section: &StoredSection) -> StoredConfig {
    if section.version <= STORED_CONFIG.1
        && let Ok(form) = serde_json::from_value::<ConfigForm>(section.body.clone())
    {
        return StoredConfig { form, read_only: None };
    }
    let (form, set_aside) = tolerant(section.body.clone());
    StoredConfig { form, read_only: Some(ReadOnly::new(section, set_aside)) }
}

/// Parses `body`, setting aside what does not parse until the rest does.
fn tolerant(mut body: Value) -> (ConfigForm, Vec<String>) {
    let mut set_aside = Vec::new();
    while set_aside.len() < MAX_SET_ASIDE {
        let error = match serde_path_to_error::deserialize::<_, ConfigForm>(&body) {
            Ok(form) => return (form, set_aside),
            Err(error) => error,
        };
        let path = Path::parse(&error.path().to_string());
        let message = error.inner().to_string();
        // An unknown field goes alone; anything else takes the list item it is in (a provider
        // of an unknown kind), or the field when it is in none.
        let unknown_field = message.starts_with("unknown field");
        let Some(removed) = path.remove_from(&mut body, unknown_field) else {
            break;
        };
        set_aside.push(format!("{removed}: {message}"));
    }
    // What still does not parse is more than a field here and there: nothing of it runs.
    set_aside.push("(everything): the config does not read even in part".to_owned());
    (ConfigForm::default(), set_aside)
}

/// Validates a read-only config, setting aside each item validation refuses (a combo target
/// on a provider set aside, a credential whose secret is missing) until the rest validates.
pub async fn validate_read_only(
    stored: &mut StoredConfig,
    validate: impl AsyncFn(ConfigForm) -> Result<Config, Problem>,
) -> Result<Config, Problem> {
    let Some(read_only) = &mut stored.read_only else {
        return validate(stored.form.clone()).await;
    };
    let mut body = serde_json::to_value(&stored.form).expect("config forms serialize");
    let mut more = Vec::new();
    loop {
        let form: ConfigForm =
            serde_json::from_value(body.clone()).expect("a serialized form reads back");
        let problem = match validate(form.clone()).await {
            Ok(config) => {
                read_only.also_set_aside(more);
                stored.form = form;
                return Ok(config);
            }
            Err(problem) => problem,
        };
        let removed = Path::parse(&problem.field).remove_from(&mut body, false);
        match removed {
            Some(removed) if more.len() < MAX_SET_ASIDE => {
                more.push(format!("{removed}: {}", problem.problem));
            }
            _ => return Err(problem),
        }
    }
}

/// A field path as errors name it: `providers[1].credentials[0].secret`.
#[derive(Debug, PartialEq, Eq)]
struct Path(Vec<Step>);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

impl Path {
    fn parse(text: &str) -> Self {
        let mut steps = Vec::new();
        for part in text.split('.').filter(|p| !p.is_empty()) {
            let (key, mut rest) = part.split_once('[').map_or((part, ""), |(k, r)| (k, r));
            if !key.is_empty() {
                steps.push(Step::Key(key.to_owned()));
            }
            while let Some((index, after)) = rest.split_once(']') {
                if let Ok(i) = index.parse() {
                    steps.push(Step::Index(i));
                }
                rest = after.strip_prefix('[').unwrap_or(after);
            }
        }
        Self(steps)
    }

    /// Removes from `body` the list item the path is in (the innermost one), or the path's
    /// own field with `field_only` or when it is in no list. Returns what was removed, named
    /// so that it stays true while other items go: a list item by its `id`, `name` or
    /// `target` when it has one (`providers[id=quantum]`). `None` when the path names nothing
    /// in `body`.
    fn remove_from(&self, body: &mut Value, field_only: bool) -> Option<String> {
        let cut = if field_only {
            self.0.len()
        } else {
            self.0.iter().rposition(|s| matches!(s, Step::Index(_))).map_or(self.0.len(), |i| i + 1)
        };
        let steps = &self.0[..cut];
        let name = name(body, steps)?;
        let (last, parent) = steps.split_last()?;
        let mut node = &mut *body;
        for step in parent {
            node = match step {
                Step::Key(k) => node.get_mut(k)?,
                Step::Index(i) => node.get_mut(*i)?,
            };
        }
        match (last, node) {
            (Step::Key(k), Value::Object(map)) => {
                map.remove(k)?;
            }
            (Step::Index(i), Value::Array(items)) if *i < items.len() => {
                items.remove(*i);
            }
            _ => return None,
        }
        Some(name)
    }
}

/// `steps` written out, each list item by what identifies it in `body`.
fn name(body: &Value, steps: &[Step]) -> Option<String> {
    let mut out = String::new();
    let mut node = body;
    for step in steps {
        match step {
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
                node = node.get(k)?;
            }
            Step::Index(i) => {
                node = node.get(*i)?;
                let identity = ["id", "name", "target"]
                    .iter()
                    .find_map(|key| Some((key, node.get(key)?.as_str()?)));
                let _ = match identity {
                    Some((key, value)) => write!(out, "[{key}={value}]"),
                    None => write!(out, "[{i}]"),
                };
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn section(version: u32, body: Value) -> StoredSection {
        StoredSection { version, written_by: Some("0.9.0".to_owned()), body }
    }

    fn future_config() -> Value {
        json!({
            "server": { "port": 4141, "listen_on_lan": true },
            "providers": [
                { "id": "quantum", "kind": "quantum_llm", "base_url": "https://q.example" },
                { "id": "openai", "kind": "openai", "region": "eu",
                  "credentials": [{ "id": "main", "secret": "env:OPENAI_API_KEY" }] },
            ],
            "combos": [{ "name": "fast", "targets": [
                { "target": "quantum/q-1" }, { "target": "openai/gpt-4o-mini" }
            ] }],
            "plugins": { "enabled": ["x"] },
        })
    }

    #[test]
    fn a_config_of_this_version_reads_strictly() {
        let stored = from_section(&section(1, json!({ "providers": [] })));
        assert_eq!(stored, StoredConfig::default());
        // Not newer, but not readable as it is: read-only too, never wiped.
        let stored = from_section(&section(1, json!({ "providerz": [] })));
        let read_only = stored.read_only.unwrap();
        assert_eq!(read_only.set_aside.len(), 1, "{:?}", read_only.set_aside);
        assert!(read_only.set_aside[0].starts_with("providerz: unknown field"));
        assert!(read_only.message.contains("config import --over-newer"), "{}", read_only.message);
    }

    #[test]
    fn a_newer_config_keeps_what_this_version_knows_and_sets_the_rest_aside() {
        let stored = from_section(&section(2, future_config()));
        let read_only = stored.read_only.expect("a newer config is read-only");
        let aside: Vec<&str> =
            read_only.set_aside.iter().map(|s| s.split(':').next().unwrap()).collect();
        assert_eq!(
            aside,
            [
                "plugins",
                "providers[id=quantum]",
                "providers[id=openai].region",
                "server.listen_on_lan"
            ]
        );
        assert!(read_only.set_aside[1].contains("unknown variant `quantum_llm`"));
        assert_eq!(stored.form.server.port, Some(4141));
        let ids: Vec<&str> = stored.form.providers.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["openai"]);
        assert_eq!(stored.form.providers[0].credentials.len(), 1);
        assert_eq!(stored.form.combos[0].targets.len(), 2, "validation drops the dangling one");
        assert_eq!(
            read_only.message,
            "the config was written by Switchyard 0.9.0, newer than this one (0.1.0): it runs \
             what this version understands and is read-only here; update to 0.9.0 or newer to \
             edit it"
        );
    }

    #[tokio::test]
    async fn validation_sets_aside_what_refers_to_what_was_set_aside() {
        let mut stored = from_section(&section(2, future_config()));
        let env = |var: &str| (var == "OPENAI_API_KEY").then(|| "sk-test".to_owned());
        let sources = super::super::Sources { env: &env, secrets: None, defer_keychain: false };
        let config =
            validate_read_only(&mut stored, async |form: ConfigForm| form.validate(&sources))
                .await
                .unwrap();
        assert_eq!(config.combos[0].targets.len(), 1);
        let read_only = stored.read_only.unwrap();
        assert!(
            read_only
                .set_aside
                .last()
                .unwrap()
                .starts_with("combos[name=fast].targets[target=quantum/q-1]: "),
            "{:?}",
            read_only.set_aside
        );
        assert_eq!(stored.form.combos[0].targets[0].target, "openai/gpt-4o-mini");
    }

    #[tokio::test]
    async fn a_config_of_this_version_is_validated_whole() {
        let mut stored = StoredConfig::default();
        stored.form.default_route = Some("nowhere".to_owned());
        let sources =
            super::super::Sources { env: &|_| None, secrets: None, defer_keychain: false };
        let problem =
            validate_read_only(&mut stored, async |form: ConfigForm| form.validate(&sources))
                .await
                .unwrap_err();
        assert_eq!(problem.field, "default_route");
        assert_eq!(stored.form.default_route.as_deref(), Some("nowhere"), "nothing set aside");
    }

    #[test]
    fn paths_parse_and_print_as_errors_name_them() {
        let path = Path::parse("providers[1].credentials[0].secret");
        let steps = [
            Step::Key("providers".into()),
            Step::Index(1),
            Step::Key("credentials".into()),
            Step::Index(0),
            Step::Key("secret".into()),
        ];
        assert_eq!(path, Path(steps.to_vec()));
        let mut body = json!({ "providers": [{}, { "credentials": [{ "secret": "x" }, {}] }] });
        assert_eq!(
            path.remove_from(&mut body, false).as_deref(),
            Some("providers[1].credentials[0]"),
            "items without an id are named by their index"
        );
        assert_eq!(body, json!({ "providers": [{}, { "credentials": [{}] }] }));
        assert_eq!(Path::parse("(config)").remove_from(&mut body, false), None);
    }
}
