//! `/api/providers`, `/api/combos`, `/api/aliases`, `/api/config`: thin handlers over the
//! catalog services.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;

use ts_rs::TS;

use super::{Deleted, answer, body, created, edit_error, invalid, malformed};
use crate::config::{ComboForm, ProviderForm};
use crate::server::ServerState;
use crate::services::{AliasesForm, CredentialInput, CredentialPatch};

/// `GET /api/providers`.
pub(in crate::server) async fn list_providers(State(state): State<ServerState>) -> Response {
    Json(state.services.providers()).into_response()
}

/// `GET /api/providers/{id}`.
pub(in crate::server) async fn get_provider(
    State(state): State<ServerState>,
    Path(id): Path<String>,
) -> Response {
    answer(state.services.provider(&id))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(in crate::server) struct ProviderQuery {
    /// The user typed (or saw) the provider's URLs in this very edit and agreed to send its
    /// requests there: the destinations it introduces are confirmed with it. Never a secret.
    #[serde(default)]
    confirm: bool,
}

/// `POST /api/providers[?confirm=true]` with a provider form.
pub(in crate::server) async fn create_provider(
    State(state): State<ServerState>,
    query: Result<Query<ProviderQuery>, QueryRejection>,
    bytes: Bytes,
) -> Response {
    let Ok(Query(q)) = query else { return invalid("confirm", "confirm is true or false") };
    let form: ProviderForm = match body(&bytes) {
        Ok(form) => form,
        Err(problem) => return malformed(&problem),
    };
    created(state.services.create_provider(form, q.confirm).await)
}

/// `PATCH /api/providers/{id}[?confirm=true]` with the fields to change.
pub(in crate::server) async fn update_provider(
    State(state): State<ServerState>,
    Path(id): Path<String>,
    query: Result<Query<ProviderQuery>, QueryRejection>,
    bytes: Bytes,
) -> Response {
    let Ok(Query(q)) = query else { return invalid("confirm", "confirm is true or false") };
    let patch: Value = match body(&bytes) {
        Ok(patch) => patch,
        Err(problem) => return malformed(&problem),
    };
    answer(state.services.update_provider(&id, &patch, q.confirm).await)
}

/// `DELETE /api/providers/{id}`.
pub(in crate::server) async fn delete_provider(
    State(state): State<ServerState>,
    Path(id): Path<String>,
) -> Response {
    match state.services.delete_provider(&id).await {
        Ok(()) => Json(Deleted { deleted: id }).into_response(),
        Err(e) => edit_error(&e),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(in crate::server) struct ProbeQuery {
    credential: Option<String>,
}

/// `POST /api/providers/{id}/test[?credential=]`: one cheap real call (the model list).
pub(in crate::server) async fn test_provider(
    State(state): State<ServerState>,
    Path(id): Path<String>,
    query: Result<Query<ProbeQuery>, QueryRejection>,
) -> Response {
    let Ok(Query(q)) = query else { return invalid("query", "only credential is accepted") };
    answer(state.services.test_provider(&id, q.credential.as_deref()).await)
}

/// `GET /api/providers/{id}/models[?credential=]`: the models the provider lists.
pub(in crate::server) async fn discover_models(
    State(state): State<ServerState>,
    Path(id): Path<String>,
    query: Result<Query<ProbeQuery>, QueryRejection>,
) -> Response {
    let Ok(Query(q)) = query else { return invalid("query", "only credential is accepted") };
    answer(state.services.discover_models(&id, q.credential.as_deref()).await)
}

/// `POST /api/providers/{id}/credentials`: the secret, if sent, goes to the keychain.
pub(in crate::server) async fn create_credential(
    State(state): State<ServerState>,
    Path(provider): Path<String>,
    bytes: Bytes,
) -> Response {
    let input: CredentialInput = match body(&bytes) {
        Ok(input) => input,
        Err(problem) => return malformed(&problem),
    };
    created(state.services.create_credential(&provider, input).await)
}

/// `PATCH /api/providers/{id}/credentials/{credential}`.
pub(in crate::server) async fn update_credential(
    State(state): State<ServerState>,
    Path((provider, id)): Path<(String, String)>,
    bytes: Bytes,
) -> Response {
    let patch: CredentialPatch = match body(&bytes) {
        Ok(patch) => patch,
        Err(problem) => return malformed(&problem),
    };
    answer(state.services.update_credential(&provider, &id, patch).await)
}

/// `DELETE /api/providers/{id}/credentials/{credential}`.
pub(in crate::server) async fn delete_credential(
    State(state): State<ServerState>,
    Path((provider, id)): Path<(String, String)>,
) -> Response {
    match state.services.delete_credential(&provider, &id).await {
        Ok(()) => Json(Deleted { deleted: id }).into_response(),
        Err(e) => edit_error(&e),
    }
}

/// `GET /api/combos`.
pub(in crate::server) async fn list_combos(State(state): State<ServerState>) -> Response {
    Json(state.services.combos()).into_response()
}

/// `GET /api/combos/{name}`.
pub(in crate::server) async fn get_combo(
    State(state): State<ServerState>,
    Path(name): Path<String>,
) -> Response {
    answer(state.services.combo(&name))
}

/// `POST /api/combos` with a combo form.
pub(in crate::server) async fn create_combo(
    State(state): State<ServerState>,
    bytes: Bytes,
) -> Response {
    let form: ComboForm = match body(&bytes) {
        Ok(form) => form,
        Err(problem) => return malformed(&problem),
    };
    created(state.services.create_combo(form).await)
}

/// `PUT /api/combos/{name}` with the whole combo (a new `name` renames it).
pub(in crate::server) async fn replace_combo(
    State(state): State<ServerState>,
    Path(name): Path<String>,
    bytes: Bytes,
) -> Response {
    let form: ComboForm = match body(&bytes) {
        Ok(form) => form,
        Err(problem) => return malformed(&problem),
    };
    answer(state.services.replace_combo(&name, form).await)
}

/// `POST /api/combos/{name}/reorder`: every current target index, once, in the new order.
#[derive(Debug, Deserialize, TS)]
#[serde(deny_unknown_fields)]
#[ts(export)]
pub(crate) struct Reorder {
    pub order: Vec<usize>,
}

/// `POST /api/combos/{name}/reorder` with `{"order": [2, 0, 1]}`.
pub(in crate::server) async fn reorder_combo(
    State(state): State<ServerState>,
    Path(name): Path<String>,
    bytes: Bytes,
) -> Response {
    let reorder: Reorder = match body(&bytes) {
        Ok(reorder) => reorder,
        Err(problem) => return malformed(&problem),
    };
    answer(state.services.reorder_combo(&name, &reorder.order).await)
}

/// `DELETE /api/combos/{name}`.
pub(in crate::server) async fn delete_combo(
    State(state): State<ServerState>,
    Path(name): Path<String>,
) -> Response {
    match state.services.delete_combo(&name).await {
        Ok(()) => Json(Deleted { deleted: name }).into_response(),
        Err(e) => edit_error(&e),
    }
}

/// `GET /api/aliases`: every alias and the default route.
pub(in crate::server) async fn aliases(State(state): State<ServerState>) -> Response {
    Json(state.services.aliases()).into_response()
}

/// `PUT /api/aliases` with every alias and the default route: replaces them all.
pub(in crate::server) async fn replace_aliases(
    State(state): State<ServerState>,
    bytes: Bytes,
) -> Response {
    let form: AliasesForm = match body(&bytes) {
        Ok(form) => form,
        Err(problem) => return malformed(&problem),
    };
    answer(state.services.replace_aliases(form).await)
}

/// `GET /api/config/export`: the config file (TOML), secrets as references only.
pub(in crate::server) async fn export_config(State(state): State<ServerState>) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/toml; charset=utf-8"),
            (header::CONTENT_DISPOSITION, "attachment; filename=\"switchyard.toml\""),
        ],
        state.services.export_config(),
    )
        .into_response()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(in crate::server) struct ImportQuery {
    #[serde(default)]
    dry_run: bool,
    /// The caller showed the user the pairs a dry run listed, and the user agreed to them.
    #[serde(default)]
    confirm: bool,
}

/// `POST /api/config/import[?dry_run=true]` with a config file (TOML) as the body: replaces
/// the whole config, or only checks it.
pub(in crate::server) async fn import_config(
    State(state): State<ServerState>,
    query: Result<Query<ImportQuery>, QueryRejection>,
    bytes: Bytes,
) -> Response {
    let Ok(Query(q)) = query else {
        return invalid("dry_run", "dry_run and confirm are true or false");
    };
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return invalid("(body)", "a config file is UTF-8 text");
    };
    answer(state.services.import_config(text, q.dry_run, q.confirm).await)
}

