//! Mid-stream continuation (RESILIENCE.md §10): whether a stream that broke after content
//! reached the client may be finished by another target, and how the seam between the text
//! already relayed and the continuation is joined.
//!
//! Invariants:
//! - Never masking is worth more than rescuing: every doubt is a refusal, and a refusal ends the
//!   stream with the terminal error event as before. A continuation is only ever sent to a
//!   target whose documented mechanism continues a partial answer (never one that would restart
//!   it), only from a clean text boundary, and never for an answer whose shape a restart of the
//!   generation could break (JSON output, a forced tool call).
//! - The client's text is exactly the relayed text followed by the continuation: when the
//!   prefill has to lose trailing whitespace (Anthropic refuses a prefill ending in whitespace),
//!   the same whitespace is taken off the continuation's start, not sent twice.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How a model continues a partial assistant answer, as its vendor documents it; `Off` for a
/// model that has no such mechanism (OpenAI Chat) or that must not be trusted with one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Continuation {
    #[default]
    Off,
    /// Anthropic Messages: a last `assistant` message is a prefill the answer continues (not
    /// with extended thinking on).
    Anthropic,
    /// DeepSeek and Mistral (Chat dialect): `prefix: true` on the last assistant message.
    Prefix,
    /// Moonshot (Chat dialect): `partial: true` on the last assistant message.
    Partial,
    /// vLLM (Chat dialect): `continue_final_message: true, add_generation_prompt: false`.
    Vllm,
}

impl Continuation {
    pub const ALLOWED: &'static str = "false, \"anthropic\", \"prefix\", \"partial\" or \"vllm\"";

    /// The word written in a config (`false` for `Off`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "false",
            Self::Anthropic => "anthropic",
            Self::Prefix => "prefix",
            Self::Partial => "partial",
            Self::Vllm => "vllm",
        }
    }

    pub fn parse(word: &str) -> Option<Self> {
        Some(match word {
            "anthropic" => Self::Anthropic,
            "prefix" => Self::Prefix,
            "partial" => Self::Partial,
            "vllm" => Self::Vllm,
            _ => return None,
        })
    }

    pub fn is_on(self) -> bool {
        self != Self::Off
    }

    /// The prefill a mechanism accepts for `text`, and the whitespace held back from it.
    /// Anthropic answers a prefill that ends in whitespace with a 400, so it is trimmed there;
    /// the others take the text as it is.
    fn split(self, text: &str) -> (&str, &str) {
        match self {
            Self::Anthropic => {
                let kept = text.trim_end();
                (kept, &text[kept.len()..])
            }
            _ => (text, ""),
        }
    }
}

impl fmt::Display for Continuation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Continuation {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Off => serializer.serialize_bool(false),
            other => serializer.serialize_str(other.as_str()),
        }
    }
}

/// `false` or a mechanism's name; `true` is refused because it does not say how.
impl<'de> Deserialize<'de> for Continuation {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Continuation;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", Continuation::ALLOWED)
            }

            fn visit_bool<E: serde::de::Error>(self, on: bool) -> Result<Continuation, E> {
                if on {
                    return Err(E::custom(format!(
                        "`true` does not say how the model continues an answer: write {}",
                        Continuation::ALLOWED
                    )));
                }
                Ok(Continuation::Off)
            }

            fn visit_str<E: serde::de::Error>(self, word: &str) -> Result<Continuation, E> {
                Continuation::parse(word).ok_or_else(|| {
                    E::custom(format!(
                        "unknown continuation mechanism \"{word}\": write {} (OpenAI Chat has none: `false`)",
                        Continuation::ALLOWED
                    ))
                })
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// What kind of content block the client has seen.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Block {
    Text(String),
    /// `signed`: the block carries (or will carry) a signature a prefill cannot reproduce.
    Thinking {
        signed: bool,
    },
    ToolCall,
}

/// How much relayed text is kept for a continuation at most: 1 MiB, four times the longest
/// answer any model's output limit allows today (128k tokens). Past it the text is let go and
/// the stream is no longer offered a continuation (the trace says `relayed_over_cap`), so a
/// runaway answer cannot make the relay hold it all.
pub const MAX_RELAYED_BYTES: usize = 1024 * 1024;

