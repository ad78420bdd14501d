//! Who does what: per-model content rules and queues of behaviours, then a default.
//!
//! A [`Script`] is the serde form (test code and `--script` files); [`Scripts`] is the live
//! state the server consumes. The order in which an attempt's behaviour is chosen is fixed:
//!
//! 1. the `x-mock-behavior` request header (handled by the exchange; consumes nothing);
//! 2. the model's content [`Rule`]s, in order: the first whose [`When`] matches the request
//!    answers (a `once` rule is then removed); `script/rule.rs` says what a rule can look at;
//! 3. the model's queue, front first (a repeating queue starts over once consumed, so its
//!    default is never reached);
//! 4. the model's default;
//! 5. the [`ANY_MODEL`] rules, then its queue, then its default;
//! 6. a normal reply.
//!
//! Rules come first because they exist for clients whose side requests arrive in varying
//! number and order: the request's content, not its position, picks the answer, and the queue
//! and default serve whatever no rule claims.
//!
//! Invariant: the lock is held only to match rules and pop or clone one behaviour, never
//! across an `.await`.

mod rule;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::path::Path;

use parking_lot::Mutex;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

pub(crate) use self::rule::Subject;
pub use self::rule::{Rule, When};
use crate::behavior::Behavior;

/// The script key that applies to every model without an answer of its own.
pub const ANY_MODEL: &str = "*";

/// Model name → what that model does. In TOML:
///
/// ```toml
/// "gpt-4o" = [{ status = { code = 429, headers = { retry-after = "1" } } }, { reply = {} }]
/// "claude-sonnet-4" = { queue = ["reset"], default = "reject_prefill" }
/// "flaky" = { queue = [{ status = { code = 503 } }, { reply = {} }], repeat = true }
/// "*" = { default = { reply = { text = "fallback" } } }
/// "agent" = { rules = [{ when = { last_user_contains = "hi" }, then = { reply = { text = "hello" } } }] }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Script {
    pub models: BTreeMap<String, ModelScript>,
}

impl Script {
    pub fn from_toml(text: &str) -> Result<Self, ScriptError> {
        toml::from_str(text).map_err(|e| ScriptError::Toml(Box::new(e)))
    }

    pub fn from_json(text: &str) -> Result<Self, ScriptError> {
        serde_json::from_str(text).map_err(ScriptError::Json)
    }

    /// JSON when the file name ends in `.json`, TOML otherwise.
    pub fn from_file(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ScriptError::Read { path: path.display().to_string(), source })?;
        if path.extension().is_some_and(|ext| ext.eq_ignore_ascii_case("json")) {
            Self::from_json(&text)
        } else {
            Self::from_toml(&text)
        }
    }

    /// Adds behaviours to a model's queue.
    #[must_use]
    pub fn model(
        mut self,
        name: impl Into<String>,
        behaviors: impl IntoIterator<Item = Behavior>,
    ) -> Self {
        self.models.entry(name.into()).or_default().queue.extend(behaviors);
        self
    }

    /// Adds a content rule after the model's other rules.
    #[must_use]
    pub fn rule(mut self, name: impl Into<String>, rule: Rule) -> Self {
        self.models.entry(name.into()).or_default().rules.push(rule);
        self
    }
}

/// One model's script. A bare list in a script file is the queue.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, remote = "Self")]
pub struct ModelScript {
    /// Tried in order before the queue; the first that matches the request answers it.
    pub rules: Vec<Rule>,
    /// Consumed one per attempt.
    pub queue: Vec<Behavior>,
    /// What follows once the queue is empty; a normal reply when unset.
    pub default: Option<Behavior>,
    /// Start the queue over once it is consumed, for ever: a fault pattern for a run of any
    /// length (soak benchmarks) without a queue as long as the run.
    pub repeat: bool,
}

impl<'de> Deserialize<'de> for ModelScript {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// A list or a table, each parsed by the derived code so error messages stay precise.
        struct ListOrTable;

        impl<'de> Visitor<'de> for ListOrTable {
            type Value = ModelScript;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of behaviours or a table with `rules`, `queue` and `default`")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<ModelScript, A::Error> {
                let queue = Vec::deserialize(SeqAccessDeserializer::new(seq))?;
                Ok(ModelScript { queue, ..ModelScript::default() })
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ModelScript, A::Error> {
                ModelScript::deserialize(MapAccessDeserializer::new(map))
            }
        }

        deserializer.deserialize_any(ListOrTable)
    }
}

impl Serialize for ModelScript {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        ModelScript::serialize(self, serializer)
    }
}

/// Why a script could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("cannot read script {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("invalid TOML script: {0}")]
    Toml(Box<toml::de::Error>),
    #[error("invalid JSON script: {0}")]
    Json(serde_json::Error),
}

/// The live scripts.
#[derive(Debug, Default)]
pub(crate) struct Scripts {
    models: Mutex<HashMap<String, Queue>>,
}

