//! OpenAI non-streamed responses: decoded from upstreams, encoded for clients.

use std::borrow::Cow;

use serde::{Deserialize, Serialize, de};

use super::request::ToolCallOut;
use super::{finish_reason, stop_reason};
use crate::chat::{ChatResponse, Ending, Part, StopReason, Text, Thinking, ToolUse, Usage};
use crate::dialect::{Dialect, ResponseMeta};
use crate::error::ProviderError;
use crate::json::{self, Str, TextOr};
use crate::skim::{Seen, Skim};

#[derive(Deserialize)]
struct ResponseWire<'a> {
    #[serde(borrow, default)]
    id: Option<Str<'a>>,
    #[serde(borrow, default)]
    model: Option<Str<'a>>,
    #[serde(borrow, default)]
    choices: Vec<ChoiceWire<'a>>,
    #[serde(default)]
    usage: Option<UsageWire>,
}

#[derive(Deserialize)]
struct ChoiceWire<'a> {
    #[serde(default)]
    index: u32,
    #[serde(borrow)]
    message: MessageWire<'a>,
    #[serde(borrow, default)]
    finish_reason: Option<Str<'a>>,
}

#[derive(Deserialize)]
struct MessageWire<'a> {
    #[serde(borrow, default)]
    content: Option<TextOr<'a, ContentPartWire<'a>>>,
    #[serde(borrow, default)]
    reasoning_content: Option<Str<'a>>,
    #[serde(borrow, default)]
    reasoning: Option<Str<'a>>,
    #[serde(borrow, default)]
    refusal: Option<Str<'a>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolCallWire<'a>>>,
}

/// Content as an array (Mistral and a few others): only text parts carry the answer.
#[derive(Deserialize)]
struct ContentPartWire<'a> {
    #[serde(borrow, default)]
    text: Option<Str<'a>>,
}

#[derive(Deserialize)]
pub(super) struct ToolCallWire<'a> {
    #[serde(borrow, default)]
    pub(super) id: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) function: FunctionCallWire<'a>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
pub(super) struct FunctionCallWire<'a> {
    #[serde(borrow, default)]
    pub(super) name: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) arguments: Option<Str<'a>>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
pub(super) struct UsageWire {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetailsWire>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetailsWire>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct PromptDetailsWire {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct CompletionDetailsWire {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

/// A `usage` object as serde reads it (see [`Skim`]).
pub(super) fn skim_usage(s: &mut Skim<'_>) -> Option<UsageWire> {
    let mut usage = UsageWire {
        prompt_tokens: None,
        completion_tokens: None,
        prompt_tokens_details: None,
        completion_tokens_details: None,
    };
    let mut seen = Seen::default();
    s.object(|s, key| {
        match key {
            "prompt_tokens" => seen.once(0, || s.optional_unsigned(&mut usage.prompt_tokens))?,
            "completion_tokens" => {
                seen.once(1, || s.optional_unsigned(&mut usage.completion_tokens))?;
            }
            "prompt_tokens_details" => {
                seen.first(2)?;
                usage.prompt_tokens_details = if s.null() {
                    None
                } else {
                    let mut cached_tokens = None;
                    details(s, "cached_tokens", &mut cached_tokens)?;
                    Some(PromptDetailsWire { cached_tokens })
                };
            }
            "completion_tokens_details" => {
                seen.first(3)?;
                usage.completion_tokens_details = if s.null() {
                    None
                } else {
                    let mut reasoning_tokens = None;
                    details(s, "reasoning_tokens", &mut reasoning_tokens)?;
                    Some(CompletionDetailsWire { reasoning_tokens })
                };
            }
            _ => s.skip()?,
        }
        Some(())
    })?;
    Some(usage)
}

/// A `*_tokens_details` object, its one count of interest read into `count`.
fn details(s: &mut Skim<'_>, name: &str, count: &mut Option<u64>) -> Option<()> {
    let mut seen = Seen::default();
    s.object(|s, key| {
        if key == name {
            seen.first(0)?;
            s.optional_unsigned(count)
        } else {
            s.skip()
        }
    })
}

impl UsageWire {
    /// `cached_tokens` are inside `prompt_tokens` and `reasoning_tokens` inside
    /// `completion_tokens`: the cached ones are taken out of the uncached bucket.
    pub(super) fn usage(&self) -> Usage {
        let cached = self.prompt_tokens_details.as_ref().and_then(|d| d.cached_tokens).unwrap_or(0);
        Usage {
            uncached_input: self.prompt_tokens.unwrap_or(0).saturating_sub(cached),
            cache_read: cached,
            cache_write: 0,
            output: self.completion_tokens.unwrap_or(0),
            reasoning: self
                .completion_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
            estimated: false,
        }
    }
}

/// What a relayed Chat Completions body needs read of it (see [`crate::chat::Ending`]).
pub fn decode_ending(body: &[u8]) -> Result<Ending<'_>, ProviderError> {
    let skimmed = std::str::from_utf8(body).ok().and_then(skim_ending);
    let wire = match skimmed {
        Some(wire) => wire,
        None => json::parse_answer(body, Dialect::OpenAi)?,
    };
    let Some(choice) = wire.choices.into_iter().min_by_key(|c| c.index) else {
        return Err(ProviderError::InvalidResponse {
            dialect: Dialect::OpenAi,
            message: "no choices".to_owned(),
        });
    };
    Ok(Ending {
        finished: choice.finish_reason.is_some(),
        usage: wire.usage.map(|u| u.usage()).unwrap_or_default(),
        model: wire.model.map(Str::into_cow),
    })
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct EndingWire<'a> {
    // The whole decode's fields, in its order (a JSON array fills them in turn), the ones
    // not read skipped.
    #[serde(rename = "id", default)]
    _id: de::IgnoredAny,
    #[serde(borrow, default)]
    model: Option<Str<'a>>,
    #[serde(borrow, default)]
    choices: Vec<ChoiceEnding<'a>>,
    #[serde(default)]
    usage: Option<UsageWire>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug))]
