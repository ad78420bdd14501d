//! Each dialect's token counts, mapped onto the disjoint buckets of `core::usage`, from whole
//! bodies and from streams, with payloads shaped like the providers' API references show them.
//! Where a dialect nests one count inside another (OpenAI's `cached_tokens` inside
//! `prompt_tokens`) or keeps it apart (Anthropic's cache counts, Gemini's thoughts), a test
//! fails if the mapping counts a token twice or drops one.

use switchyard_providers::chat::{StreamEvent, Usage};
use switchyard_providers::dialect::Dialect;
use switchyard_providers::sse::SseEvent;

fn buckets(
    uncached_input: u64,
    cache_read: u64,
    cache_write: u64,
    output: u64,
    reasoning: u64,
) -> Usage {
    Usage { uncached_input, cache_read, cache_write, output, reasoning, estimated: false }
}

fn answered(dialect: Dialect, body: &str) -> Usage {
    dialect.decode_response(body.as_bytes()).expect("a valid answer").usage
}

/// The last cumulative usage a stream reported.
fn streamed(dialect: Dialect, events: &[(Option<&str>, &str)]) -> Option<Usage> {
    let mut decoder = dialect.stream_decoder();
    let mut last = None;
    for (event, data) in events {
        let event = SseEvent { event: *event, data, id: None };
        decoder
            .decode(&event, &mut |e| {
                if let StreamEvent::Usage(usage) = e {
                    last = Some(usage);
                }
            })
            .expect("a valid event");
    }
    last
}

#[test]
fn chat_cached_tokens_are_inside_prompt_tokens_and_reasoning_inside_completion_tokens() {
    let body = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1741569952,"model":"o4-mini-2025-04-16",
      "choices":[{"index":0,"message":{"role":"assistant","content":"Hi","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],
      "usage":{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,
        "prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},
        "completion_tokens_details":{"reasoning_tokens":256,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},
      "service_tier":"default","system_fingerprint":"fp_1"}"#;
    let usage = answered(Dialect::OpenAi, body);
    assert_eq!(usage, buckets(86, 1920, 0, 300, 256));
    assert_eq!(usage.total(), 2306, "the buckets add up to the upstream's total_tokens");
}

#[test]
fn chat_streams_usage_in_a_final_chunk_with_empty_choices() {
    let events = [
        (
            None,
            r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}],"usage":null}"#,
        ),
        (
            None,
            r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}"#,
        ),
        (
            None,
            r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":40,"total_tokens":1240,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0}}}"#,
        ),
        (None, "[DONE]"),
    ];
    assert_eq!(streamed(Dialect::OpenAi, &events), Some(buckets(176, 1024, 0, 40, 0)));
}

#[test]
fn anthropic_input_tokens_exclude_cache_reads_and_writes() {
    let body = r#"{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5",
      "content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","stop_sequence":null,
      "usage":{"input_tokens":50,"cache_creation_input_tokens":1500,"cache_read_input_tokens":3000,"output_tokens":120,"service_tier":"standard"}}"#;
    let usage = answered(Dialect::Anthropic, body);
    assert_eq!(usage, buckets(50, 3000, 1500, 120, 0));
    assert_eq!(usage.input(), 4550);
}

