//! The request log as the UI reads it: newest first, filtered, paged, each with its routing
//! trace.

use serde::{Deserialize, Serialize};
use switchyard_core::UnixMillis;
use switchyard_core::usage::{TokenCounts, Usage};
use switchyard_store::RequestFilter;
use ts_rs::TS;

use super::Services;
use crate::proxy::exhausted::TraceEntry;

/// Which requests to list. Every field is optional.
#[derive(Clone, Debug, Default, Deserialize, TS)]
#[serde(deny_unknown_fields)]
#[ts(export)]
pub struct RequestQuery {
    /// At most this many (1 to 1000) [default 100].
    #[ts(optional)]
    pub limit: Option<usize>,
    /// Skip this many matches first (the next page).
    #[ts(optional)]
    pub offset: Option<usize>,
    /// Only requests for this model (a combo or `provider/model`).
    #[ts(optional)]
    pub model: Option<String>,
    /// Only requests served by this provider.
    #[ts(optional)]
    pub provider: Option<String>,
    /// `ok` (2xx) or `error` (everything else).
    #[ts(optional)]
    pub outcome: Option<Outcome>,
    /// Only requests that took more than one attempt.
    #[ts(optional)]
    pub fallback: Option<bool>,
    /// Only requests of this agent session (its 32 hex digits, or the 12 a trace shows).
    #[ts(optional)]
    pub session: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    Error,
}

/// One request of the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct RequestEntry {
    pub at: UnixMillis,
    /// `openai` or `anthropic`: how the client spoke.
    pub dialect: String,
    /// What the client asked for.
    pub model: String,
    /// `provider/model` that answered, if any did.
    pub served_by: Option<String>,
    pub status: u16,
    pub attempts: u32,
    /// Until the answer was over (a stream's last byte).
    #[ts(type = "number")]
    pub duration_ms: u64,
    /// How a streamed answer ended: `complete`, `broken` (cut, stalled or an upstream error
    /// after the first byte; the client got a terminal error event) or `client_gone`.
    pub outcome: Option<String>,
    /// When the response started: a stream's first real event.
    #[ts(type = "number | null")]
    pub first_byte_ms: Option<u64>,
    /// Tokens summed over the attempts that reported usage; absent when none did. The
    /// trace has each attempt's own (`used` lines).
    pub usage: Option<UsageView>,
    /// What they cost in USD, as a decimal (`"0.00042"`), when every attempt's prices are
    /// known.
    pub cost: Option<String>,
    /// The id of the local key the client presented (`preset` for `SWITCHYARD_API_KEY`);
    /// `null` for the UI's "try it".
    pub local_key: Option<String>,
    /// The combo the requested model resolved to; `null` when it resolved to nothing.
    pub combo: Option<String>,
    /// Served by other than its first attempt (a fallback, or a hedge that won).
    pub fallback: bool,
    /// The agent session it belonged to (32 hex digits), when sessions are on.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub session: Option<String>,
    /// Every candidate skipped or tried, in order.
    pub trace: Vec<TraceEntry>,
}

/// A request's tokens by billing bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, TS)]
#[ts(export)]
pub struct UsageView {
    #[serde(flatten)]
    pub tokens: TokenCounts,
    /// Some count is what the upstream had reported when its answer broke off, not its final
    /// word: a lower bound.
    pub estimated: bool,
}

impl From<Usage> for UsageView {
    fn from(u: Usage) -> Self {
        Self { tokens: TokenCounts::from(u), estimated: u.estimated }
    }
}

impl RequestQuery {
    /// The number of requests asked for, or the problem with it.
    pub fn limit(&self) -> Result<usize, String> {
        let limit = self.limit.unwrap_or(100);
        if (1..=1000).contains(&limit) {
            Ok(limit)
        } else {
            Err(format!("{limit} is out of range; allowed 1..=1000"))
        }
    }

    fn filter(&self) -> RequestFilter {
        RequestFilter {
            model: self.model.clone(),
            provider: self.provider.clone(),
            ok: self.outcome.map(|o| o == Outcome::Ok),
            fallback: self.fallback,
            session: self.session.clone(),
        }
    }
}

impl Services {
    /// The newest requests that match `query`, after skipping `offset` of them: the whole
    /// kept history, across restarts.
    pub async fn requests(&self, query: &RequestQuery, limit: usize) -> Vec<RequestEntry> {
        let offset = query.offset.unwrap_or(0);
        let page = self.proxy.request_log().page(&query.filter(), offset, limit).await;
        page.into_iter()
            .map(|r| RequestEntry {
                at: r.at,
                dialect: r.dialect,
                model: r.model,
                served_by: r.served_by,
                status: r.status,
                attempts: r.attempts,
                duration_ms: r.duration_ms,
                outcome: r.outcome,
                first_byte_ms: r.first_byte_ms,
                usage: r.usage.map(UsageView::from),
                cost: r.cost.map(|c| c.to_string()),
                local_key: r.local_key,
                combo: r.combo,
                fallback: r.fallback,
                session: r.session,
                trace: serde_json::from_str(&r.trace).unwrap_or_default(),
            })
            .collect()
    }
}
