//! `GET /v1/sessions/{id}/rounds/last`: the session's last round as its `round_complete`,
//! also after the dispatcher that ran it was killed (a durable session, taken over here),
//! with its results as the provider's messages when `?format=` names one.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use toolslot::event::PipelineEvent;

use super::State;
use super::api::{ApiError, parse_result_format};

/// `?format=` of the last round.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LastRoundQuery {
    /// Also give the round's results as the provider's messages, in `messages`: anthropic,
    /// openai-chat, openai-responses or gemini.
    pub format: Option<String>,
}

/// The session's last round: its `round_complete` event, plus `round` (its number in the
/// session, from 1) and `settled` (true when a dispatcher that took the session over gave the
/// calls without a result theirs: `outcome_unknown` for a call that was running,
/// `unavailable` not started for one that never ran). With `?format=`, `messages` holds the
/// results as that provider's messages; Gemini's are named as resolved (the names the model
/// wrote are not kept with the round).
#[utoipa::path(get, path = "/v1/sessions/{id}/rounds/last", params(("id" = String, Path, description = "Session id"), LastRoundQuery),
    responses((status = 200, content_type = "application/json", body = Object), (status = 400, body = super::api::ErrorBody), (status = 404, body = super::api::ErrorBody), (status = 409, body = super::api::ErrorBody), (status = 503, body = super::api::ErrorBody)))]
pub async fn last_round(
    state: web::Data<State>,
    id: web::Path<String>,
    query: web::Query<LastRoundQuery>,
) -> Result<HttpResponse, ApiError> {
    let format = parse_result_format(query.format.as_deref())?;
    state.dispatcher.adopt(&id).await?;
    // Tracked like a session opened here, so that it is closed when idle.
    state.adopted(&id);
    let Some(round) = state.dispatcher.last_round(&id)? else {
        return Err(ApiError(StatusCode::NOT_FOUND, format!("session `{id}` has run no round yet")));
    };
    let Some(results) = round.results() else {
        return Err(ApiError(
            StatusCode::CONFLICT,
            format!("round {} of session `{id}` is still running", round.number),
        ));
    };
    let event = PipelineEvent::RoundComplete {
        stop_reason: round.stop_reason,
        text: round.text.clone(),
        results,
    };
    let mut names = toolslot::results::SentNames::default();
    let mut body = match format {
        Some(format) => toolslot::results::event_with_messages(&event, format, &mut names),
        None => serde_json::to_value(&event),
    }
    .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    body["round"] = round.number.into();
    body["settled"] = round.settled.into();
    Ok(HttpResponse::Ok().json(body))
}
