#!/usr/bin/env python3
"""The official OpenAI, Anthropic and Google Gen AI (`google-genai`) Python SDKs, unchanged,
against a running Switchyard.

    check.py --proxy http://127.0.0.1:PORT/v1      (the key comes from SWITCHYARD_API_KEY)

`tests/sdk/run` starts the mock upstream with `tests/sdk/mock.toml` and a proxy whose providers
point at it, then runs this. Providers: `oa` (OpenAI dialect) and `an` (Anthropic dialect);
the combo `sdk-fallback` is `oa/gpt-down` (always 503) then `an/claude-text`. Upstream models:
`*-text` answer with a fixed text, `*-tool` with one `get_weather` call (see mock.toml); `ge`
(Gemini dialect) serves `gemini-text` and `gemini-tool`, and the google-genai cases go to it
(passthrough) and to the other two (translated). Embeddings: `emb` (OpenAI dialect, two keys)
serves `text-embedding-3-small` (combo `sdk-embed`) and `text-embedding-3-large` (combo
`sdk-embed-limited`, whose first request the mock rate-limits), `ge` serves
`gemini-embedding-001` (combo `sdk-gembed`); the OpenAI and google-genai SDKs go to both.

Every case runs even when an earlier one failed; each failure is printed with what was asked
and what came back. Exit status 0 only when every case passed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import struct
import sys
import traceback
from typing import Any, Callable

import anthropic
import openai
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

# What the mock answers (keep in step with mock.toml).
OA_TEXT = "Hello from the OpenAI upstream."
AN_TEXT = "Hello from the Anthropic upstream."
GE_TEXT = "Hello from the Gemini upstream."
TOOL_NAME = "get_weather"
TOOL_ARGS = {"city": "Paris", "unit": "celsius"}

QUESTION = "What is the weather in Paris?"

OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    }
]

ANTHROPIC_TOOLS = [
    {
        "name": TOOL_NAME,
        "description": "Current weather for a city.",
        "input_schema": OPENAI_TOOLS[0]["function"]["parameters"],
    }
]


class CheckFailed(AssertionError):
    pass


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def expect_eq(actual: Any, expected: Any, what: str) -> None:
    if actual != expected:
        raise CheckFailed(f"{what}: expected {expected!r}, got {actual!r}")


def dump(obj: Any) -> str:
    """A model object as compact JSON, for failure messages."""
    if hasattr(obj, "model_dump"):
        obj = obj.model_dump(mode="json", exclude_none=True)
    return json.dumps(obj, default=str)[:2000]


CASES: list[tuple[str, Callable[[], None]]] = []


def case(name: str) -> Callable[[Callable[[], None]], Callable[[], None]]:
    def register(fn: Callable[[], None]) -> Callable[[], None]:
        CASES.append((name, fn))
        return fn

    return register


# --- clients ------------------------------------------------------------------------------------

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--proxy", required=True, help="the URL the proxy printed: http://127.0.0.1:PORT/v1")
parser.add_argument("-k", dest="only", help="run only cases whose name contains this")
ARGS = parser.parse_args()
KEY = os.environ.get("SWITCHYARD_API_KEY") or sys.exit("check.py: SWITCHYARD_API_KEY is not set")
PROXY_V1 = ARGS.proxy.rstrip("/")
PROXY_ROOT = PROXY_V1.removesuffix("/v1")

# No SDK retries: a proxy failure must show, not be papered over by the client.
OA = openai.OpenAI(base_url=PROXY_V1, api_key=KEY, max_retries=0, timeout=30)
AN = anthropic.Anthropic(base_url=PROXY_ROOT, api_key=KEY, max_retries=0, timeout=30)
# The key goes in `x-goog-api-key`; the SDK puts a custom base URL on `/v1` unless told `v1beta`.
GE = genai.Client(
    api_key=KEY,
    http_options=genai_types.HttpOptions(
        base_url=PROXY_ROOT,
        api_version="v1beta",
        timeout=30_000,
        retry_options=genai_types.HttpRetryOptions(attempts=1),
    ),
)


# --- OpenAI SDK: the shared pieces --------------------------------------------------------------


def openai_text(model: str, expected_text: str) -> None:
    raw = OA.chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": "Say hello."}]
    )
    completion = raw.parse()
    body = dump(completion)
    expect_eq(completion.object, "chat.completion", f"object in {body}")
    expect_eq(completion.model, model, f"model (the target that served) in {body}")
    expect_eq(raw.headers.get("x-switchyard-target"), model, "x-switchyard-target header")
    expect_eq(len(completion.choices), 1, f"number of choices in {body}")
    choice = completion.choices[0]
    expect_eq(choice.message.role, "assistant", f"choices[0].message.role in {body}")
    expect_eq(choice.message.content, expected_text, f"choices[0].message.content in {body}")
    expect_eq(choice.finish_reason, "stop", f"choices[0].finish_reason in {body}")
    expect(completion.usage is not None, f"no usage in {body}")
    expect(completion.usage.prompt_tokens > 0, f"usage.prompt_tokens is not positive in {body}")
    expect(
        completion.usage.total_tokens
        == completion.usage.prompt_tokens + completion.usage.completion_tokens,
        f"usage.total_tokens is not prompt + completion in {body}",
    )


def openai_text_stream(model: str, expected_text: str, include_usage: bool = False) -> None:
    extra = {"stream_options": {"include_usage": True}} if include_usage else {}
    stream = OA.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Say hello."}], stream=True, **extra
    )
    deltas: list[str] = []
    finish_reasons: list[str] = []
    models: set[str] = set()
    usage = None
    chunks = 0
    for chunk in stream:
        chunks += 1
        expect_eq(chunk.object, "chat.completion.chunk", f"object of chunk {dump(chunk)}")
        models.add(chunk.model)
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                deltas.append(choice.delta.content)
            if choice.finish_reason:
                finish_reasons.append(choice.finish_reason)
    expect(chunks > 0, "the stream had no chunks")
    expect_eq(models, {model}, "model of every chunk (the target that served)")
    expect_eq("".join(deltas), expected_text, f"concatenated content deltas ({len(deltas)} deltas)")
    expect_eq(finish_reasons, ["stop"], "finish_reason across the stream (exactly one, last)")
    if include_usage:
        expect(usage is not None, "stream_options.include_usage was set but no chunk carried usage")
        expect(usage.prompt_tokens > 0, f"usage.prompt_tokens is not positive: {dump(usage)}")


def check_openai_tool_call(tool_calls: Any, where: str) -> None:
    expect(tool_calls, f"no tool_calls in {where}")
    expect_eq(len(tool_calls), 1, f"number of tool_calls in {where}")
    call = tool_calls[0]
    expect(bool(call.id), f"tool_calls[0].id is empty in {where}")
    expect_eq(call.type, "function", f"tool_calls[0].type in {where}")
    expect_eq(call.function.name, TOOL_NAME, f"tool_calls[0].function.name in {where}")
    expect(isinstance(call.function.arguments, str), f"arguments are not a JSON string in {where}")
    try:
        arguments = json.loads(call.function.arguments)
    except json.JSONDecodeError as error:
        raise CheckFailed(f"tool_calls[0].function.arguments is not JSON ({error}) in {where}") from None
    expect_eq(arguments, TOOL_ARGS, f"tool_calls[0].function.arguments in {where}")


def openai_tool(model: str) -> None:
    completion = OA.chat.completions.create(
        model=model, messages=[{"role": "user", "content": QUESTION}], tools=OPENAI_TOOLS
    )
    body = dump(completion)
    expect_eq(completion.model, model, f"model (the target that served) in {body}")
    choice = completion.choices[0]
    expect_eq(choice.finish_reason, "tool_calls", f"choices[0].finish_reason in {body}")
    expect(not choice.message.content, f"unexpected text beside the tool call in {body}")
    check_openai_tool_call(choice.message.tool_calls, body)


def openai_tool_stream(model: str) -> None:
    stream = OA.chat.completions.create(
        model=model, messages=[{"role": "user", "content": QUESTION}], tools=OPENAI_TOOLS, stream=True
    )
    calls: dict[int, dict[str, str]] = {}
    finish_reasons: list[str] = []
    models: set[str] = set()
    for chunk in stream:
        models.add(chunk.model)
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"id": "", "type": "", "name": "", "arguments": ""})
                call["id"] += delta.id or ""
                call["type"] = delta.type or call["type"]
                if delta.function is not None:
                    call["name"] += delta.function.name or ""
                    call["arguments"] += delta.function.arguments or ""
            if choice.finish_reason:
                finish_reasons.append(choice.finish_reason)
    expect_eq(models, {model}, "model of every chunk (the target that served)")
    expect_eq(finish_reasons, ["tool_calls"], "finish_reason across the stream")
    expect_eq(sorted(calls), [0], f"tool call indexes in the stream ({calls})")
    call = calls[0]
    expect(bool(call["id"]), f"the streamed tool call has no id: {call}")
    expect_eq(call["type"], "function", "streamed tool call type")
    expect_eq(call["name"], TOOL_NAME, "streamed tool call name")
    try:
        arguments = json.loads(call["arguments"])
    except json.JSONDecodeError as error:
        raise CheckFailed(f"streamed arguments {call['arguments']!r} are not JSON ({error})") from None
    expect_eq(arguments, TOOL_ARGS, "streamed tool call arguments")


def openai_tool_stream_helper(model: str) -> None:
    """The SDK's own accumulator: `chat.completions.stream(...)` and `get_final_completion()`."""
    with OA.chat.completions.stream(
        model=model, messages=[{"role": "user", "content": QUESTION}], tools=OPENAI_TOOLS
    ) as stream:
        done = [e for e in stream if e.type == "tool_calls.function.arguments.done"]
        final = stream.get_final_completion()
    body = dump(final)
    expect_eq(len(done), 1, "tool_calls.function.arguments.done events")
    expect_eq(done[0].name, TOOL_NAME, "name in the arguments.done event")
    expect_eq(final.model, model, f"model of the final completion {body}")
    expect_eq(final.choices[0].finish_reason, "tool_calls", f"finish_reason of {body}")
    check_openai_tool_call(final.choices[0].message.tool_calls, body)