struct ChoiceEnding<'a> {
    #[serde(default)]
    index: u32,
    /// Required, as the whole decode requires it; not read.
    #[serde(rename = "message")]
    _message: de::IgnoredAny,
    #[serde(borrow, default)]
    finish_reason: Option<Str<'a>>,
}

/// [`EndingWire`] as serde would read it, read by [`Skim`] (rather than the whole answer
/// through serde's visitors for three fields); `None` for anything it leaves to serde.
fn skim_ending(body: &str) -> Option<EndingWire<'_>> {
    let mut wire =
        EndingWire { _id: de::IgnoredAny, model: None, choices: Vec::new(), usage: None };
    let mut seen = Seen::default();
    let mut s = Skim::new(body);
    s.object(|s, key| {
        match key {
            "id" => seen.once(0, || s.skip())?,
            "model" => seen.once(1, || s.optional_string(&mut wire.model))?,
            "choices" => {
                seen.first(2)?;
                s.array(|s| {
                    wire.choices.push(skim_choice_ending(s)?);
                    Some(())
                })?;
            }
            "usage" => seen.once(3, || s.nullable(&mut wire.usage, skim_usage))?,
            _ => s.skip()?,
        }
        Some(())
    })?;
    s.end()?;
    Some(wire)
}

fn skim_choice_ending<'a>(s: &mut Skim<'a>) -> Option<ChoiceEnding<'a>> {
    let mut choice = ChoiceEnding { index: 0, _message: de::IgnoredAny, finish_reason: None };
    let mut seen = Seen::default();
    s.object(|s, key| {
        match key {
            "index" => {
                seen.first(0)?;
                choice.index = s.unsigned()?;
            }
            "message" => seen.once(1, || s.skip())?,
            "finish_reason" => seen.once(2, || s.optional_string(&mut choice.finish_reason))?,
            _ => s.skip()?,
        }
        Some(())
    })?;
    // serde requires `message`.
    seen.has(1).then_some(choice)
}