#[derive(Debug, Default)]
struct Queue {
    rules: Vec<Rule>,
    pending: VecDeque<Behavior>,
    default: Option<Behavior>,
    repeat: bool,
}

impl Queue {
    fn next(&mut self, request: &Subject<'_>) -> Option<Behavior> {
        if let Some(at) = self.rules.iter().position(|rule| rule.when.matches(request)) {
            let rule = &self.rules[at];
            return Some(if rule.once { self.rules.remove(at).then } else { rule.then.clone() });
        }
        match self.pending.pop_front() {
            Some(behavior) if self.repeat => {
                self.pending.push_back(behavior.clone());
                Some(behavior)
            }
            Some(behavior) => Some(behavior),
            None => self.default.clone(),
        }
    }
}

impl Scripts {
    /// The behaviour for this request to this model (steps 2 to 6 above).
    pub(crate) fn next(&self, model: &str, request: &Subject<'_>) -> Behavior {
        let mut models = self.models.lock();
        models
            .get_mut(model)
            .and_then(|queue| queue.next(request))
            .or_else(|| models.get_mut(ANY_MODEL).and_then(|queue| queue.next(request)))
            .unwrap_or_default()
    }

    pub(crate) fn add_rule(&self, model: &str, rule: Rule) {
        self.models.lock().entry(model.to_owned()).or_default().rules.push(rule);
    }

    pub(crate) fn enqueue(&self, model: &str, behaviors: impl IntoIterator<Item = Behavior>) {
        self.models.lock().entry(model.to_owned()).or_default().pending.extend(behaviors);
    }

    pub(crate) fn set_default(&self, model: &str, behavior: Behavior) {
        self.models.lock().entry(model.to_owned()).or_default().default = Some(behavior);
    }

    /// Appends each model's rules and queue and replaces its default when the script sets one;
    /// a script that makes a queue repeat makes it repeat for good.
    pub(crate) fn load(&self, script: Script) {
        let mut models = self.models.lock();
        for (name, model) in script.models {
            let queue = models.entry(name).or_default();
            queue.rules.extend(model.rules);
            queue.pending.extend(model.queue);
            queue.repeat |= model.repeat;
            if model.default.is_some() {
                queue.default = model.default;
            }
        }
    }

    pub(crate) fn clear(&self) {
        self.models.lock().clear();
    }

    /// Every scripted model name except the wildcard.
    pub(crate) fn names(&self) -> Vec<String> {
        self.models.lock().keys().filter(|name| *name != ANY_MODEL).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::behavior::{ErrorKind, Fault, Reply, Status};
    use crate::dialect::Dialect;
    use serde_json::Value;

    static EMPTY: Value = Value::Null;

    /// A request no content rule of these tests looks at.
    fn nothing() -> Subject<'static> {
        Subject { wire: Dialect::OpenAi.wire(), body: &EMPTY, stream: false }
    }