def openai_tool_result(model: str, expected_text: str) -> None:
    """The second turn of a tool loop: the assistant's call and the tool's answer go back."""
    completion = OA.chat.completions.create(
        model=model,
        tools=OPENAI_TOOLS,
        messages=[
            {"role": "user", "content": QUESTION},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_sdk_1",
                        "type": "function",
                        "function": {"name": TOOL_NAME, "arguments": json.dumps(TOOL_ARGS)},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_sdk_1", "content": '{"temperature": 21}'},
        ],
    )
    body = dump(completion)
    expect_eq(completion.model, model, f"model in {body}")
    expect_eq(completion.choices[0].message.content, expected_text, f"content in {body}")
    expect_eq(completion.choices[0].finish_reason, "stop", f"finish_reason in {body}")


# --- Anthropic SDK: the shared pieces -----------------------------------------------------------


def anthropic_text(model: str, expected_text: str) -> None:
    raw = AN.messages.with_raw_response.create(
        model=model, max_tokens=256, messages=[{"role": "user", "content": "Say hello."}]
    )
    message = raw.parse()
    body = dump(message)
    expect_eq(message.type, "message", f"type in {body}")
    expect_eq(message.role, "assistant", f"role in {body}")
    expect_eq(message.model, model, f"model (the target that served) in {body}")
    expect_eq(raw.headers.get("x-switchyard-target"), model, "x-switchyard-target header")
    expect(bool(message.id), f"empty id in {body}")
    expect_eq([b.type for b in message.content], ["text"], f"content block types in {body}")
    expect_eq(message.content[0].text, expected_text, f"content[0].text in {body}")
    expect_eq(message.stop_reason, "end_turn", f"stop_reason in {body}")
    expect(message.usage.input_tokens > 0, f"usage.input_tokens is not positive in {body}")
    expect(message.usage.output_tokens > 0, f"usage.output_tokens is not positive in {body}")


