//! Which endpoint a request is for, from its method, path, query and (for the one path two
//! providers share) its headers. A path may start with `/t/{tenant}`, as on gateways that
//! separate tenants by path (Cloudflare's `/v1/{account}/…`): the endpoint is read after it,
//! and the attempt keeps the whole path.

use http::{HeaderMap, Method, Uri};

use crate::dialect::Dialect;
use crate::embedding::Call;

/// Where chatgpt.com's Codex backend serves the Responses API to a subscriber's Codex CLI
/// (`https://chatgpt.com/backend-api/codex/responses`): a provider whose base URL is the mock's
/// `/backend-api/codex` reaches the mock at the same path as the real one.
const CHATGPT_RESPONSES: &str = "/backend-api/codex/responses";

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Route {
    Generate(Target),
    /// OpenAI's `POST /v1/embeddings`, Gemini's `{model}:embedContent` and
    /// `{model}:batchEmbedContents`: an attempt, like a generation.
    Embed(EmbedTarget),
    /// Anthropic's `POST /v1/messages/count_tokens`: answered with the mock's estimate, not an
    /// attempt (it generates nothing and consumes no script).
    CountTokens,
    ListModels(Dialect),
    Unknown,
}

/// A generation request, with what the path already says about it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Target {
    pub(super) dialect: Dialect,
    /// Gemini names the model in the path; the others in the body.
    pub(super) model: Option<String>,
    /// Gemini chooses streaming by method; the others by `"stream": true` in the body.
    pub(super) stream: Option<bool>,
    /// A request the real API would reject before looking at it.
    pub(super) problem: Option<&'static str>,
}

/// An embeddings request, with what the path already says about it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct EmbedTarget {
    pub(super) call: Call,
    /// Gemini names the model in the path; OpenAI in the body.
    pub(super) model: Option<String>,
}

impl EmbedTarget {
    pub(super) fn dialect(&self) -> Dialect {
        match self.call {
            Call::OpenAi => Dialect::OpenAi,
            Call::GeminiOne | Call::GeminiBatch => Dialect::Gemini,
        }
    }
}

impl Route {
    pub(super) fn of(method: &Method, uri: &Uri, headers: &HeaderMap) -> Self {
        let path = uri.path();
        let path = path
            .strip_prefix("/t/")
            .and_then(|tenant| tenant.find('/').map(|end| &tenant[end..]))
            .unwrap_or(path);
        match *method {
            Method::POST if path == "/v1/chat/completions" => Self::body_named(Dialect::OpenAi),
            Method::POST if path == "/v1/messages" => Self::body_named(Dialect::Anthropic),
            Method::POST if path == "/v1/responses" || path == CHATGPT_RESPONSES => {
                Self::body_named(Dialect::Responses)
            }
            Method::POST if path == "/v1/messages/count_tokens" => Self::CountTokens,
            Method::POST if path == "/v1/embeddings" => {
                Self::Embed(EmbedTarget { call: Call::OpenAi, model: None })
            }
            Method::POST => path
                .strip_prefix("/v1beta/models/")
                .or_else(|| path.strip_prefix("/v1/models/"))
                .map_or(Self::Unknown, |call| Self::gemini(call, uri.query())),
            // Anthropic and OpenAI share this path; Anthropic clients always send their version.
            Method::GET if path == "/v1/models" => {
                Self::ListModels(if headers.contains_key("anthropic-version") {
                    Dialect::Anthropic
                } else {
                    Dialect::OpenAi
                })
            }
            Method::GET if path == "/v1beta/models" => Self::ListModels(Dialect::Gemini),
            _ => Self::Unknown,
        }
    }

    fn body_named(dialect: Dialect) -> Self {
        Self::Generate(Target { dialect, model: None, stream: None, problem: None })
    }