/// Decodes a 2xx Chat Completions body. Only the first choice is read. See [`decode_ending`]
/// for what a relayed one needs.
pub fn decode_response(body: &[u8]) -> Result<ChatResponse<'_>, ProviderError> {
    let wire: ResponseWire<'_> = json::parse_answer(body, Dialect::OpenAi)?;
    let Some(choice) = wire.choices.into_iter().min_by_key(|c| c.index) else {
        return Err(ProviderError::InvalidResponse {
            dialect: Dialect::OpenAi,
            message: "no choices".to_owned(),
        });
    };
    let message = choice.message;
    let mut content = Vec::new();
    if let Some(thinking) = message.reasoning_content.or(message.reasoning) {
        content.push(Part::Thinking(Thinking { text: thinking.into_cow(), signature: None }));
    }
    match message.content {
        Some(TextOr::Text(text)) if !text.is_empty() => content.push(Part::Text(Text::new(text))),
        Some(TextOr::Items(parts)) => content.extend(
            parts.into_iter().filter_map(|p| p.text).map(|t| Part::Text(Text::new(t.into_cow()))),
        ),
        _ => {}
    }
    if let Some(refusal) = message.refusal {
        content.push(Part::Text(Text::new(refusal.into_cow())));
    }
    let calls = message.tool_calls.unwrap_or_default();
    let has_calls = !calls.is_empty();
    for (n, call) in calls.into_iter().enumerate() {
        content.push(Part::ToolUse(ToolUse {
            id: call.id.map_or_else(|| Cow::Owned(format!("call_{n}")), Str::into_cow),
            name: call.function.name.map(Str::into_cow).unwrap_or_default(),
            arguments: call.function.arguments.map_or(Cow::Borrowed("{}"), Str::into_cow),
            cache_control: None,
        }));
    }
    let stop_reason = choice.finish_reason.map(|r| match stop_reason(&r.0) {
        // Some servers say `stop` even when the answer is tool calls.
        StopReason::EndTurn if has_calls => StopReason::ToolUse,
        reason => reason,
    });
    Ok(ChatResponse {
        id: wire.id.map(Str::into_cow).unwrap_or_default(),
        model: wire.model.map(Str::into_cow).unwrap_or_default(),
        content,
        stop_reason,
        stop_sequence: None,
        usage: wire.usage.map(|u| u.usage()).unwrap_or_default(),
    })
}

#[derive(Serialize)]
struct ResponseOut<'r> {
    id: &'r str,
    object: &'static str,
    created: u64,
    model: &'r str,
    choices: [ChoiceOut<'r>; 1],
    usage: UsageOut,
}

#[derive(Serialize)]
struct ChoiceOut<'r> {
    index: u32,
    message: MessageOut<'r>,
    finish_reason: &'static str,
    logprobs: Option<()>,
}

#[derive(Serialize)]
struct MessageOut<'r> {
    role: &'static str,
    content: Option<Cow<'r, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<Cow<'r, str>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<ToolCallOut<'r>>,
}

#[derive(Serialize)]
pub(super) struct UsageOut {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_tokens_details: Option<PromptDetailsOut>,
}

#[derive(Serialize)]
struct PromptDetailsOut {
    cached_tokens: u64,
}

impl UsageOut {
    pub(super) fn new(usage: &Usage) -> Self {
        Self {
            prompt_tokens: usage.input(),
            completion_tokens: usage.output,
            total_tokens: usage.total(),
            prompt_tokens_details: (usage.cache_read > 0)
                .then_some(PromptDetailsOut { cached_tokens: usage.cache_read }),
        }
    }
}

/// Concatenates the pieces of one kind of content; borrowed when there is only one.
pub(super) fn concat<'r>(pieces: impl Iterator<Item = &'r str>) -> Option<Cow<'r, str>> {
    let mut joined: Option<Cow<'r, str>> = None;
    for piece in pieces {
        match &mut joined {
            None => joined = Some(Cow::Borrowed(piece)),
            Some(text) => text.to_mut().push_str(piece),
        }
    }
    joined
}