def anthropic_text_stream(model: str, expected_text: str) -> None:
    with AN.messages.stream(
        model=model, max_tokens=256, messages=[{"role": "user", "content": "Say hello."}]
    ) as stream:
        deltas = list(stream.text_stream)
        final = stream.get_final_message()
    body = dump(final)
    expect_eq("".join(deltas), expected_text, f"concatenated text_stream ({len(deltas)} deltas)")
    expect_eq(final.model, model, f"model of get_final_message() (the target that served) {body}")
    expect_eq([b.type for b in final.content], ["text"], f"final content block types in {body}")
    expect_eq(final.content[0].text, expected_text, f"final content[0].text in {body}")
    expect_eq(final.stop_reason, "end_turn", f"final stop_reason in {body}")
    expect(final.usage.input_tokens > 0, f"final usage.input_tokens is not positive in {body}")
    expect(final.usage.output_tokens > 0, f"final usage.output_tokens is not positive in {body}")


def anthropic_raw_events(model: str) -> None:
    """`create(stream=True)`: the raw event sequence, as SDK event objects."""
    stream = AN.messages.create(
        model=model, max_tokens=256, messages=[{"role": "user", "content": "Say hello."}], stream=True
    )
    events = [event for event in stream]
    types = [e.type for e in events]
    expect(types and types[0] == "message_start", f"the stream does not open with message_start: {types}")
    expect_eq(types[-1], "message_stop", f"last event of {types}")
    expect_eq(events[0].message.model, model, "message_start.message.model")
    expect("message_delta" in types, f"no message_delta in {types}")
    for required in ("content_block_start", "content_block_delta", "content_block_stop"):
        expect(required in types, f"no {required} in {types}")
    deltas = [e for e in events if e.type == "message_delta"]
    expect_eq(deltas[-1].delta.stop_reason, "end_turn", "message_delta.delta.stop_reason")


def check_tool_use(message: Any, where: str) -> None:
    blocks = [b for b in message.content if b.type == "tool_use"]
    expect_eq(len(blocks), 1, f"number of tool_use blocks in {where}")
    block = blocks[0]
    expect(bool(block.id), f"tool_use.id is empty in {where}")
    expect_eq(block.name, TOOL_NAME, f"tool_use.name in {where}")
    expect_eq(block.input, TOOL_ARGS, f"tool_use.input in {where}")
    expect_eq(message.stop_reason, "tool_use", f"stop_reason in {where}")


def anthropic_tool(model: str) -> None:
    message = AN.messages.create(
        model=model, max_tokens=256, messages=[{"role": "user", "content": QUESTION}], tools=ANTHROPIC_TOOLS
    )
    body = dump(message)
    expect_eq(message.model, model, f"model (the target that served) in {body}")
    check_tool_use(message, body)


def anthropic_tool_stream(model: str) -> None:
    with AN.messages.stream(
        model=model, max_tokens=256, messages=[{"role": "user", "content": QUESTION}], tools=ANTHROPIC_TOOLS
    ) as stream:
        events = list(stream)
        final = stream.get_final_message()
    body = dump(final)
    partial = "".join(e.partial_json for e in events if e.type == "input_json")
    try:
        streamed = json.loads(partial)
    except json.JSONDecodeError as error:
        raise CheckFailed(f"the input_json deltas {partial!r} are not JSON ({error})") from None
    expect_eq(streamed, TOOL_ARGS, "concatenated input_json deltas")
    expect_eq(final.model, model, f"model of get_final_message() (the target that served) {body}")
    check_tool_use(final, body)


def anthropic_tool_result(model: str, expected_text: str) -> None:
    """The second turn of a tool loop: the tool_use block and its tool_result go back."""
    message = AN.messages.create(
        model=model,
        max_tokens=256,
        tools=ANTHROPIC_TOOLS,
        messages=[
            {"role": "user", "content": QUESTION},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_sdk_1", "name": TOOL_NAME, "input": TOOL_ARGS}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_sdk_1", "content": '{"temperature": 21}'}],
            },
        ],
    )
    body = dump(message)
    expect_eq(message.model, model, f"model in {body}")
    expect_eq([b.type for b in message.content], ["text"], f"content block types in {body}")
    expect_eq(message.content[0].text, expected_text, f"content[0].text in {body}")


# --- the cases ----------------------------------------------------------------------------------

# OpenAI SDK, OpenAI-dialect upstream.
case("openai sdk: chat, non-streaming")(lambda: openai_text("oa/gpt-text", OA_TEXT))
case("openai sdk: chat, streaming")(lambda: openai_text_stream("oa/gpt-text", OA_TEXT))
case("openai sdk: chat, streaming with include_usage")(
    lambda: openai_text_stream("oa/gpt-text", OA_TEXT, include_usage=True)
)
case("openai sdk: tool call, non-streaming")(lambda: openai_tool("oa/gpt-tool"))
case("openai sdk: tool call, streaming")(lambda: openai_tool_stream("oa/gpt-tool"))
case("openai sdk: tool call, stream helper + get_final_completion")(
    lambda: openai_tool_stream_helper("oa/gpt-tool")
)
case("openai sdk: tool result turn")(lambda: openai_tool_result("oa/gpt-text", OA_TEXT))

