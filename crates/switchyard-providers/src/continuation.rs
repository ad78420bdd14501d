//! Building a continuation request (RESILIENCE.md §10): the client's request plus the answer
//! relayed so far, marked by the target's documented mechanism so the model continues that
//! answer instead of starting a new one.
//!
//! The answer so far is always sent as a last `assistant` message of text; what marks it as a
//! prefix to continue differs per vendor:
//! - Anthropic: nothing; a last assistant message *is* a prefill.
//! - DeepSeek, Mistral: `"prefix": true` on that message.
//! - Moonshot: `"partial": true` on that message.
//! - vLLM: `"continue_final_message": true, "add_generation_prompt": false` on the request.

use switchyard_core::continuation::Continuation;

use crate::chat::{ChatRequest, Message, Part, Role, Text};
use crate::dialect::Dialect;
use crate::error::ProviderError;

/// `request` with `prefill` as the assistant's answer so far, to be encoded for the target.
pub fn with_prefill<'a>(request: &ChatRequest<'a>, prefill: &str) -> ChatRequest<'a> {
    let mut continued = request.clone();
    continued.messages.push(Message {
        role: Role::Assistant,
        content: vec![Part::Text(Text::new(prefill.to_owned()))],
    });
    continued
}

/// Marks an encoded Chat or Anthropic body (whose last message is the prefill) for
/// `mechanism`.
pub fn mark(body: &[u8], mechanism: Continuation) -> Result<Vec<u8>, ProviderError> {
    if matches!(mechanism, Continuation::Off | Continuation::Anthropic) {
        return Ok(body.to_vec());
    }
    let mut json: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| untranslatable(format!("an encoded request is not JSON: {e}")))?;
    let last = json
        .get_mut("messages")
        .and_then(serde_json::Value::as_array_mut)
        .and_then(|messages| messages.last_mut())
        .and_then(serde_json::Value::as_object_mut);
    match (mechanism, last) {
        (Continuation::Prefix, Some(last)) => {
            last.insert("prefix".into(), true.into());
        }
        (Continuation::Partial, Some(last)) => {
            last.insert("partial".into(), true.into());
        }
        (Continuation::Vllm, _) => {
            json["continue_final_message"] = true.into();
            json["add_generation_prompt"] = false.into();
        }
        _ => {
            return Err(untranslatable(
                "a continuation request has no last message to mark".into(),
            ));
        }
    }
    serde_json::to_vec(&json).map_err(|e| untranslatable(e.to_string()))
}

/// The mechanisms marked here all belong to the Chat dialect.
fn untranslatable(message: String) -> ProviderError {
    ProviderError::Untranslatable { dialect: Dialect::OpenAi, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = r#"{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hel"}]}"#;

    #[test]
    fn each_mechanism_marks_the_request_as_its_vendor_documents() {
        let marked = |m| -> serde_json::Value {
            serde_json::from_slice(&mark(BODY.as_bytes(), m).unwrap()).unwrap()
        };
        assert_eq!(marked(Continuation::Prefix)["messages"][1]["prefix"], true);
        assert_eq!(marked(Continuation::Partial)["messages"][1]["partial"], true);
        let vllm = marked(Continuation::Vllm);
        assert_eq!(vllm["continue_final_message"], true);
        assert_eq!(vllm["add_generation_prompt"], false);
        assert_eq!(vllm["messages"][1].get("prefix"), None);
        assert_eq!(mark(BODY.as_bytes(), Continuation::Anthropic).unwrap(), BODY.as_bytes());
    }

    #[test]
    fn the_prefill_is_the_last_assistant_message() {
        let request = ChatRequest {
            messages: vec![Message {
                role: Role::User,
                content: vec![Part::Text(Text::new("hi"))],
            }],
            ..ChatRequest::default()
        };
        let continued = with_prefill(&request, "Hel");
        let last = continued.messages.last().unwrap();
        assert_eq!(last.role, Role::Assistant);
        assert!(matches!(&last.content[..], [Part::Text(t)] if t.text == "Hel"));
        assert_eq!(request.messages.len(), 1, "the client's request is left as it was");
    }
}