/// Encodes a canonical response as a Chat Completions body for a client. Text blocks are
/// concatenated as a stream of them would have been; thinking goes to `reasoning_content`;
/// blocks only another dialect understands are left out.
pub fn encode_response(response: &ChatResponse<'_>, meta: &ResponseMeta<'_>) -> Vec<u8> {
    let content = concat(response.content.iter().filter_map(|part| match part {
        Part::Text(text) => Some(text.text.as_ref()),
        _ => None,
    }));
    let reasoning = concat(response.content.iter().filter_map(|part| match part {
        Part::Thinking(thinking) => Some(thinking.text.as_ref()),
        _ => None,
    }));
    let tool_calls = response
        .content
        .iter()
        .filter_map(|part| match part {
            Part::ToolUse(call) => Some(ToolCallOut::new(call)),
            _ => None,
        })
        .collect();
    let body = ResponseOut {
        id: &response.id,
        object: "chat.completion",
        created: meta.created,
        model: meta.model,
        choices: [ChoiceOut {
            index: 0,
            message: MessageOut {
                role: "assistant",
                content,
                reasoning_content: reasoning,
                tool_calls,
            },
            finish_reason: finish_reason(response.stop_reason.unwrap_or(StopReason::EndTurn)),
            logprobs: None,
        }],
        usage: UsageOut::new(&response.usage),
    };
    serde_json::to_vec(&body).expect("serialising to memory cannot fail")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers as OpenAI, OpenRouter, Azure and the mock write them.
    const ANSWERS: &[&str] = &[
        r#"{"choices":[{"finish_reason":"stop","index":0,"logprobs":null,"message":{"annotations":[],"content":"Hello from the mock upstream.","refusal":null,"role":"assistant"}}],"created":1700000000,"id":"chatcmpl-mock-0","model":"gpt-4o-mini","object":"chat.completion","service_tier":"default","system_fingerprint":"fp_mock","usage":{"completion_tokens":8,"completion_tokens_details":{"accepted_prediction_tokens":0,"audio_tokens":0,"reasoning_tokens":0,"rejected_prediction_tokens":0},"prompt_tokens":31,"prompt_tokens_details":{"audio_tokens":0,"cached_tokens":0},"total_tokens":39}}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":80,"completion_tokens":20,"total_tokens":100,"prompt_tokens_details":{"cached_tokens":64}}}"#,
        r#"{"id":"gen-1","provider":"OpenAI","model":"openai/gpt-4o","object":"chat.completion","created":1,"choices":[{"logprobs":null,"finish_reason":"stop","native_finish_reason":"stop","index":0,"message":{"role":"assistant","content":"line\nbreak \u00e9","refusal":null,"reasoning":null}}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}"#,
        r#"{"choices":[{"content_filter_results":{},"finish_reason":null,"index":0,"message":{"content":"cut","role":"assistant"}}],"created":1,"id":"c","model":"gpt-4o","object":"chat.completion","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}],"usage":null}"#,
        r#"{"id":"c","model":"m","choices":[{"index":1,"message":{},"finish_reason":"length"},{"index":0,"message":null,"finish_reason":"stop"}]}"#,
        "{ \"id\" : 7 , \"choices\" : [ { \"message\" : { } } ] }\n",
    ];

    #[test]
    fn the_skim_reads_every_usual_answer_as_serde_does() {
        for answer in ANSWERS {
            let read = crate::skim::agrees_with_serde(answer, skim_ending(answer));
            assert!(read, "left to serde: {answer}");
        }
        let ending = decode_ending(ANSWERS[1].as_bytes()).unwrap();
        assert!(ending.finished);
        assert_eq!(ending.usage.cache_read, 64);
        assert_eq!(ending.model.as_deref(), Some("gpt-4o"));
    }

    /// Wherever the skim answers, serde reads the same; where serde refuses, so does the skim.
    #[test]
    fn on_mutated_answers_the_skim_agrees_with_serde_or_leaves_them_to_it() {
        let mut answered = 0;
        crate::skim::mutations(ANSWERS, 3000, |text| {
            answered += usize::from(crate::skim::agrees_with_serde(text, skim_ending(text)));
        });
        assert!(answered > 3000, "only {answered} mutated answers were read by the skim");
    }

    #[test]
    fn a_choice_without_its_message_is_left_to_serde_which_refuses_it() {
        let missing = r#"{"choices":[{"index":0,"finish_reason":"stop"}]}"#;
        assert!(skim_ending(missing).is_none());
        assert!(
            serde_json::from_str::<EndingWire<'_>>(missing)
                .unwrap_err()
                .to_string()
                .contains("message")
        );
        assert!(decode_ending(missing.as_bytes()).is_err());
    }
}