# Anthropic SDK, Anthropic-dialect upstream.
case("anthropic sdk: messages.create, non-streaming")(lambda: anthropic_text("an/claude-text", AN_TEXT))
case("anthropic sdk: messages.stream + get_final_message")(
    lambda: anthropic_text_stream("an/claude-text", AN_TEXT)
)
case("anthropic sdk: messages.create(stream=True) events")(lambda: anthropic_raw_events("an/claude-text"))
case("anthropic sdk: tool use, non-streaming")(lambda: anthropic_tool("an/claude-tool"))
case("anthropic sdk: tool use, streaming")(lambda: anthropic_tool_stream("an/claude-tool"))
case("anthropic sdk: tool result turn")(lambda: anthropic_tool_result("an/claude-text", AN_TEXT))

# Cross-dialect: each SDK served by the other dialect's upstream.
case("openai sdk -> anthropic upstream: chat, non-streaming")(lambda: openai_text("an/claude-text", AN_TEXT))
case("openai sdk -> anthropic upstream: chat, streaming")(lambda: openai_text_stream("an/claude-text", AN_TEXT))
case("openai sdk -> anthropic upstream: tool call, non-streaming")(lambda: openai_tool("an/claude-tool"))
case("openai sdk -> anthropic upstream: tool call, streaming")(lambda: openai_tool_stream("an/claude-tool"))
case("openai sdk -> anthropic upstream: tool result turn")(lambda: openai_tool_result("an/claude-text", AN_TEXT))
case("anthropic sdk -> openai upstream: messages.create, non-streaming")(
    lambda: anthropic_text("oa/gpt-text", OA_TEXT)
)
case("anthropic sdk -> openai upstream: messages.stream + get_final_message")(
    lambda: anthropic_text_stream("oa/gpt-text", OA_TEXT)
)
case("anthropic sdk -> openai upstream: messages.create(stream=True) events")(
    lambda: anthropic_raw_events("oa/gpt-text")
)
case("anthropic sdk -> openai upstream: tool use, non-streaming")(lambda: anthropic_tool("oa/gpt-tool"))
case("anthropic sdk -> openai upstream: tool use, streaming")(lambda: anthropic_tool_stream("oa/gpt-tool"))
case("anthropic sdk -> openai upstream: tool result turn")(lambda: anthropic_tool_result("oa/gpt-text", OA_TEXT))


# OpenAI SDK, Responses API (`/v1/responses`), translated to each upstream dialect.


def responses_text(model: str, expected_text: str) -> None:
    raw = OA.responses.with_raw_response.create(model=model, input="Say hello.", instructions="Be brief.")
    response = raw.parse()
    body = dump(response)
    expect_eq(response.object, "response", f"object in {body}")
    expect_eq(response.status, "completed", f"status in {body}")
    expect_eq(response.model, model, f"model (the target that served) in {body}")
    expect_eq(raw.headers.get("x-switchyard-target"), model, "x-switchyard-target header")
    expect_eq(response.output_text, expected_text, f"output_text in {body}")
    expect(response.usage is not None and response.usage.input_tokens > 0, f"usage in {body}")


def responses_text_stream(model: str, expected_text: str) -> None:
    with OA.responses.stream(model=model, input=[{"role": "user", "content": "Say hello."}]) as stream:
        deltas: list[str] = []
        sequence: list[int] = []
        kinds: list[str] = []
        for event in stream:
            kinds.append(event.type)
            sequence.append(event.sequence_number)
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    expect_eq("".join(deltas), expected_text, f"concatenated output_text deltas ({len(deltas)})")
    expect_eq(sequence, sorted(set(sequence)), "sequence_number strictly increasing")
    expect_eq(kinds[0], "response.created", f"first event of {kinds}")
    expect_eq(kinds[-1], "response.completed", f"last event of {kinds}")
    expect_eq(final.status, "completed", f"final status in {dump(final)}")
    expect_eq(final.model, model, f"final model in {dump(final)}")
    expect_eq(final.output_text, expected_text, f"final output_text in {dump(final)}")


def responses_tool(model: str) -> None:
    tools = [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                "required": ["city"],
            },
        }
    ]
    response = OA.responses.create(model=model, input="Weather in Paris?", tools=tools)
    calls = [item for item in response.output if item.type == "function_call"]
    expect_eq(len(calls), 1, f"function_call items in {dump(response)}")
    expect_eq(calls[0].name, "get_weather", "function name")
    expect_eq(json.loads(calls[0].arguments), {"city": "Paris", "unit": "celsius"}, "arguments")
    expect(calls[0].call_id, f"call_id in {dump(calls[0])}")


case("openai sdk: responses.create -> chat upstream")(lambda: responses_text("oa/gpt-text", OA_TEXT))
case("openai sdk: responses.stream -> chat upstream")(lambda: responses_text_stream("oa/gpt-text", OA_TEXT))
case("openai sdk: responses.create -> anthropic upstream")(lambda: responses_text("an/claude-text", AN_TEXT))
case("openai sdk: responses.stream -> anthropic upstream")(
    lambda: responses_text_stream("an/claude-text", AN_TEXT)
)
case("openai sdk: responses.create function call -> chat upstream")(lambda: responses_tool("oa/gpt-tool"))
case("openai sdk: responses.create function call -> anthropic upstream")(lambda: responses_tool("an/claude-tool"))


