//! JSON plumbing the dialects share: strings that borrow from the body when they can, "string
//! or array" fields, and parse errors that name the field instead of a byte offset.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::chat::ChatRequest;
use crate::dialect::Dialect;
use crate::error::ProviderError;

/// A string that borrows from the input unless it had escapes. Serde borrows a bare
/// `Cow<str>` field only with `#[serde(borrow)]` and never inside `Option` or `Vec`; this
/// newtype borrows everywhere.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Str<'a>(pub(crate) Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(StrVisitor)
    }
}

impl<'a> Str<'a> {
    pub(crate) fn into_cow(self) -> Cow<'a, str> {
        self.0
    }
}

/// A field that is either one string or an array of `T` (message content, system prompts,
/// stop sequences, tool results).
#[derive(Debug)]
pub(crate) enum TextOr<'a, T> {
    Text(Cow<'a, str>),
    Items(Vec<T>),
}

impl<'de: 'a, 'a, T: Deserialize<'de>> Deserialize<'de> for TextOr<'a, T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextOrVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for TextOrVisitor<T> {
            type Value = TextOr<'de, T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("string or array")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(TextOr::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(TextOr::Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(TextOr::Text(Cow::Owned(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(TextOr::Items(items))
            }
        }
        deserializer.deserialize_any(TextOrVisitor(PhantomData))
    }
}

/// A parse failure located by field path (`messages[2].content`), without `serde_json`'s byte
/// position, which means nothing to someone reading a 400.
#[derive(Debug)]
pub(crate) struct FieldError {
    pub(crate) path: String,
    pub(crate) message: String,
}

impl FieldError {
    /// `path: message`, or the message alone for the value as a whole.
    pub(crate) fn describe(self) -> String {
        if self.path.is_empty() { self.message } else { format!("{}: {}", self.path, self.message) }
    }
}

/// Parses a whole body; on failure, parses it again tracking the path to whatever fails.
///
/// Path tracking copies every key it passes, so it runs only once the fast parse has failed:
/// valid bodies, the hot path, pay nothing for it.
pub(crate) fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, FieldError> {
    let fast = match serde_json::from_slice(body) {
        Ok(value) => return Ok(value),
        Err(error) => error,
    };
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let tracked: Result<T, _> = serde_path_to_error::deserialize(&mut deserializer);
    Err(match tracked {
        Err(error) => {
            let path = error.path().to_string();
            FieldError {
                path: if path == "." { String::new() } else { path },
                message: message(error.inner()),
            }
        }
        // Only trailing garbage fails the fast parse and not this one.
        Ok(_) => FieldError { path: String::new(), message: message(&fast) },
    })
}

/// An upstream's 2xx answer in `dialect`, read into `T`; errors name the field.
pub(crate) fn parse_answer<'a, T: Deserialize<'a>>(
    body: &'a [u8],
    dialect: Dialect,
) -> Result<T, ProviderError> {
    parse(body).map_err(|e| ProviderError::InvalidResponse { dialect, message: e.describe() })
}

/// One client dialect's request object, read field by field into the canonical request.
pub(crate) trait RequestFields {
    /// What the object is, for "invalid type: expected ..." errors.
    const EXPECTING: &'static str;

    /// Reads the object's fields; at [`Depth::Routing`], the conversation, the system prompt
    /// and the tools are skipped (see [`skip`]) and not required.
    fn read<'de, A: de::MapAccess<'de>>(map: A, depth: Depth)
    -> Result<ChatRequest<'de>, A::Error>;
}

/// How much of a client's request a parse reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// All of it: the canonical request, which a target of another dialect is sent.
    Whole,
    /// Every top-level setting (model, stream, tool choice, output format, reasoning, the
    /// fields kept verbatim) but not the conversation, the system prompt or the tools, which
    /// are checked to be JSON and not read: what routing and a passthrough need.
    /// An 86 KB agent turn is mostly those three.
    Routing,
}

/// A client's request body read by `R`, with errors that name the field.
pub(crate) fn parse_request<R: RequestFields>(
    body: &[u8],
    depth: Depth,
) -> Result<ChatRequest<'_>, ProviderError> {
    let parsed = match depth {
        Depth::Whole => parse::<RequestIn<'_, R, false>>(body).map(|request| request.0),
        Depth::Routing => parse::<RequestIn<'_, R, true>>(body).map(|request| request.0),
    };
    parsed.map_err(|e| ProviderError::InvalidRequest { path: e.path, message: e.message })
}

/// A value the routing parse does not read: checked to be JSON, nothing kept.
pub(crate) fn skip<'de, A: de::MapAccess<'de>>(map: &mut A) -> Result<(), A::Error> {
    map.next_value::<de::IgnoredAny>().map(drop)
}

struct RequestIn<'a, R, const ROUTING: bool>(ChatRequest<'a>, PhantomData<R>);

impl<'de: 'a, 'a, R: RequestFields, const ROUTING: bool> Deserialize<'de>
    for RequestIn<'a, R, ROUTING>
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RequestVisitor<R, const ROUTING: bool>(PhantomData<R>);
        impl<'de, R: RequestFields, const ROUTING: bool> Visitor<'de> for RequestVisitor<R, ROUTING> {
            type Value = ChatRequest<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(R::EXPECTING)
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                R::read(map, if ROUTING { Depth::Routing } else { Depth::Whole })
            }
        }
        let request = deserializer.deserialize_map(RequestVisitor::<R, ROUTING>(PhantomData))?;
        Ok(Self(request, PhantomData))
    }
}

/// Parses one embedded raw value (a content block), for conversion inside an outer parse:
/// the outer parse supplies the path up to the block, this one the path inside it.
pub(crate) fn parse_raw<'a, T: Deserialize<'a>>(raw: &'a RawValue) -> Result<T, String> {
    parse(raw.get().as_bytes()).map_err(FieldError::describe)
}

/// `serde_json`'s message without its ` at line L column C` suffix.
pub(crate) fn message(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    match text.strip_suffix(&suffix) {
        Some(stripped) => stripped.to_owned(),
        None => text,
    }
}

/// The arguments of a tool call as a JSON object for wires that need one (Anthropic `input`,
/// Gemini `args`): the text itself when it is an object, `{}` otherwise (see the invariants
/// in [`crate::chat`]).
pub(crate) fn object_or_empty(arguments: &str) -> &RawValue {
    match serde_json::from_str::<&RawValue>(arguments) {
        Ok(raw) if raw.get().starts_with('{') => raw,
        _ => empty_object(),
    }
}

pub(crate) fn empty_object() -> &'static RawValue {
    serde_json::from_str("{}").expect("`{}` is JSON")
}