/// The answer relayed to the client so far, per content block: what a continuation needs to
/// know, kept by the relay as events pass; at most [`MAX_RELAYED_BYTES`] of text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Relayed {
    blocks: Vec<Block>,
    /// Bytes of text in `blocks`.
    bytes: usize,
    /// Characters of text relayed, kept or not.
    chars: usize,
    /// More text was relayed than is kept: `blocks` was let go.
    over_cap: bool,
}

impl Relayed {
    pub fn text(&mut self, delta: &str) {
        if delta.is_empty() {
            return;
        }
        self.chars += delta.chars().count();
        if self.over_cap {
            return;
        }
        self.bytes += delta.len();
        if self.bytes > MAX_RELAYED_BYTES {
            self.over_cap = true;
            self.blocks = Vec::new();
            self.bytes = 0;
            return;
        }
        match self.blocks.last_mut() {
            Some(Block::Text(text)) => text.push_str(delta),
            _ => self.blocks.push(Block::Text(delta.to_owned())),
        }
    }

    pub fn thinking(&mut self) {
        if self.over_cap {
            return;
        }
        if !matches!(self.blocks.last(), Some(Block::Thinking { .. })) {
            self.blocks.push(Block::Thinking { signed: false });
        }
    }

    /// A thinking block's signature arrived: the block cannot be sent back without it.
    pub fn signed(&mut self) {
        if self.over_cap {
            return;
        }
        match self.blocks.last_mut() {
            Some(Block::Thinking { signed }) => *signed = true,
            _ => self.blocks.push(Block::Thinking { signed: true }),
        }
    }

    pub fn tool_call(&mut self) {
        if self.over_cap {
            return;
        }
        self.blocks.push(Block::ToolCall);
    }

    /// All the answer's text, in order: what a continuation's prefill starts from.
    pub fn all_text(&self) -> String {
        self.blocks
            .iter()
            .filter_map(|b| match b {
                Block::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Characters of text relayed, as the routing trace reports them.
    pub fn chars(&self) -> usize {
        self.chars
    }
}

/// What in the client's request rules continuation out whatever was relayed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestShape {
    /// The answer must be JSON (of a schema or not): a continuation could not be checked
    /// against it, and a restart would be invalid JSON glued to valid JSON.
    pub json_output: bool,
    /// `tool_choice` forces a tool call: the answer is a call, not text.
    pub forced_tool: bool,
    /// Extended thinking is on: Anthropic refuses a prefill then, and a continuation would
    /// drop the thinking the answer rests on.
    pub extended_thinking: bool,
}

/// Why a broken stream is not continued; each is a refusal counted and named in the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The next target has no continuation mechanism.
    NoMechanism,
    /// The next target answered a continuation with a 400 before: it is known incapable.
    Incapable,
    JsonOutput,
    ForcedTool,
    ExtendedThinking,
    /// A tool call was started: its arguments cannot be prefilled.
    ToolCall,
    /// A thinking block is open, or one carries a signature a prefill cannot reproduce.
    Thinking,
    /// No text reached the client yet (nothing to continue from).
    NoText,
    /// More than [`MAX_RELAYED_BYTES`] of text was relayed: it was not kept.
    OverCap,
}

impl Refusal {
    pub fn code(self) -> &'static str {
        match self {
            Self::NoMechanism => "no_continuation_mechanism",
            Self::Incapable => "continuation_refused_before",
            Self::JsonOutput => "json_output",
            Self::ForcedTool => "forced_tool_choice",
            Self::ExtendedThinking => "extended_thinking",
            Self::ToolCall => "inside_tool_call",
            Self::Thinking => "thinking_block",
            Self::NoText => "no_text_relayed",
            Self::OverCap => "relayed_over_cap",
        }
    }
}

/// A continuation that may be sent: the assistant text to send as the answer so far, and how
/// to join what comes back to what the client has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub mechanism: Continuation,
    /// The assistant text the target continues (trimmed where the mechanism requires).
    pub prefill: String,
    pub seam: Seam,
}

