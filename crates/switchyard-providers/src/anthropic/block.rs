//! Anthropic content blocks, shared by requests (client turns) and responses (model turns).
//!
//! Each block is captured raw first, so a block this crate does not model survives verbatim
//! as [`Part::Opaque`] instead of failing the request.

use std::borrow::Cow;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::chat::{Image, ImageSource, Opaque, Part, RawJson, Text, Thinking, ToolResult, ToolUse};
use crate::dialect::Dialect;
use crate::json::{self, Str, TextOr, object_or_empty};

#[derive(Deserialize)]
struct BlockWire<'a> {
    #[serde(rename = "type", borrow)]
    kind: Str<'a>,
    #[serde(borrow, default)]
    text: Option<Str<'a>>,
    #[serde(borrow, default)]
    cache_control: Option<&'a RawValue>,
    #[serde(borrow, default)]
    source: Option<SourceWire<'a>>,
    #[serde(borrow, default)]
    id: Option<Str<'a>>,
    #[serde(borrow, default)]
    name: Option<Str<'a>>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tool_use_id: Option<Str<'a>>,
    #[serde(borrow, default)]
    content: Option<TextOr<'a, BlockIn<'a>>>,
    #[serde(default)]
    is_error: Option<bool>,
    #[serde(borrow, default)]
    thinking: Option<Str<'a>>,
    #[serde(borrow, default)]
    signature: Option<Str<'a>>,
    #[serde(borrow, default)]
    data: Option<Str<'a>>,
}

/// Lenient on purpose: documents have sources of other shapes, and only image sources are
/// read.
#[derive(Deserialize)]
struct SourceWire<'a> {
    #[serde(rename = "type", borrow)]
    kind: Str<'a>,
    #[serde(borrow, default)]
    media_type: Option<Str<'a>>,
    #[serde(borrow, default)]
    data: Option<Str<'a>>,
    #[serde(borrow, default)]
    url: Option<Str<'a>>,
}

/// One content block as a canonical part.
pub(super) struct BlockIn<'a>(pub(super) Part<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for BlockIn<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(deserializer)?;
        let wire: BlockWire<'de> = json::parse_raw(raw).map_err(de::Error::custom)?;
        block(wire, raw).map(Self).map_err(de::Error::custom)
    }
}

fn required<'a>(field: Option<Str<'a>>, kind: &str, name: &str) -> Result<Cow<'a, str>, String> {
    field.map(Str::into_cow).ok_or_else(|| format!("a `{kind}` block needs `{name}`"))
}

fn block<'a>(wire: BlockWire<'a>, raw: &'a RawValue) -> Result<Part<'a>, String> {
    let cache_control = wire.cache_control.map(RawJson);
    let kind = wire.kind.0;
    let opaque = |kind: Cow<'a, str>| {
        Part::Opaque(Opaque { dialect: Dialect::Anthropic, kind, raw: RawJson(raw) })
    };
    Ok(match kind.as_ref() {
        "text" => Part::Text(Text { text: required(wire.text, "text", "text")?, cache_control }),
        "image" => {
            let Some(source) = wire.source else {
                return Err("an `image` block needs `source`".into());
            };
            let source = match (source.kind.0.as_ref(), source.media_type, source.data, source.url)
            {
                ("base64", Some(media_type), Some(data), _) => {
                    ImageSource::Base64 { media_type: media_type.into_cow(), data: data.into_cow() }
                }
                ("url", _, _, Some(url)) => ImageSource::Url(url.into_cow()),
                // Files API references and the like mean something to Anthropic only.
                _ => return Ok(opaque(kind)),
            };
            Part::Image(Image { source, detail: None, cache_control })
        }
        "tool_use" => Part::ToolUse(ToolUse {
            id: required(wire.id, "tool_use", "id")?,
            name: required(wire.name, "tool_use", "name")?,
            arguments: Cow::Borrowed(wire.input.map_or("{}", RawValue::get)),
            cache_control,
        }),
        "tool_result" => Part::ToolResult(ToolResult {
            tool_use_id: required(wire.tool_use_id, "tool_result", "tool_use_id")?,
            content: match wire.content {
                None => Vec::new(),
                Some(TextOr::Text(text)) => vec![Part::Text(Text::new(text))],
                Some(TextOr::Items(blocks)) => blocks.into_iter().map(|b| b.0).collect(),
            },
            is_error: wire.is_error.unwrap_or(false),
            cache_control,
        }),
        "thinking" => Part::Thinking(Thinking {
            text: required(wire.thinking, "thinking", "thinking")?,
            signature: wire.signature.map(Str::into_cow),
        }),
        "redacted_thinking" => {
            Part::RedactedThinking(required(wire.data, "redacted_thinking", "data")?)
        }
        _ => opaque(kind),
    })
}