    /// `{model}:generateContent`, `{model}:streamGenerateContent`, `{model}:embedContent` or
    /// `{model}:batchEmbedContents`.
    fn gemini(call: &str, query: Option<&str>) -> Self {
        let Some((model, method)) = call.rsplit_once(':') else { return Self::Unknown };
        let embed = |call| Self::Embed(EmbedTarget { call, model: Some(model.to_owned()) });
        let stream = match method {
            "generateContent" => false,
            "streamGenerateContent" => true,
            "embedContent" => return embed(Call::GeminiOne),
            "batchEmbedContents" => return embed(Call::GeminiBatch),
            _ => return Self::Unknown,
        };
        let sse = query.is_some_and(|q| q.split('&').any(|pair| pair == "alt=sse"));
        Self::Generate(Target {
            dialect: Dialect::Gemini,
            model: Some(model.to_owned()),
            stream: Some(stream),
            problem: (stream && !sse)
                .then_some("the mock serves streamGenerateContent only with alt=sse"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(method: &Method, uri: &str, anthropic: bool) -> Route {
        let mut headers = HeaderMap::new();
        if anthropic {
            headers.insert("anthropic-version", "2023-06-01".parse().unwrap());
        }
        Route::of(method, &uri.parse().unwrap(), &headers)
    }

    #[test]
    fn each_dialect_is_recognised_by_its_path() {
        assert_eq!(
            route(&Method::POST, "/v1/chat/completions", false),
            Route::body_named(Dialect::OpenAi)
        );
        assert_eq!(
            route(&Method::POST, "/v1/messages", true),
            Route::body_named(Dialect::Anthropic)
        );
        assert_eq!(
            route(
                &Method::POST,
                "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
                false
            ),
            Route::Generate(Target {
                dialect: Dialect::Gemini,
                model: Some("gemini-2.5-flash".to_owned()),
                stream: Some(true),
                problem: None,
            })
        );
        assert_eq!(route(&Method::GET, "/v1/models", false), Route::ListModels(Dialect::OpenAi));
        assert_eq!(route(&Method::GET, "/v1/models", true), Route::ListModels(Dialect::Anthropic));
        assert_eq!(
            route(&Method::GET, "/v1beta/models", false),
            Route::ListModels(Dialect::Gemini)
        );
        assert_eq!(
            route(&Method::POST, "/v1/responses", false),
            Route::body_named(Dialect::Responses)
        );
        assert_eq!(
            route(&Method::POST, "/backend-api/codex/responses", false),
            Route::body_named(Dialect::Responses),
            "where ChatGPT serves a subscriber's Codex"
        );
        assert_eq!(route(&Method::POST, "/v1/messages/count_tokens", true), Route::CountTokens);
        assert_eq!(route(&Method::POST, "/v1/completions", false), Route::Unknown);
        assert_eq!(
            route(&Method::POST, "/t/acct-a/v1/chat/completions", false),
            Route::body_named(Dialect::OpenAi),
            "behind a tenant's path"
        );
    }

    #[test]
    fn embeddings_are_recognised_in_both_dialects_and_behind_a_tenant() {
        let openai = Route::Embed(EmbedTarget { call: Call::OpenAi, model: None });
        assert_eq!(route(&Method::POST, "/v1/embeddings", false), openai);
        assert_eq!(route(&Method::POST, "/t/acct-a/v1/embeddings", false), openai);
        let gemini = |call| {
            Route::Embed(EmbedTarget { call, model: Some("gemini-embedding-001".to_owned()) })
        };
        for prefix in ["", "/t/acct-a"] {
            assert_eq!(
                route(
                    &Method::POST,
                    &format!("{prefix}/v1beta/models/gemini-embedding-001:embedContent"),
                    false
                ),
                gemini(Call::GeminiOne)
            );
            assert_eq!(
                route(
                    &Method::POST,
                    &format!("{prefix}/v1beta/models/gemini-embedding-001:batchEmbedContents"),
                    false
                ),
                gemini(Call::GeminiBatch)
            );
        }
        assert_eq!(route(&Method::GET, "/v1/embeddings", false), Route::Unknown);
        assert_eq!(route(&Method::POST, "/v1beta/models/g:embedContents", false), Route::Unknown);
    }

    #[test]
    fn a_gemini_stream_without_sse_is_flagged() {
        let Route::Generate(target) =
            route(&Method::POST, "/v1beta/models/m:streamGenerateContent", false)
        else {
            panic!("not a generation route");
        };
        assert!(target.problem.is_some());
    }
}