/// `POST /api/providers/{id}/confirm`: confirms where every credential of the provider sends
/// its secret (`unconfirmed` in the provider view lists it). The interactive act the binding
/// rule waits for: the UI sends it only after showing the user the pairs.
pub(in crate::server) async fn confirm_provider(
    State(state): State<ServerState>,
    Path(provider): Path<String>,
) -> Response {
    answer(state.services.confirm_credentials(&provider, None).await)
}

/// `POST /api/providers/{id}/credentials/{credential}/confirm`: as [`confirm_provider`], for
/// one credential.
pub(in crate::server) async fn confirm_credential(
    State(state): State<ServerState>,
    Path((provider, id)): Path<(String, String)>,
) -> Response {
    answer(state.services.confirm_credentials(&provider, Some(&id)).await)
}

/// `POST /api/providers/{id}/credentials/{credential}/retry`: reads the credential's secret
/// again now ("Retry now"); the provider, with whether it can be read.
pub(in crate::server) async fn retry_secret(
    State(state): State<ServerState>,
    Path((provider, id)): Path<(String, String)>,
) -> Response {
    answer(state.services.retry_secret(&provider, &id).await)
}

/// `POST /api/providers/{id}/credentials/{credential}/login`: starts an OAuth sign-in; open
/// `authorization_url` in a browser, then poll `GET /api/oauth/logins/{login}`.
pub(in crate::server) async fn start_login(
    State(state): State<ServerState>,
    Path((provider, id)): Path<(String, String)>,
) -> Response {
    created(state.services.start_login(&provider, &id).await)
}

