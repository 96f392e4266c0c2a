//! The approval endpoints besides answering one: what waits for a decision (per session and
//! across sessions, for the console, which must show on load what started waiting before it
//! opened), and the remembered decisions, listed and revoked.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use serde::Serialize;
use utoipa::ToSchema;

use super::State;
use super::api::ApiError;
use crate::pipeline::stages::approval::Pending;

/// A call waiting for the host, with its session.
#[derive(Serialize, ToSchema)]
pub struct PendingApproval {
    /// The session.
    pub session_id: String,
    /// The session's workspace.
    pub workspace: String,
    /// The call and its deadline (`index`, `id`, `tool`, `requirement`, `input`,
    /// `text_before`, `asked_at_ms`, `deadline_ms`, `reason`).
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub pending: Pending,
}

/// `{"pending": [...]}`.
#[derive(Serialize, ToSchema)]
pub struct PendingList {
    /// What waits, oldest session first.
    pub pending: Vec<PendingApproval>,
}

/// `{"remembered": [...]}`.
#[derive(Serialize, ToSchema)]
pub struct RememberedList {
    /// `{"key", "tool", "decision", "scope", "input"}` each, approvals first.
    #[schema(value_type = Vec<Object>)]
    pub remembered: Vec<toolslot::plan::approval::Remembered>,
}

/// `{"revoked": n}`.
#[derive(Serialize, ToSchema)]
pub struct Revoked {
    /// How many remembered decisions were forgotten.
    pub revoked: usize,
}

async fn pending_of(state: &State, id: &str) -> Result<Option<PendingApproval>, ApiError> {
    let pending = state.dispatcher.pending_approval(id).await?;
    let workspace = state.dispatcher.workspace_of(id)?;
    Ok(pending.map(|pending| PendingApproval {
        session_id: id.to_string(),
        workspace: workspace.display().to_string(),
        pending,
    }))
}

/// The call of a session waiting for the host's decision (none or one: a session asks one
/// question at a time).
#[utoipa::path(get, path = "/v1/sessions/{id}/approvals/pending", params(("id" = String, Path, description = "Session id")),
    responses((status = 200, body = PendingList), (status = 404, body = super::api::ErrorBody)))]
pub async fn session_pending(state: web::Data<State>, path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let id = path.into_inner();
    let pending = pending_of(&state, &id).await?.into_iter().collect();
    Ok(HttpResponse::Ok().json(PendingList { pending }))
}

/// Every call waiting for the host, across sessions (what the console shows on load).
#[utoipa::path(get, path = "/v1/approvals/pending", responses((status = 200, body = PendingList)))]
pub async fn all_pending(state: web::Data<State>) -> HttpResponse {
    let mut pending = Vec::new();
    for id in state.dispatcher.session_ids() {
        // A session closed meanwhile has nothing waiting.
        if let Ok(Some(p)) = pending_of(&state, &id).await {
            pending.push(p);
        }
    }
    HttpResponse::Ok().json(PendingList { pending })
}

/// A session's remembered decisions.
#[utoipa::path(get, path = "/v1/sessions/{id}/approvals/remembered", params(("id" = String, Path, description = "Session id")),
    responses((status = 200, body = RememberedList), (status = 404, body = super::api::ErrorBody)))]
pub async fn remembered(state: web::Data<State>, path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let id = path.into_inner();
    // A durable session known only to the session store is taken over first.
    state.dispatcher.adopt(&id).await?;
    let remembered = state.dispatcher.remembered_approvals(&id).await?;
    Ok(HttpResponse::Ok().json(RememberedList { remembered }))
}

/// Forgets every remembered decision of a session: later calls are asked again.
#[utoipa::path(delete, path = "/v1/sessions/{id}/approvals/remembered", params(("id" = String, Path, description = "Session id")),
    responses((status = 200, body = Revoked), (status = 404, body = super::api::ErrorBody)))]
pub async fn revoke_all(state: web::Data<State>, path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let id = path.into_inner();
    // A durable session known only to the session store is taken over first.
    state.dispatcher.adopt(&id).await?;
    let revoked = state.dispatcher.revoke_approvals(&id, None).await?;
    state.touch(&id);
    Ok(HttpResponse::Ok().json(Revoked { revoked }))
}

/// Forgets the remembered decision under one key (percent-encoded in the path).
#[utoipa::path(delete, path = "/v1/sessions/{id}/approvals/remembered/{key}", params(("id" = String, Path, description = "Session id"), ("key" = String, Path, description = "The remembered key")),
    responses((status = 204), (status = 404, body = super::api::ErrorBody)))]
pub async fn revoke_one(state: web::Data<State>, path: web::Path<(String, String)>) -> Result<HttpResponse, ApiError> {
    let (id, key) = path.into_inner();
    // A durable session known only to the session store is taken over first.
    state.dispatcher.adopt(&id).await?;
    let revoked = state.dispatcher.revoke_approvals(&id, Some(key.clone())).await?;
    state.touch(&id);
    if revoked == 0 {
        return Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("nothing is remembered under `{}`", key.chars().take(200).collect::<String>()),
        ));
    }
    Ok(HttpResponse::NoContent().finish())
}
