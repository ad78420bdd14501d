//! The client's request as routing reads it, and read whole only when something needs it
//!.
//!
//! Routing needs the top-level settings: the model, whether to stream, what could rule out a
//! continuation (tool choice, output format, reasoning) and the fields a session or a login is
//! named in. A body that is only passed through needs nothing else, and an agent's turn is
//! mostly what nothing else reads: its conversation, system prompt and tools (80 of an 86 KB
//! Claude Code turn). Those are read, once, by whatever needs them: a translated target, a
//! session derived from the conversation, `auto`'s estimate, a continuation.

use std::borrow::Cow;
use std::sync::OnceLock;

use switchyard_providers::chat::ChatRequest;
use switchyard_providers::dialect::{ClientDialect, Depth};
use switchyard_providers::error::ProviderError;

/// A body smaller than this is read whole at once: reading it twice (its settings, then all of
/// it for a session derived from its conversation, as most SDK scripts' requests need) would
/// cost more than the skipped part saves. An agent's turn is 20 times larger.
const READ_WHOLE_BELOW: usize = 4 * 1024;

/// A client request, read to [`Depth::Routing`] and whole on demand.
#[derive(Debug)]
pub(crate) struct Parsed<'b> {
    read: Read<'b>,
}

#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "one per request, held where it is read; boxing would add an allocation to it"
)]
enum Read<'b> {
    /// Built or read whole: the settings are the request's own.
    Whole(ChatRequest<'b>),
    /// Read to routing depth; `whole` is filled the first time someone asks.
    Routing {
        settings: ChatRequest<'b>,
        whole: OnceLock<Result<ChatRequest<'b>, String>>,
        client: ClientDialect,
        body: &'b [u8],
        path_model: Option<&'b str>,
    },
}

impl<'b> Parsed<'b> {
    /// Reads what routing needs of a client's `body` (`path_model`: the model its path names,
    /// for Gemini). A body whose settings the parser cannot read (a
    /// shape newer than this router) is still taken when it names its model: only a target of
    /// the client's own dialect can then serve it, and reading it whole fails with the
    /// parser's error, naming the field. `Err` when not even the model can be read.
    pub(crate) fn read(
        client: ClientDialect,
        body: &'b [u8],
        path_model: Option<&'b str>,
    ) -> Result<Self, ProviderError> {
        let whole = OnceLock::new();
        if body.len() < READ_WHOLE_BELOW {
            match client.parse_request(body) {
                Ok(mut request) => {
                    name_path_model(&mut request, client, path_model);
                    return Ok(Self { read: Read::Whole(request) });
                }
                Err(error) => whole.set(Err(error.to_string())).expect("a new cell is empty"),
            }
        }
        let (mut settings, whole) = match client.parse_request_to(body, Depth::Routing) {
            Ok(settings) => (settings, whole),
            Err(error) => match ChatRequest::minimal(client.dialect(), body) {
                Some(minimal) => (minimal, OnceLock::from(Err(error.to_string()))),
                None => return Err(error),
            },
        };
        name_path_model(&mut settings, client, path_model);
        Ok(Self { read: Read::Routing { settings, whole, client, body, path_model } })
    }

    /// A request built in code (a continuation's), whole from the start.
    pub(crate) fn whole_from(request: ChatRequest<'b>) -> Self {
        Self { read: Read::Whole(request) }
    }

    /// Every top-level setting; the conversation, system prompt and tools may be empty here
    /// when they are not (see [`Parsed::whole`]).
    pub(crate) fn settings(&self) -> &ChatRequest<'b> {
        match &self.read {
            Read::Whole(request) => request,
            Read::Routing { settings, .. } => settings,
        }
    }

    /// The whole canonical request, read the first time it is asked for; `Err` with the
    /// parser's message (naming the field) when the body has no canonical form.
    pub(crate) fn whole(&self) -> Result<&ChatRequest<'b>, &str> {
        match &self.read {
            Read::Whole(request) => Ok(request),
            Read::Routing { whole, client, body, path_model, .. } => whole
                .get_or_init(|| {
                    let mut request = client.parse_request(body).map_err(|e| e.to_string())?;
                    name_path_model(&mut request, *client, *path_model);
                    Ok(request)
                })
                .as_ref()
                .map_err(String::as_str),
        }
    }

    /// Whether reading the body whole was tried and failed: only its own dialect's targets can
    /// take it. `false` while nobody has asked.
    pub(crate) fn known_unreadable(&self) -> bool {
        matches!(&self.read, Read::Routing { whole, .. } if matches!(whole.get(), Some(Err(_))))
    }

    /// The request a translated answer is encoded for. Only a target whose request was built
    /// from [`Parsed::whole`] translates, so it was read; the settings stand in otherwise.
    pub(crate) fn translated(&self) -> &ChatRequest<'b> {
        self.whole().unwrap_or(self.settings())
    }

    /// The model as the client named it (the path's, for Gemini).
    pub(crate) fn model(&self) -> &str {
        &self.settings().model
    }

    pub(crate) fn stream(&self) -> bool {
        self.settings().stream
    }
}