    fn asking(body: &Value) -> Subject<'_> {
        Subject { wire: Dialect::Anthropic.wire(), body, stream: false }
    }

    #[test]
    fn a_toml_script_reads_lists_tables_and_every_behavior_form() {
        let script = Script::from_toml(
            r#"
            "gpt-4o" = [
                { status = { code = 429, headers = { retry-after = "1" } } },
                { status = { error = "insufficient_quota" } },
                "reset",
                "hang",
                { reply = { text = "hi", chunks = 2, fault = { cut_after = 3 } } },
                { reply = { fault = "truncated" } },
            ]
            "claude" = { queue = ["reject_prefill"], default = { reply = { text = "ok" } } }
            "#,
        )
        .unwrap();
        let gpt = &script.models["gpt-4o"];
        assert_eq!(gpt.queue[0], Status::new(429).header("retry-after", "1").into());
        assert_eq!(gpt.queue[1], Status::error(ErrorKind::InsufficientQuota).into());
        assert_eq!(gpt.queue[2], Behavior::Reset);
        assert_eq!(gpt.queue[3], Behavior::Hang);
        assert_eq!(gpt.queue[4], Reply::text("hi").chunks(2).fault(Fault::CutAfter(3)).into());
        assert_eq!(gpt.queue[5], Behavior::truncated());
        let claude = &script.models["claude"];
        assert_eq!(claude.queue, [Behavior::RejectPrefill]);
        assert_eq!(claude.default, Some(Behavior::reply("ok")));
    }

    #[test]
    fn a_json_script_reads_the_same_types() {
        let script =
            Script::from_json(r#"{"m": [{"status": {"code": 503}}, {"reply": {}}]}"#).unwrap();
        assert_eq!(script.models["m"].queue, [Behavior::status(503), Behavior::default()]);
    }

    #[test]
    fn a_typo_in_a_script_is_an_error_not_a_default() {
        let error = Script::from_toml(r#"m = [{ reply = { txet = "hi" } }]"#).unwrap_err();
        assert!(error.to_string().contains("txet"), "{error}");
    }

    #[test]
    fn a_repeating_queue_starts_over_and_never_reaches_its_default() {
        let scripts = Scripts::default();
        let script = Script::from_toml(
            r#"m = { queue = [{ status = { code = 503 } }, "reset"], default = "hang", repeat = true }"#,
        )
        .unwrap();
        scripts.load(script);
        let seen: Vec<Behavior> = (0..5).map(|_| scripts.next("m", &nothing())).collect();
        let (fail, reset) = (Behavior::status(503), Behavior::Reset);
        assert_eq!(seen, [fail.clone(), reset.clone(), fail.clone(), reset, fail]);
    }

    #[test]
    fn queues_are_consumed_then_the_default_then_the_wildcard_then_a_normal_reply() {
        let scripts = Scripts::default();
        scripts.enqueue("a", [Behavior::status(500), Behavior::Reset]);
        scripts.set_default("a", Behavior::Hang);
        scripts.enqueue(ANY_MODEL, [Behavior::status(429)]);
        assert_eq!(scripts.next("a", &nothing()), Behavior::status(500));
        assert_eq!(scripts.next("a", &nothing()), Behavior::Reset);
        assert_eq!(scripts.next("a", &nothing()), Behavior::Hang);
        assert_eq!(scripts.next("a", &nothing()), Behavior::Hang);
        assert_eq!(scripts.next("b", &nothing()), Behavior::status(429));
        assert_eq!(scripts.next("b", &nothing()), Behavior::default());
    }

    #[test]
    fn a_toml_script_reads_rules_with_their_conditions() {
        let script = Script::from_toml(
            r#"
            "m" = { rules = [
                { when = { tool_result_contains = "ok", has_tools = true }, then = { reply = { text = "done" } } },
                { when = { last_user_contains = "run" }, once = true, then = { reply = { text = "", tool_call = { name = "Bash", arguments = { command = "echo ok" } } } } },
                { then = "hang" },
            ], queue = ["reset"] }
            "#,
        )
        .unwrap();
        let m = &script.models["m"];
        assert_eq!(
            m.rules,
            [
                Rule::new(
                    When::any().tool_result_contains("ok").has_tools(true),
                    Behavior::reply("done")
                ),
                Rule::new(
                    When::any().last_user_contains("run"),
                    Behavior::tool_call("Bash", serde_json::json!({ "command": "echo ok" })),
                )
                .once(),
                Rule::new(When::any(), Behavior::Hang),
            ]
        );
        assert_eq!(m.queue, [Behavior::Reset]);
    }

    #[test]
    fn a_typo_in_a_rule_condition_is_an_error() {
        let error = Script::from_toml(
            r#"m = { rules = [{ when = { last_user_contain = "x" }, then = "reset" }] }"#,
        )
        .unwrap_err();
        assert!(error.to_string().contains("last_user_contain"), "{error}");
    }

    #[test]
    fn the_first_matching_rule_answers_before_the_queue_and_a_once_rule_fires_once() {
        let scripts = Scripts::default();
        scripts.load(
            Script::default()
                .model("m", [Behavior::status(503)])
                .rule(
                    "m",
                    Rule::new(When::any().last_user_contains("tool"), Behavior::reply("call"))
                        .once(),
                )
                .rule(
                    "m",
                    Rule::new(When::any().last_user_contains("to"), Behavior::reply("repeat")),
                ),
        );
        let tool =
            serde_json::json!({ "messages": [{ "role": "user", "content": "use the tool" }] });
        let other = serde_json::json!({ "messages": [{ "role": "user", "content": "a title" }] });
        assert_eq!(scripts.next("m", &asking(&tool)), Behavior::reply("call"));
        assert_eq!(scripts.next("m", &asking(&tool)), Behavior::reply("repeat"));
        assert_eq!(scripts.next("m", &asking(&tool)), Behavior::reply("repeat"));
        assert_eq!(scripts.next("m", &asking(&other)), Behavior::status(503), "no rule: the queue");
        assert_eq!(scripts.next("m", &asking(&other)), Behavior::default());
    }

    #[test]
    fn wildcard_rules_answer_only_what_the_model_leaves_unanswered() {
        let scripts = Scripts::default();
        scripts.load(
            Script::default()
                .rule(ANY_MODEL, Rule::new(When::any(), Behavior::reply("wildcard")))
                .rule("m", Rule::new(When::any().has_tools(true), Behavior::reply("own"))),
        );
        let with_tools = serde_json::json!({ "tools": [{ "name": "t" }] });
        assert_eq!(scripts.next("m", &asking(&with_tools)), Behavior::reply("own"));
        assert_eq!(scripts.next("m", &nothing()), Behavior::reply("wildcard"));
        assert_eq!(scripts.next("other", &nothing()), Behavior::reply("wildcard"));
    }
}