/// Decides whether the break after `relayed` may be continued on a target continuing by
/// `mechanism` (`incapable`: it refused a continuation before).
pub fn decide(
    relayed: &Relayed,
    request: RequestShape,
    mechanism: Continuation,
    incapable: bool,
) -> Result<Plan, Refusal> {
    if !mechanism.is_on() {
        return Err(Refusal::NoMechanism);
    }
    if incapable {
        return Err(Refusal::Incapable);
    }
    if relayed.over_cap {
        return Err(Refusal::OverCap);
    }
    if request.json_output {
        return Err(Refusal::JsonOutput);
    }
    if request.forced_tool {
        return Err(Refusal::ForcedTool);
    }
    if request.extended_thinking && mechanism == Continuation::Anthropic {
        return Err(Refusal::ExtendedThinking);
    }
    if relayed.blocks.contains(&Block::ToolCall) {
        return Err(Refusal::ToolCall);
    }
    let signed = relayed.blocks.iter().any(|b| matches!(b, Block::Thinking { signed: true }));
    if signed || matches!(relayed.blocks.last(), Some(Block::Thinking { .. })) {
        return Err(Refusal::Thinking);
    }
    let text = relayed.all_text();
    let (prefill, held) = mechanism.split(&text);
    if prefill.is_empty() {
        return Err(Refusal::NoText);
    }
    Ok(Plan { mechanism, prefill: prefill.to_owned(), seam: Seam { held: held.to_owned() } })
}

/// Joins a continuation to the client's text: the whitespace trimmed off the prefill was
/// already relayed, so the same whitespace is taken off the continuation's start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seam {
    /// Whitespace the client has that the target was not shown.
    held: String,
}