# A combo whose first target is down: `model` names the target that really served.
@case("openai sdk: combo falls back, model names the target that served")
def _() -> None:
    raw = OA.chat.completions.with_raw_response.create(
        model="sdk-fallback", messages=[{"role": "user", "content": "Say hello."}]
    )
    completion = raw.parse()
    expect_eq(completion.model, "an/claude-text", f"model in {dump(completion)}")
    expect_eq(raw.headers.get("x-switchyard-target"), "an/claude-text", "x-switchyard-target header")
    expect_eq(completion.choices[0].message.content, AN_TEXT, "content")


@case("anthropic sdk: combo falls back, streaming, model names the target that served")
def _() -> None:
    with AN.messages.stream(
        model="sdk-fallback", max_tokens=256, messages=[{"role": "user", "content": "Say hello."}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    expect_eq(final.model, "an/claude-text", f"model in {dump(final)}")
    expect_eq(text, AN_TEXT, "streamed text")


def retried_stream(messages: list[dict[str, str]], tries: int) -> tuple[str, int]:
    """What a client that retries does (aider does; the SDKs never retry an error that arrives
    after a 200): read the stream, and when it breaks mid-answer, send the same conversation
    again, up to `tries` times. The whole answer's text, and how many tries it took."""
    for attempt in range(1, tries + 1):
        deltas: list[str] = []
        try:
            stream = OA.chat.completions.create(model="sdk-cutting", messages=messages, stream=True)
            finished = False
            for chunk in stream:
                for choice in chunk.choices:
                    if choice.delta.content:
                        deltas.append(choice.delta.content)
                    finished |= choice.finish_reason == "stop"
            expect(finished, f"try {attempt}: a stream that ends without a finish reason")
            return "".join(deltas), attempt
        except openai.APIError as error:
            # The terminal error event of a stream that broke after its first text.
            if not deltas:
                raise CheckFailed(f"try {attempt}: an error before any text: {error}") from error
    raise CheckFailed(f"no whole answer in {tries} tries")


@case("openai sdk: a client that retries a broken stream gets the whole answer on its first retry, and its next turn too")
def _() -> None:
    conversation = [{"role": "user", "content": "Tell me something worth retrying for."}]
    text, tries = retried_stream(conversation, 3)
    expect_eq(text, OA_TEXT, "the whole answer")
    expect_eq(tries, 2, "tries: the retry goes where the stream did not break")
    conversation += [{"role": "assistant", "content": text}, {"role": "user", "content": "And then?"}]
    text, tries = retried_stream(conversation, 3)
    expect_eq((text, tries), (OA_TEXT, 1), "the next turn, where the session went")


def retried_anthropic_stream(messages: list[dict[str, str]], tries: int) -> tuple[str, int]:
    """`retried_stream` with the Anthropic SDK: its stream raises on the `error` event of a
    stream that broke mid-answer, and the same conversation is sent again."""
    for attempt in range(1, tries + 1):
        deltas: list[str] = []
        try:
            with AN.messages.stream(model="sdk-cutting-an", max_tokens=256, messages=messages) as stream:
                for text in stream.text_stream:
                    deltas.append(text)
                final = stream.get_final_message()
            expect_eq(final.stop_reason, "end_turn", f"try {attempt}: stop_reason")
            return "".join(deltas), attempt
        except anthropic.APIError as error:
            # The error of a stream: its body was the stream, read already.
            if not deltas:
                raise CheckFailed(f"try {attempt}: an error before any text: {error}") from error
    raise CheckFailed(f"no whole answer in {tries} tries")


@case("anthropic sdk: a client that retries a broken stream gets the whole answer on its first retry, and its next turn too")
def _() -> None:
    conversation = [{"role": "user", "content": "Tell me something worth retrying for, in Anthropic's dialect."}]
    text, tries = retried_anthropic_stream(conversation, 3)
    expect_eq((text, tries), (OA_TEXT, 2), "the retry goes where the stream did not break")
    conversation += [{"role": "assistant", "content": text}, {"role": "user", "content": "And then?"}]
    text, tries = retried_anthropic_stream(conversation, 3)
    expect_eq((text, tries), (OA_TEXT, 1), "the next turn, where the session went")


@case("openai sdk: models.list")
def _() -> None:
    ids = {m.id for m in OA.models.list()}
    for expected in ("sdk-fallback", "oa/gpt-text"):
        expect(expected in ids, f"{expected!r} not in models.list(): {sorted(ids)}")


@case("anthropic sdk: models.list")
def _() -> None:
    ids = {m.id for m in AN.models.list()}
    for expected in ("sdk-fallback", "oa/gpt-text"):
        expect(expected in ids, f"{expected!r} not in models.list(): {sorted(ids)}")


@case("openai sdk: a wrong key is a 401 AuthenticationError")
def _() -> None:
    client = openai.OpenAI(base_url=PROXY_V1, api_key="sy-wrong", max_retries=0, timeout=30)
    try:
        client.chat.completions.create(model="oa/gpt-text", messages=[{"role": "user", "content": "hi"}])
    except openai.AuthenticationError as error:
        expect_eq(error.status_code, 401, "status")
        return
    raise CheckFailed("a wrong key was accepted")


@case("anthropic sdk: a wrong key is a 401 AuthenticationError")
def _() -> None:
    client = anthropic.Anthropic(base_url=PROXY_ROOT, api_key="sy-wrong", max_retries=0, timeout=30)
    try:
        client.messages.create(model="an/claude-text", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    except anthropic.AuthenticationError as error:
        expect_eq(error.status_code, 401, "status")
        return
    raise CheckFailed("a wrong key was accepted")


# --- running ------------------------------------------------------------------------------------



# google-genai SDK (`/v1beta/models/{model}:...`): a Gemini upstream (passthrough), and the
# Anthropic and OpenAI ones (translated). The model in the answer is the target that served.

GEMINI_TOOL = genai_types.Tool(
    function_declarations=[
        genai_types.FunctionDeclaration(
            name=TOOL_NAME,
            description="Current weather for a city.",
            parameters_json_schema=OPENAI_TOOLS[0]["function"]["parameters"],
        )
    ]
)


def gemini_text(model: str, expected_text: str) -> None:
    response = GE.models.generate_content(
        model=model,
        contents="Say hello.",
        config=genai_types.GenerateContentConfig(system_instruction="Be brief.", temperature=0.5),
    )
    body = dump(response)
    expect_eq(response.text, expected_text, f"text in {body}")
    expect_eq(response.model_version, model, f"model_version (the target that served) in {body}")
    expect_eq(response.candidates[0].finish_reason, genai_types.FinishReason.STOP, f"finish_reason in {body}")
    usage = response.usage_metadata
    expect(usage is not None and (usage.prompt_token_count or 0) > 0, f"usage_metadata in {body}")
    expect_eq(usage.total_token_count, usage.prompt_token_count + usage.candidates_token_count, f"total in {body}")


def gemini_text_stream(model: str, expected_text: str, served: str | None = None) -> None:
    chunks = list(GE.models.generate_content_stream(model=model, contents="Say hello."))
    model = served or model
    text = "".join(chunk.text or "" for chunk in chunks)
    expect_eq(text, expected_text, f"concatenated text of {len(chunks)} chunks")
    expect(len(chunks) > 1, f"streamed in pieces: {[dump(c) for c in chunks]}")
    expect(all(c.model_version == model for c in chunks), f"every chunk names {model}")
    last = chunks[-1]
    expect_eq(last.candidates[0].finish_reason, genai_types.FinishReason.STOP, f"last chunk {dump(last)}")
    expect(last.usage_metadata is not None and last.usage_metadata.total_token_count > 0, f"usage in {dump(last)}")


def gemini_count_tokens(model: str) -> None:
    counted = GE.models.count_tokens(model=model, contents="How many tokens is this sentence, roughly?")
    expect(counted.total_tokens is not None and counted.total_tokens > 0, f"total_tokens in {dump(counted)}")


def gemini_tool(model: str, stream: bool) -> None:
    config = genai_types.GenerateContentConfig(
        tools=[GEMINI_TOOL],
        automatic_function_calling=genai_types.AutomaticFunctionCallingConfig(disable=True),
    )
    if stream:
        chunks = list(GE.models.generate_content_stream(model=model, contents=QUESTION, config=config))
        calls = [call for chunk in chunks for call in (chunk.function_calls or [])]
        where = str([dump(c) for c in chunks])
    else:
        response = GE.models.generate_content(model=model, contents=QUESTION, config=config)
        calls = response.function_calls or []
        where = dump(response)
    expect_eq(len(calls), 1, f"function calls in {where}")
    expect_eq(calls[0].name, TOOL_NAME, f"function name in {where}")
    expect_eq(calls[0].args, TOOL_ARGS, f"function args in {where}")


def gemini_tool_result(model: str, expected_text: str) -> None:
    contents = [
        genai_types.Content(role="user", parts=[genai_types.Part(text=QUESTION)]),
        genai_types.Content(
            role="model",
            parts=[genai_types.Part(function_call=genai_types.FunctionCall(name=TOOL_NAME, args=TOOL_ARGS))],
        ),
        genai_types.Content(
            role="user",
            parts=[
                genai_types.Part(
                    function_response=genai_types.FunctionResponse(name=TOOL_NAME, response={"output": "18 degrees, sunny"})
                )
            ],
        ),
    ]
    config = genai_types.GenerateContentConfig(tools=[GEMINI_TOOL])
    response = GE.models.generate_content(model=model, contents=contents, config=config)
    expect_eq(response.text, expected_text, f"text in {dump(response)}")


for target, text in [("ge/gemini-text", GE_TEXT), ("an/claude-text", AN_TEXT), ("oa/gpt-text", OA_TEXT)]:
    case(f"google-genai sdk -> {target}: generate_content")(lambda t=target, x=text: gemini_text(t, x))
    case(f"google-genai sdk -> {target}: generate_content_stream")(lambda t=target, x=text: gemini_text_stream(t, x))
    case(f"google-genai sdk -> {target}: count_tokens")(lambda t=target: gemini_count_tokens(t))
    case(f"google-genai sdk -> {target}: function call result turn")(lambda t=target, x=text: gemini_tool_result(t, x))
for target in ["ge/gemini-tool", "an/claude-tool", "oa/gpt-tool"]:
    case(f"google-genai sdk -> {target}: function call")(lambda t=target: gemini_tool(t, stream=False))
    case(f"google-genai sdk -> {target}: function call, streaming")(lambda t=target: gemini_tool(t, stream=True))
case("google-genai sdk: fallback after a 503")(
    lambda: gemini_text_stream("sdk-fallback", AN_TEXT, served="an/claude-text")
)


# --- embeddings ---------------------------------------------------------------------------------
#
# `POST /v1/embeddings` (OpenAI SDK) and `:batchEmbedContents` (google-genai SDK: the Gemini
# Developer API client sends every `embed_content`, one content or many, as a batch), through
# combos to an OpenAI-dialect target (`emb/text-embedding-3-small`) and a Gemini one
# (`ge/gemini-embedding-001`), translated when the dialects differ. The mock's vectors are a
# pure function of (upstream model, text, dimensions), recomputed here, so a vector shows which
# model made it for which text.

EMBED_OA_MODEL = "text-embedding-3-small"
EMBED_GE_MODEL = "gemini-embedding-001"
# Combo -> (the target that serves it, its upstream model): see tests/sdk/run.
EMBED_COMBOS = {
    "sdk-embed": ("emb/" + EMBED_OA_MODEL, EMBED_OA_MODEL),
    "sdk-gembed": ("ge/" + EMBED_GE_MODEL, EMBED_GE_MODEL),
}
MOCK_DIMENSIONS = 8  # switchyard_testkit::DEFAULT_DIMENSIONS


def f32(x: float) -> float:
    """`x` rounded to the nearest IEEE single, as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def mock_embedding(model: str, text: str, dimensions: int = MOCK_DIMENSIONS) -> list[float]:
    """`switchyard_testkit::embedding` (crates/switchyard-testkit/src/embedding.rs), bit for bit:
    component i is the first four bytes (little-endian u32) of SHA-256(len(model) model
    len(text) text i), lengths and i as little-endian u64s, mapped onto [-1, 1]; then the
    vector is scaled to unit length in f64 and each component rounded to f32."""
    raw: list[float] = []
    for i in range(max(dimensions, 1)):
        digest = hashlib.sha256()
        for field in (model.encode(), text.encode()):
            digest.update(struct.pack("<Q", len(field)))
            digest.update(field)
        digest.update(struct.pack("<Q", i))
        word = struct.unpack("<I", digest.digest()[:4])[0]
        raw.append(word / 0xFFFFFFFF * 2.0 - 1.0)
    squares = 0.0
    for x in raw:  # a plain left fold, as Rust's `sum`: Python's `sum` compensates (3.12+)
        squares += x * x
    norm = math.sqrt(squares)
    return [f32(x / norm if norm > 0.0 else x) for x in raw]


def check_vectors(got: list[list[float]], model: str, texts: list[str], dimensions: int, where: str) -> None:
    """`got` are the mock's vectors of `model` for `texts`: as many, each `dimensions` long,
    of unit norm, and exactly the mock's (compared as f32s: a JSON float is the f32's shortest
    decimal, which Python reads as the nearest f64)."""
    expect_eq(len(got), len(texts), f"number of vectors in {where}")
    for at, (vector, text) in enumerate(zip(got, texts)):
        expect_eq(len(vector), dimensions, f"length of vector {at} ({text!r}) in {where}")
        norm = math.sqrt(math.fsum(x * x for x in vector))
        expect(abs(norm - 1.0) < 1e-5, f"vector {at} ({text!r}) has norm {norm}, not 1, in {where}")
        expect_eq([f32(x) for x in vector], mock_embedding(model, text, dimensions), f"vector {at} ({text!r}) of {model} in {where}")
    if len(set(map(tuple, got))) != len(set(texts)):
        raise CheckFailed(f"different texts got the same vector in {where}")


def check_openai_model(model: str, served: str, where: str) -> None:
    """`model` of an OpenAI-shaped embeddings answer names the target that served."""
    expect_eq(model, served, f"model (the target that served) in {where}")


def openai_embed(combo: str, texts: list[str], **options: Any) -> Any:
    """`embeddings.create` through `combo`; checks what came back and returns the response.
    With no `encoding_format` the SDK asks for base64 and decodes it: the raw answer must
    then carry base64 strings (the SDK would take floats silently)."""
    served, upstream = EMBED_COMBOS[combo]
    dimensions = options.get("dimensions", MOCK_DIMENSIONS)
    raw = OA.embeddings.with_raw_response.create(model=combo, input=texts, **options)
    response = raw.parse()
    wire = raw.http_response.json()
    where = f"the answer {json.dumps(wire)[:1500]}"
    expect_eq(raw.headers.get("x-switchyard-target"), served, "x-switchyard-target header")
    expect_eq(response.object, "list", f"object in {where}")
    check_openai_model(response.model, served, where)
    expect_eq([d.index for d in response.data], list(range(len(texts))), f"indexes in {where}")
    expect(all(d.object == "embedding" for d in response.data), f"data[].object in {where}")
    wanted = "string" if options.get("encoding_format", "base64") == "base64" else "list"
    kinds = ["string" if isinstance(d.get("embedding"), str) else "list" for d in wire.get("data", [])]
    expect_eq(kinds, [wanted] * len(texts), f"the wire form of data[].embedding (encoding_format) in {where}")
    check_vectors([d.embedding for d in response.data], upstream, texts, dimensions, where)
    # Gemini's embeddings answers carry no usage (nor do the mock's): translated, it is 0.
    expect(response.usage is not None, f"no usage in {where}")
    if served.startswith("emb/"):
        expect(response.usage.prompt_tokens > 0, f"usage.prompt_tokens is not positive in {where}")
    else:
        expect(response.usage.prompt_tokens >= 0, f"usage.prompt_tokens is negative in {where}")
    expect_eq(response.usage.total_tokens, response.usage.prompt_tokens, f"usage.total_tokens in {where}")
    return raw


for combo in EMBED_COMBOS:
    case(f"openai sdk embeddings -> {combo}: a batch, base64 (the SDK's default)")(
        lambda c=combo: openai_embed(c, ["alpha", "beta"])
    )
    case(f"openai sdk embeddings -> {combo}: a batch, dimensions=4, encoding_format=float")(
        lambda c=combo: openai_embed(c, ["alpha", "beta"], dimensions=4, encoding_format="float")
    )
    case(f"openai sdk embeddings -> {combo}: one string, dimensions=4, base64")(
        lambda c=combo: openai_embed(c, ["gamma"], dimensions=4)
    )


@case("openai sdk embeddings: the same text gives the same vector, another text another")
def _() -> None:
    first = OA.embeddings.create(model="sdk-embed", input=["alpha", "beta", "alpha"]).data
    again = OA.embeddings.create(model="sdk-embed", input="alpha").data
    expect_eq(first[2].embedding, first[0].embedding, "alpha twice in one batch")
    expect_eq(again[0].embedding, first[0].embedding, "alpha in another request")
    expect(first[1].embedding != first[0].embedding, "alpha and beta got the same vector")
    other = OA.embeddings.create(model="sdk-gembed", input="alpha").data
    expect(other[0].embedding != first[0].embedding, "two models gave alpha the same vector")


@case("openai sdk embeddings: a combo whose first key is rate-limited falls back to the model's other key")
def _() -> None:
    # mock.toml: `text-embedding-3-large` answers its first request 429 (retry-after 30), then
    # normally; `emb` has two keys, so the combo's one target is tried on the second.
    raw = OA.embeddings.with_raw_response.create(model="sdk-embed-limited", input=["alpha", "beta"])
    response = raw.parse()
    where = dump(response)
    expect_eq(raw.headers.get("x-switchyard-target"), "emb/text-embedding-3-large", "x-switchyard-target header")
    expect_eq(raw.headers.get("x-switchyard-attempts"), "2", "x-switchyard-attempts header (the 429, then the other key)")
    check_openai_model(response.model, "emb/text-embedding-3-large", where)
    check_vectors([d.embedding for d in response.data], "text-embedding-3-large", ["alpha", "beta"], MOCK_DIMENSIONS, where)
    # The first key is benched for the model now: the next request goes straight to the other.
    raw = OA.embeddings.with_raw_response.create(model="sdk-embed-limited", input="gamma")
    expect_eq(raw.headers.get("x-switchyard-attempts"), "1", "x-switchyard-attempts of the next request")
    check_vectors([d.embedding for d in raw.parse().data], "text-embedding-3-large", ["gamma"], MOCK_DIMENSIONS, "the next request")


@case("openai sdk embeddings: an empty string is a 400 BadRequestError")
def _() -> None:
    try:
        OA.embeddings.create(model="sdk-embed", input="")
    except openai.BadRequestError as error:
        expect_eq(error.status_code, 400, "status")
        return
    raise CheckFailed("an empty input was embedded")


def gemini_embed(combo: str, contents: str | list[str], dimensions: int | None = None) -> None:
    served, upstream = EMBED_COMBOS[combo]
    texts = [contents] if isinstance(contents, str) else contents
    config = genai_types.EmbedContentConfig(
        output_dimensionality=dimensions, task_type="RETRIEVAL_DOCUMENT" if dimensions else None
    )
    response = GE.models.embed_content(model=combo, contents=contents, config=config)
    where = dump(response)
    headers = response.sdk_http_response.headers if response.sdk_http_response else {}
    expect_eq((headers or {}).get("x-switchyard-target"), served, f"x-switchyard-target header of {where}")
    expect(response.embeddings is not None, f"no embeddings in {where}")
    vectors = [e.values for e in response.embeddings]
    check_vectors(vectors, upstream, texts, dimensions or MOCK_DIMENSIONS, where)


for combo, path in [("sdk-embed", "translated"), ("sdk-gembed", "passthrough")]:
    case(f"google-genai sdk embed_content -> {combo} ({path}): one content")(lambda c=combo: gemini_embed(c, "alpha"))
    case(f"google-genai sdk embed_content -> {combo} ({path}): a list of contents")(
        lambda c=combo: gemini_embed(c, ["alpha", "beta", "gamma"])
    )
    case(f"google-genai sdk embed_content -> {combo} ({path}): output_dimensionality=4, task_type")(
        lambda c=combo: gemini_embed(c, ["alpha", "beta"], dimensions=4)
    )


@case("google-genai sdk embed_content -> a provider/model named directly (emb/text-embedding-3-small)")
def _() -> None:
    response = GE.models.embed_content(model="emb/" + EMBED_OA_MODEL, contents=["alpha"])
    where = dump(response)
    check_vectors([e.values for e in response.embeddings or []], EMBED_OA_MODEL, ["alpha"], MOCK_DIMENSIONS, where)


def describe(error: BaseException) -> str:
    if isinstance(error, CheckFailed):
        return str(error)
    if isinstance(error, genai_errors.APIError):
        return f"{type(error).__name__}: HTTP {error.code} {error.status}: {error.message}"
    if isinstance(error, (openai.APIStatusError, anthropic.APIStatusError)):
        return f"{type(error).__name__}: HTTP {error.status_code}: {error.response.text[:2000]}"
    if isinstance(error, (openai.APIConnectionError, anthropic.APIConnectionError)):
        return f"{type(error).__name__}: {error!r} (cause: {error.__cause__!r})"
    # The SDK itself choked on what came back: show where.
    tb = "".join(traceback.format_exception(error)[-6:])
    return f"{type(error).__name__}: {error}\n{tb}"


def main() -> int:
    versions = (
        f"openai {openai.__version__}, anthropic {anthropic.__version__}, google-genai {genai.__version__}"
    )
    cases = [(n, f) for n, f in CASES if not ARGS.only or ARGS.only in n]
    failed: list[str] = []
    for name, fn in cases:
        try:
            fn()
        except Exception as error:  # noqa: BLE001 - every failure is reported, none stops the run
            failed.append(name)
            message = describe(error).rstrip().replace("\n", "\n       ")
            print(f"FAIL  {name}\n       {message}", flush=True)
        else:
            print(f"ok    {name}", flush=True)
    passed = len(cases) - len(failed)
    verdict = "passed" if not failed else f"FAILED ({len(failed)}: {'; '.join(failed)})"
    print(f"sdk check: {passed}/{len(cases)} {verdict} [{versions}, proxy {PROXY_V1}]")
    return 1 if failed or not cases else 0


if __name__ == "__main__":
    sys.exit(main())