/// `GET /api/oauth/logins/{login}`: pending, succeeded or failed with the reason.
pub(in crate::server) async fn login_status(
    State(state): State<ServerState>,
    Path(login): Path<u64>,
) -> Response {
    answer(state.services.login_status(login))
}

/// `DELETE /api/oauth/logins/{login}`: abandons a pending sign-in.
pub(in crate::server) async fn cancel_login(
    State(state): State<ServerState>,
    Path(login): Path<u64>,
) -> Response {
    match state.services.cancel_login(login) {
        Ok(()) => Json(Deleted { deleted: login.to_string() }).into_response(),
        Err(e) => edit_error(&e),
    }
}

/// `GET /api/providers/{id}/credentials/{credential}/oauth`: how its token stands, and why.
pub(in crate::server) async fn oauth_status(
    State(state): State<ServerState>,
    Path((provider, id)): Path<(String, String)>,
) -> Response {
    answer(state.services.oauth_status(&provider, &id).await)
}

/// `DELETE /api/providers/{id}/credentials/{credential}/oauth`: signs out (forgets the tokens).
pub(in crate::server) async fn sign_out(
    State(state): State<ServerState>,
    Path((provider, id)): Path<(String, String)>,
) -> Response {
    match state.services.sign_out(&provider, &id).await {
        Ok(_) => Json(Deleted { deleted: id }).into_response(),
        Err(e) => edit_error(&e),
    }
}

/// `POST /api/providers/{id}/credentials/{credential}/oauth/refresh`: try now to get a usable
/// token (refreshing when due); answers how the token stands afterwards.
pub(in crate::server) async fn oauth_retry(
    State(state): State<ServerState>,
    Path((provider, id)): Path<(String, String)>,
) -> Response {
    answer(state.services.oauth_retry(&provider, &id).await)
}