/// Gemini names the model in the path, and whether to stream in the method (which its parser
/// reads already).
fn name_path_model<'b>(
    request: &mut ChatRequest<'b>,
    client: ClientDialect,
    path_model: Option<&'b str>,
) {
    if let Some(model) = path_model {
        request.model = Cow::Borrowed(model);
    }
    if let ClientDialect::Gemini(method) = client {
        request.stream = method.streams();
    }
}

#[cfg(test)]
mod tests {
    use switchyard_providers::gemini::Method;

    use super::*;

    /// A body past [`READ_WHOLE_BELOW`]: `text` padded with spaces, which JSON ignores.
    fn large(text: &[u8]) -> Vec<u8> {
        let mut body = text.to_vec();
        body.resize(READ_WHOLE_BELOW, b' ');
        body
    }

    #[test]
    fn the_conversation_is_read_only_when_asked_for_and_then_once() {
        let body = large(br#"{"model":"m","stream":true,"tool_choice":"required","messages":[{"role":"user","content":"hi"}]}"#);
        let parsed = Parsed::read(ClientDialect::OpenAi, &body, None).unwrap();
        let settings = parsed.settings();
        assert_eq!((settings.model.as_ref(), settings.stream), ("m", true));
        assert!(settings.tool_choice.is_some(), "settings are read");
        assert!(settings.messages.is_empty(), "the conversation is not");
        assert!(!parsed.known_unreadable());
        let whole = parsed.whole().unwrap();
        assert_eq!(whole.messages.len(), 1);
        assert!(std::ptr::eq(whole, parsed.whole().unwrap()), "read once");
    }

    #[test]
    fn a_body_with_settings_the_parser_cannot_read_is_taken_for_passthrough_only() {
        // `temperature` of a type no version of the API had: the parser refuses it, a
        // same-dialect upstream decides for itself.
        let body = br#"{"model":"m","temperature":"warm","messages":[]}"#;
        let parsed = Parsed::read(ClientDialect::OpenAi, body, None).unwrap();
        assert_eq!(parsed.model(), "m");
        assert!(parsed.known_unreadable(), "the settings' error stands for the whole");
        assert!(parsed.whole().unwrap_err().contains("temperature"), "{:?}", parsed.whole());
        let nothing = Parsed::read(ClientDialect::OpenAi, b"{\"messages\":[]}", None);
        assert!(nothing.unwrap_err().to_string().contains("model"));
    }

    #[test]
    fn a_conversation_the_parser_cannot_read_is_found_out_when_asked_for() {
        let body = large(br#"{"model":"m","messages":[{"role":"robot","content":"x"}]}"#);
        let parsed = Parsed::read(ClientDialect::OpenAi, &body, None).unwrap();
        assert!(!parsed.known_unreadable(), "not read yet");
        assert!(parsed.whole().is_err());
        assert!(parsed.known_unreadable());
    }

    #[test]
    fn a_small_body_is_read_whole_at_once() {
        let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        let parsed = Parsed::read(ClientDialect::OpenAi, body, None).unwrap();
        assert_eq!(parsed.settings().messages.len(), 1);
        let robot = br#"{"model":"m","messages":[{"role":"robot","content":"x"}]}"#;
        let parsed = Parsed::read(ClientDialect::OpenAi, robot, None).unwrap();
        assert!(parsed.known_unreadable(), "its settings are read, and the whole refused");
    }

    #[test]
    fn gemini_takes_its_model_and_stream_from_the_path_whole_or_not() {
        let body = br#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}"#;
        let client = ClientDialect::Gemini(Method::StreamSse);
        let parsed = Parsed::read(client, body, Some("gemini-x")).unwrap();
        assert_eq!((parsed.model(), parsed.stream()), ("gemini-x", true));
        let whole = parsed.whole().unwrap();
        assert_eq!((whole.model.as_ref(), whole.stream), ("gemini-x", true));
    }
}
