//! One attempt of an embeddings request: the second stage of the attempt runner for a request
//! whose work is [`Work::Embed`](super::upstream::Work). It is planned, admitted, classified and
//! charged as any attempt (the three layers, the retry budget, usage, prices and budgets); only
//! what is sent and how the answer is read differ. Never streamed, never hedged, never continued,
//! and its candidates are one embedding space's (`Proxy::route`).

use axum::http::{HeaderMap, header};
use axum::response::IntoResponse as _;
use switchyard_core::outcome::{BodyHint, StreamFault, Upstream};
use switchyard_core::resilience::Attempt;
use switchyard_core::routing::{Candidate, Target};
use switchyard_core::usage::Prices;
use switchyard_providers::dialect::{Dialect, Dropped};
use switchyard_providers::embeddings::{EmbedRequest, decode_answer};
use switchyard_providers::error::ProviderError;
use switchyard_providers::{executor, passthrough};
use tokio::time::Instant;

use super::exhausted::Carried;
use super::upstream::{self, Presented};
use super::{Head, Proxy, Sending, Tried, TriedResult, not_built, scrub, tally, unread};

impl Proxy {
    /// Embeds `request` on `candidate`'s target: sent in the target's dialect (the client's
    /// bytes when it is the client's own), read whole by `first_event`, answered in the client's
    /// shape.
    pub(super) async fn embed_attempt(
        &self,
        sending: &Sending<'_, '_>,
        request: &EmbedRequest<'_>,
        (candidate, target): (&Candidate, &Target),
        secret: Option<&Presented>,
        attempt: Attempt,
        first_event: Instant,
    ) -> Tried {
        let routes = sending.routes;
        let provider =
            routes.provider(&candidate.key.provider).expect("planned providers are configured");
        let model = target.model.as_str();
        let dialect = match embedding_dialect(provider.dialect_for(model)) {
            Ok(dialect) => dialect,
            Err(error) => return *not_built(&error, candidate),
        };
        let passthrough = provider.passthrough && request.passes_to(dialect);
        let mut dropped = Dropped::default();
        let built = upstream::embeddings(
            provider,
            secret,
            (model, dialect),
            request,
            sending.inbound,
            (passthrough, &mut dropped),
        );
        let built = match built {
            Ok(built) => built,
            Err(error) => return *not_built(&error, candidate),
        };
        let carried = Carried::of(passthrough, &dropped);
        let covered = matches!(secret, Some(Presented::Client(_)));
        let prices = if covered { Prices::COVERED } else { tally::prices(target) };
        let mut meter = sending.tally.meter(&candidate.key, prices);
        let wait = first_event.saturating_duration_since(Instant::now());
        let response = match self.send(routes, &candidate.key, built, wait, dialect).await {
            Head::Answer(response) => response,
            head => {
                let mut result = self.not_answered(routes, attempt, head);
                scrub(&mut result, provider, secret);
                return Tried { result, carried };
            }
        };
        let status = response.status.as_u16();
        let wait = first_event.saturating_duration_since(Instant::now());
        let body = match response.into_bytes(wait, executor::MAX_ANSWER).await {
            Ok(body) => body,
            Err(failure) => {
                let outcome = unread(&failure, &attempt);
                return Tried { result: self.failed(routes, attempt, outcome, None), carried };
            }
        };
        let embedded = match decode_answer(dialect, &body, request.input.len()) {
            Ok(embedded) => embedded,
            Err(error) => {
                // A 2xx that is not the vectors asked for: the upstream's fault, like an answer
                // cut short.
                tracing::info!(target = %candidate.key, %error, "embeddings answer unreadable");
                let outcome = Upstream::Stream(StreamFault::Truncated);
                return Tried { result: self.failed(routes, attempt, outcome, None), carried };
            }
        };
        meter.settle(embedded.usage.filter(|u| !u.is_zero()));
        let empty = HeaderMap::new();
        self.record(
            routes,
            attempt,
            Upstream::Response { status, headers: &empty, body: BodyHint::None },
        );
        // Named for the target that served, as a chat answer is.
        let label = target.label();
        let answer = if passthrough {
            passthrough::rewrite_answer_model(dialect, &body, &label, None)
        } else {
            request.encode_answer(&embedded, &label)
        };
        let response = ([(header::CONTENT_TYPE, "application/json")], answer).into_response();
        Tried { result: TriedResult::Served(response, None), carried }
    }
}

/// The dialect a target of `dialect` embeds in: OpenAI's Responses API is served beside its
/// `/v1/embeddings`; Anthropic serves no embeddings.
fn embedding_dialect(dialect: Dialect) -> Result<Dialect, ProviderError> {
    match dialect {
        Dialect::OpenAi | Dialect::Responses => Ok(Dialect::OpenAi),
        Dialect::Gemini => Ok(Dialect::Gemini),
        Dialect::Anthropic => Err(ProviderError::Untranslatable {
            dialect,
            message: "Anthropic's API serves no embeddings: put an OpenAI-compatible or Gemini \
                      embedding model in the combo"
                .into(),
        }),
    }
}