impl Seam {
    /// The part of a continuation's text delta the client must see. Whitespace the client
    /// already has is skipped as far as the continuation repeats it; the first other character
    /// closes the seam.
    pub fn admit<'d>(&mut self, delta: &'d str) -> &'d str {
        if self.held.is_empty() {
            return delta;
        }
        let common = self
            .held
            .char_indices()
            .zip(delta.chars())
            .take_while(|((_, held), next)| held == next)
            .map(|((_, c), _)| c.len_utf8())
            .sum::<usize>();
        if common == delta.len() && common < self.held.len() {
            // The delta was all seam: wait for more.
            self.held.drain(..common);
            return "";
        }
        self.held.clear();
        &delta[common..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(parts: &[&str]) -> Relayed {
        let mut relayed = Relayed::default();
        for part in parts {
            relayed.text(part);
        }
        relayed
    }

    #[test]
    fn past_the_cap_the_text_is_let_go_and_no_continuation_is_offered() {
        let mut relayed = text(&["é".repeat(MAX_RELAYED_BYTES / 2).as_str()]);
        assert!(decide(&relayed, PLAIN, Continuation::Prefix, false).is_ok(), "exactly at the cap");
        relayed.text("x");
        assert_eq!(decide(&relayed, PLAIN, Continuation::Prefix, false), Err(Refusal::OverCap));
        assert_eq!(relayed.all_text(), "", "the text is let go");
        assert_eq!(relayed.chars(), MAX_RELAYED_BYTES / 2 + 1, "and still counted");
        for _ in 0..100 {
            relayed.text(&"y".repeat(1024 * 1024));
            relayed.tool_call();
        }
        assert!(relayed.blocks.is_empty() && relayed.bytes <= MAX_RELAYED_BYTES);
        assert_eq!(Refusal::OverCap.code(), "relayed_over_cap");
    }

    const PLAIN: RequestShape =
        RequestShape { json_output: false, forced_tool: false, extended_thinking: false };

    #[test]
    fn a_text_answer_is_continued_by_any_mechanism_and_never_without_one() {
        let relayed = text(&["The quick ", "brown fox"]);
        for mechanism in [
            Continuation::Anthropic,
            Continuation::Prefix,
            Continuation::Partial,
            Continuation::Vllm,
        ] {
            let plan = decide(&relayed, PLAIN, mechanism, false).unwrap();
            assert_eq!(plan.prefill, "The quick brown fox", "{mechanism}");
        }
        assert_eq!(decide(&relayed, PLAIN, Continuation::Off, false), Err(Refusal::NoMechanism));
        assert_eq!(
            decide(&relayed, PLAIN, Continuation::Prefix, true),
            Err(Refusal::Incapable),
            "a target that refused a continuation is not asked again"
        );
    }

    #[test]
    fn the_request_rules_out_json_forced_tools_and_anthropic_thinking() {
        let relayed = text(&["{\"a\": "]);
        let json = RequestShape { json_output: true, ..PLAIN };
        let forced = RequestShape { forced_tool: true, ..PLAIN };
        let thinking = RequestShape { extended_thinking: true, ..PLAIN };
        assert_eq!(decide(&relayed, json, Continuation::Prefix, false), Err(Refusal::JsonOutput));
        assert_eq!(decide(&relayed, forced, Continuation::Prefix, false), Err(Refusal::ForcedTool));
        assert_eq!(
            decide(&relayed, thinking, Continuation::Anthropic, false),
            Err(Refusal::ExtendedThinking)
        );
        assert!(
            decide(&relayed, thinking, Continuation::Vllm, false).is_ok(),
            "only Anthropic refuses a prefill with thinking on"
        );
    }

    #[test]
    fn tool_calls_and_thinking_blocks_are_not_clean_boundaries() {
        let mut in_tool = text(&["Let me look."]);
        in_tool.tool_call();
        assert_eq!(decide(&in_tool, PLAIN, Continuation::Prefix, false), Err(Refusal::ToolCall));
        let mut in_thinking = Relayed::default();
        in_thinking.thinking();
        assert_eq!(
            decide(&in_thinking, PLAIN, Continuation::Prefix, false),
            Err(Refusal::Thinking)
        );
        let mut signed = Relayed::default();
        signed.thinking();
        signed.signed();
        signed.text("Answer");
        assert_eq!(
            decide(&signed, PLAIN, Continuation::Anthropic, false),
            Err(Refusal::Thinking),
            "a signed thinking block cannot be sent back without its signature"
        );
        let mut unsigned = Relayed::default();
        unsigned.thinking();
        unsigned.text("Answer");
        assert_eq!(
            decide(&unsigned, PLAIN, Continuation::Prefix, false).unwrap().prefill,
            "Answer"
        );
        assert_eq!(
            decide(&Relayed::default(), PLAIN, Continuation::Prefix, false),
            Err(Refusal::NoText)
        );
    }

    #[test]
    fn anthropic_gets_no_trailing_whitespace_and_the_seam_is_not_doubled() {
        let relayed = text(&["Hello world,", " \n"]);
        let plan = decide(&relayed, PLAIN, Continuation::Anthropic, false).unwrap();
        assert_eq!(plan.prefill, "Hello world,");
        let mut seam = plan.seam;
        // The continuation repeats the whitespace the client already has, split across deltas.
        assert_eq!(seam.admit(" "), "");
        assert_eq!(seam.admit("\nagain"), "again");
        assert_eq!(seam.admit(" and "), " and ", "the seam is closed: text passes unchanged");
        let only_space = text(&["   "]);
        assert_eq!(
            decide(&only_space, PLAIN, Continuation::Anthropic, false),
            Err(Refusal::NoText)
        );
        let other = decide(&relayed, PLAIN, Continuation::Prefix, false).unwrap();
        assert_eq!(other.prefill, "Hello world, \n", "other mechanisms take the text as it is");
    }

    #[test]
    fn a_continuation_that_does_not_repeat_the_whitespace_passes_whole() {
        let plan = decide(&text(&["Hi "]), PLAIN, Continuation::Anthropic, false).unwrap();
        let mut seam = plan.seam;
        assert_eq!(seam.admit("there"), "there");
        assert_eq!(seam.admit(" "), " ");
    }

    #[test]
    fn the_fact_reads_false_or_a_mechanism_and_refuses_true_with_the_choices() {
        #[derive(Deserialize, Serialize)]
        struct Fact {
            continuation: Continuation,
        }
        let read = |v: serde_json::Value| serde_json::from_value::<Fact>(v).map(|f| f.continuation);
        assert_eq!(read(serde_json::json!({"continuation": false})).unwrap(), Continuation::Off);
        assert_eq!(read(serde_json::json!({"continuation": "vllm"})).unwrap(), Continuation::Vllm);
        let wrong = read(serde_json::json!({"continuation": "openai"})).unwrap_err().to_string();
        assert!(wrong.contains("\"openai\"") && wrong.contains("\"prefix\""), "{wrong}");
        let vague = read(serde_json::json!({"continuation": true})).unwrap_err().to_string();
        assert!(vague.contains("does not say how"), "{vague}");
        let written = serde_json::to_value(Fact { continuation: Continuation::Off }).unwrap();
        assert_eq!(written, serde_json::json!({"continuation": false}));
    }
}