#[test]
fn anthropic_streams_input_in_message_start_and_output_in_message_delta() {
    let events = [
        (
            Some("message_start"),
            r#"{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":1}}}"#,
        ),
        (
            Some("content_block_start"),
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        ),
        (Some("ping"), r#"{"type":"ping"}"#),
        (
            Some("content_block_delta"),
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}"#,
        ),
        (Some("content_block_stop"), r#"{"type":"content_block_stop","index":0}"#),
        (
            Some("message_delta"),
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}"#,
        ),
        (Some("message_stop"), r#"{"type":"message_stop"}"#),
    ];
    // The delta's output count replaces message_start's placeholder; the input stays.
    assert_eq!(streamed(Dialect::Anthropic, &events), Some(buckets(25, 2000, 100, 15, 0)));
}

#[test]
fn anthropic_stream_cut_after_message_start_counts_what_was_reported() {
    let events = [(
        Some("message_start"),
        r#"{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}"#,
    )];
    assert_eq!(streamed(Dialect::Anthropic, &events), Some(buckets(25, 0, 0, 1, 0)));
}

#[test]
fn gemini_thoughts_are_outside_candidates_and_cached_content_inside_the_prompt() {
    let body = r#"{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"finishReason":"STOP","index":0}],
      "usageMetadata":{"promptTokenCount":1100,"candidatesTokenCount":80,"totalTokenCount":1380,"cachedContentTokenCount":1000,"thoughtsTokenCount":200,
        "promptTokensDetails":[{"modality":"TEXT","tokenCount":1100}]},
      "modelVersion":"gemini-2.5-flash","responseId":"r1"}"#;
    let usage = answered(Dialect::Gemini, body);
    assert_eq!(usage, buckets(100, 1000, 0, 280, 200));
    assert_eq!(usage.total(), 1380, "the buckets add up to totalTokenCount");
}

#[test]
fn gemini_counts_a_server_tools_prompt_as_input() {
    let body = r#"{"candidates":[{"content":{"parts":[{"text":"Sunny."}],"role":"model"},"finishReason":"STOP","index":0}],
      "usageMetadata":{"promptTokenCount":40,"candidatesTokenCount":10,"toolUsePromptTokenCount":300,"totalTokenCount":350},
      "modelVersion":"gemini-2.5-flash"}"#;
    let usage = answered(Dialect::Gemini, body);
    assert_eq!(usage, buckets(340, 0, 0, 10, 0));
    assert_eq!(usage.total(), 350, "the buckets add up to totalTokenCount");
}

#[test]
fn gemini_streams_usage_metadata_cumulatively() {
    let events = [
        (
            None,
            r#"{"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":12,"totalTokenCount":12},"modelVersion":"gemini-2.5-flash"}"#,
        ),
        (
            None,
            r#"{"candidates":[{"content":{"parts":[{"text":"lo"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":3,"totalTokenCount":45,"thoughtsTokenCount":30},"modelVersion":"gemini-2.5-flash"}"#,
        ),
    ];
    assert_eq!(streamed(Dialect::Gemini, &events), Some(buckets(12, 0, 0, 33, 30)));
}

#[test]
fn responses_cached_and_reasoning_tokens_are_inside_input_and_output() {
    let body = r#"{"id":"resp_1","object":"response","created_at":1741476542,"status":"completed","model":"o4-mini-2025-04-16",
      "output":[{"type":"reasoning","id":"rs_1","summary":[]},
        {"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi","annotations":[]}]}],
      "usage":{"input_tokens":328,"input_tokens_details":{"cached_tokens":256},"output_tokens":52,"output_tokens_details":{"reasoning_tokens":40},"total_tokens":380}}"#;
    let usage = answered(Dialect::Responses, body);
    assert_eq!(usage, buckets(72, 256, 0, 52, 40));
    assert_eq!(usage.total(), 380);
}

#[test]
fn responses_streams_usage_in_response_completed() {
    let events = [
        (
            Some("response.created"),
            r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"gpt-4.1","output":[],"usage":null}}"#,
        ),
        (
            Some("response.output_text.delta"),
            r#"{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"}"#,
        ),
        (
            Some("response.completed"),
            r#"{"type":"response.completed","sequence_number":2,"response":{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-4.1","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi","annotations":[]}]}],"usage":{"input_tokens":2000,"input_tokens_details":{"cached_tokens":1536},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":2009}}}"#,
        ),
    ];
    assert_eq!(streamed(Dialect::Responses, &events), Some(buckets(464, 1536, 0, 9, 0)));
}