/// A canonical part as an Anthropic block, or `None` when Anthropic cannot take it back
/// (thinking without a signature, blocks of another dialect, empty text).
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum BlockOut<'r> {
    Known(KnownBlock<'r>),
    Raw(RawJson<'r>),
}

impl<'r> BlockOut<'r> {
    /// Where this block's `cache_control` goes; `None` for a block that cannot carry one
    /// (thinking, a block passed through as it was).
    pub(super) fn cache_control(&mut self) -> Option<&mut Option<RawJson<'r>>> {
        match self {
            Self::Known(
                KnownBlock::Text { cache_control, .. }
                | KnownBlock::Image { cache_control, .. }
                | KnownBlock::ToolUse { cache_control, .. }
                | KnownBlock::ToolResult { cache_control, .. },
            ) => Some(cache_control),
            Self::Known(KnownBlock::Thinking { .. } | KnownBlock::RedactedThinking { .. })
            | Self::Raw(_) => None,
        }
    }
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum KnownBlock<'r> {
    Text {
        text: &'r str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<RawJson<'r>>,
    },
    Image {
        source: SourceOut<'r>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<RawJson<'r>>,
    },
    ToolUse {
        id: &'r str,
        name: &'r str,
        input: &'r RawValue,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<RawJson<'r>>,
    },
    ToolResult {
        tool_use_id: &'r str,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        content: Vec<BlockOut<'r>>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<RawJson<'r>>,
    },
    Thinking {
        thinking: &'r str,
        signature: &'r str,
    },
    RedactedThinking {
        data: &'r str,
    },
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum SourceOut<'r> {
    Base64 { media_type: &'r str, data: &'r str },
    Url { url: &'r str },
}

/// Why a part cannot become an Anthropic block.
pub(super) enum Skip<'r> {
    /// Nothing Anthropic would miss (empty text, unsigned thinking, another vendor's
    /// server-side block in a model turn).
    Drop,
    /// Content of another dialect the model was meant to read.
    Foreign(&'r Opaque<'r>),
}

pub(super) fn block_out<'r>(part: &'r Part<'r>) -> Result<BlockOut<'r>, Skip<'r>> {
    Ok(BlockOut::Known(match part {
        Part::Text(text) if text.text.is_empty() => return Err(Skip::Drop),
        Part::Text(text) => {
            KnownBlock::Text { text: &text.text, cache_control: text.cache_control }
        }
        Part::Image(image) => KnownBlock::Image {
            source: match &image.source {
                ImageSource::Base64 { media_type, data } => SourceOut::Base64 { media_type, data },
                ImageSource::Url(url) => SourceOut::Url { url },
            },
            cache_control: image.cache_control,
        },
        Part::ToolUse(call) => KnownBlock::ToolUse {
            id: &call.id,
            name: &call.name,
            input: object_or_empty(&call.arguments),
            cache_control: call.cache_control,
        },
        Part::ToolResult(result) => KnownBlock::ToolResult {
            tool_use_id: &result.tool_use_id,
            content: result
                .content
                .iter()
                .filter_map(|part| match block_out(part) {
                    Ok(block) => Some(Ok(block)),
                    Err(Skip::Drop) => None,
                    Err(Skip::Foreign(opaque)) => Some(Err(Skip::Foreign(opaque))),
                })
                .collect::<Result<_, _>>()?,
            is_error: result.is_error,
            cache_control: result.cache_control,
        },
        Part::Thinking(thinking) => match thinking.signature.as_deref() {
            Some(signature) if !signature.is_empty() => {
                KnownBlock::Thinking { thinking: &thinking.text, signature }
            }
            _ => return Err(Skip::Drop),
        },
        Part::RedactedThinking(data) => KnownBlock::RedactedThinking { data },
        Part::Opaque(opaque) if opaque.dialect == Dialect::Anthropic => {
            return Ok(BlockOut::Raw(opaque.raw));
        }
        Part::Opaque(opaque) => return Err(Skip::Foreign(opaque)),
    }))
}
