//! `tools/call`: one call as a round of its own, through the session's chain.
//!
//! The call is written as the decoded stream events of a response holding just that call
//! (`RoundInput::Events`) and submitted to the session, so nothing about it differs from a call
//! in a provider's stream: the same stages judge, ask, run, record and finish it, and its
//! result is the one `round_complete` holds. A task follows the round's events and turns the
//! ones the client must see into [`Step`]s: an approval question to put to a person, progress,
//! and the result.
//!
//! `notifications/cancelled` cancels the submission (`Dispatcher::cancel_submission`): a
//! question waiting is refused, a running command's process group is killed, and the round
//! still completes with its one result.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::future::OptionFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest, InputRequest, InputRequests, InputRequiredResult,
    ProgressNotificationParam, ProtocolVersion,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer};
use serde_json::Value;
use tokio::sync::{OwnedMutexGuard, mpsc};
use toolslot::event::{PipelineEvent, ToolResult};
use toolslot::stream::{StopReason, StreamEvent};
use toolslot::tool::ApprovalRequirement;

use super::Shared;
use super::approval::{self, Ask};
use crate::host::dispatcher::Dispatcher;
use crate::pipeline::chain::RoundInput;
use crate::pipeline::stages::approval::HostDecision;

/// The key of the approval form among an `input_required` result's requests.
const APPROVAL_INPUT: &str = "approval";

/// What the client must see of a call's round, in order.
#[derive(Debug)]
enum Step {
    /// A question for a person (the session's, or a sub-agent's it relays).
    Ask(Ask),
    /// A question of `session` was decided or expired, whoever answered it.
    Settled {
        /// The session that asked.
        session: String,
    },
    /// The call reported progress.
    Progress {
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    },
    /// The round completed: the call's one result (none only if the round lost it).
    Done(Option<ToolResult>),
}

/// A call whose round is running.
#[derive(Debug)]
pub(super) struct Running {
    /// Its submission's number in the session, for cancelling that one only.
    number: u64,
    /// The tool as the client named it.
    name: String,
    steps: mpsc::UnboundedReceiver<Step>,
}

/// A call answered with `input_required` (2026-07-28): it waits, as the session's pending
/// approval, for the client to send the call again with the person's answer.
#[derive(Debug)]
pub(super) struct Held {
    running: Running,
    ask: Ask,
}

/// Whether the client speaks 2026-07-28 or later on this request, where a server asks through
/// `input_required` results instead of requests of its own.
pub(super) fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Runs `request` through the session and answers with its result (or, on 2026-07-28, with
/// the approval question it waits on).
///
/// # Errors
/// A JSON-RPC error only when the call could not be submitted at all (the session is gone) or
/// a `requestState` names no held call; everything that happens to the call is its result.
pub(super) async fn call(
    shared: &Arc<Shared>,
    request: CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    if let Some(state) = request.request_state.as_deref() {
        return resume(shared, state, &request, context).await;
    }
    // One round at a time: wait for the call before this one. A call cancelled meanwhile
    // never starts.
    let turn = tokio::select! {
        turn = Arc::clone(&shared.turn).lock_owned() => turn,
        _ = context.ct.cancelled() => return Ok(CallToolResponse::Complete(cancelled_unstarted(&request.name))),
    };
    let n = shared.calls.fetch_add(1, Ordering::Relaxed) + 1;
    let arguments = Value::Object(request.arguments.clone().unwrap_or_default()).to_string();
    let events = one_call_round(&format!("mcp_{n}"), &request.name, arguments);
    // The round is a child of the client's trace when its request carried one in `_meta`
    // (the MCP semantic conventions' server span); a round takes the span open at submission.
    let span = server_span(&request.name, &shared.session, context);
    let (number, round) = span
        .in_scope(|| shared.dispatcher.submit_numbered(&shared.session, RoundInput::Events(events), None))
        .map_err(|e| ErrorData::internal_error(format!("the call was not submitted: {e}"), None))?;
    let (steps_tx, steps) = mpsc::unbounded_channel();
    // On the session's own thread, where the round's events arrive. Should the session be gone,
    // the steps end at once and so does the call.
    let follow = follow(Arc::clone(&shared.dispatcher), shared.session.clone(), round, steps_tx, turn);
    if let Err(e) = shared.dispatcher.run_beside(&shared.session, follow) {
        tracing::warn!(error = %e, "the call's round cannot be followed");
    }
    let running = Running {
        number,
        name: request.name.to_string(),
        steps,
    };
    drive(shared, running, context).await
}

/// The MCP server span of a `tools/call` (`tools/call {tool}`), adopted into the trace the
/// client's `_meta` names (`traceparent`, `tracestate`), if any.
fn server_span(tool: &str, session: &str, context: &RequestContext<RoleServer>) -> tracing::Span {
    let span = tracing::info_span!(
        "mcp_server_request",
        "otel.name" = %format_args!("tools/call {tool}"),
        "otel.kind" = "server",
        "mcp.method.name" = "tools/call",
        "gen_ai.tool.name" = tool,
        "mcp.session.id" = session,
    );
    if let Some(traceparent) = context.meta.get_traceparent() {
        let parent = toolslot::telemetry::TraceContext {
            traceparent: traceparent.to_string(),
            tracestate: context.meta.get_tracestate().map(str::to_string),
        };
        toolslot::telemetry::adopt(&span, &parent);
    }
    span
}

/// The decoded events of a response that holds one call and nothing else.
fn one_call_round(id: &str, name: &str, arguments: String) -> Vec<StreamEvent> {
    vec![
        StreamEvent::MessageStart,
        StreamEvent::CallStart {
            slot: 0,
            id: id.to_string(),
            name: name.to_string(),
            thought_signature: None,
        },
        StreamEvent::CallArgsFull { slot: 0, arguments },
        StreamEvent::CallEnd { slot: 0 },
        StreamEvent::Stop(StopReason::ToolUse),
        StreamEvent::MessageEnd,
    ]
}

/// Follows a call's round: turns its events into steps, and gives the session's turn back
/// once the round completed.
async fn follow(
    dispatcher: Arc<Dispatcher>,
    session: String,
    mut round: mpsc::UnboundedReceiver<PipelineEvent>,
    steps: mpsc::UnboundedSender<Step>,
    turn: OwnedMutexGuard<()>,
) {
    while let Some(event) = round.recv().await {
        let step = match event {
            PipelineEvent::ApprovalRequired {
                index,
                name,
                input,
                request,
                requirement,
                ..
            } => Some(Step::Ask(
                ask_of(&dispatcher, &session, index, &name, &input, request, requirement).await,
            )),
            PipelineEvent::ApprovalDecided { .. } | PipelineEvent::ApprovalExpired { .. } => {
                Some(Step::Settled { session: session.clone() })
            }
            PipelineEvent::Subagent { session: child, event, .. } => match *event {
                PipelineEvent::ApprovalRequired {
                    index,
                    name,
                    input,
                    request,
                    requirement,
                    ..
                } => Some(Step::Ask(
                    ask_of(&dispatcher, &child, index, &name, &input, request, requirement).await,
                )),
                PipelineEvent::ApprovalDecided { .. } | PipelineEvent::ApprovalExpired { .. } => Some(Step::Settled { session: child }),
                _ => None,
            },
            PipelineEvent::Progress {
                progress, total, message, ..
            } => Some(Step::Progress { progress, total, message }),
            PipelineEvent::RoundComplete { results, .. } => {
                drop(turn);
                let _ = steps.send(Step::Done(results.into_iter().next()));
                return;
            }
            _ => None,
        };
        if let Some(step) = step {
            let _ = steps.send(step);
        }
    }
}

/// The question of call `index` of `session`, with what the session's pending approval adds
/// (why it is asked, its deadline).
async fn ask_of(
    dispatcher: &Dispatcher,
    session: &str,
    index: usize,
    tool: &str,
    input: &Value,
    request: u64,
    requirement: ApprovalRequirement,
) -> Ask {
    let pending = dispatcher
        .pending_approval(session)
        .await
        .ok()
        .flatten()
        .filter(|p| p.request == request);
    Ask {
        session: session.to_string(),
        index,
        request,
        tool: tool.to_string(),
        input: input.clone(),
        requirement,
        reason: pending.as_ref().and_then(|p| p.reason.clone()),
        deadline_ms: pending.and_then(|p| p.deadline_ms),
    }
}

type Asking = Pin<Box<dyn Future<Output = (Ask, HostDecision)> + Send>>;

/// Waits for a running call's result, asking a person whatever its round asks, and cancels
/// the round when the client cancels the request.
async fn drive(shared: &Arc<Shared>, mut running: Running, context: &RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
    let modern = is_modern(context);
    let elicits = approval::can_elicit(context.client_capabilities().as_ref());
    let waits_for_ever = shared.dispatcher.config().approval.timeout_ms == 0;
    let progress_token = context.meta.get_progress_token();
    let mut cancelled = false;
    let mut unasked = false;
    // The form open at the client (revisions with `initialize`), and whose question it is.
    let mut asking: Option<(String, Asking)> = None;
    loop {
        tokio::select! {
            step = running.steps.recv() => match step {
                Some(Step::Done(Some(result))) => {
                    let mut result = result_of(result);
                    if unasked {
                        result.content.push(ContentBlock::text(approval::unasked_note(shared.dispatcher.config())));
                    }
                    return Ok(CallToolResponse::Complete(result));
                }
                None | Some(Step::Done(None)) => {
                    return Err(ErrorData::internal_error(format!("the round of `{}` ended without its result", running.name), None));
                }
                Some(Step::Progress { progress, total, message }) => {
                    if let Some(token) = &progress_token {
                        let mut note = ProgressNotificationParam::new(token.clone(), progress);
                        note.total = total;
                        note.message = message;
                        if let Err(e) = context.peer.notify_progress(note).await {
                            tracing::debug!(error = %e, "progress not sent");
                        }
                    }
                }
                Some(Step::Settled { session }) => {
                    // Decided elsewhere, or expired: the open form asks about nothing now.
                    if asking.as_ref().is_some_and(|(s, _)| *s == session) {
                        asking = None;
                    }
                }
                Some(Step::Ask(ask)) => {
                    if cancelled {
                        // The cancel refuses it.
                    } else if elicits && modern {
                        return Ok(hold(shared, running, ask));
                    } else if elicits {
                        asking = Some((ask.session.clone(), Box::pin(elicit(context.peer.clone(), ask))));
                    } else if waits_for_ever {
                        // Nobody can be asked and nothing waits for ever on nobody.
                        unasked = true;
                        answer(shared, &ask, HostDecision::Reject).await;
                    } else {
                        // It waits as the session's pending approval until approval.timeout_ms.
                        unasked = true;
                    }
                }
            },
            Some((ask, decision)) = OptionFuture::from(asking.as_mut().map(|(_, f)| f)), if asking.is_some() => {
                asking = None;
                answer(shared, &ask, decision).await;
            }
            _ = context.ct.cancelled(), if !cancelled => {
                cancelled = true;
                asking = None;
                if let Err(e) = shared.dispatcher.cancel_submission(&shared.session, running.number) {
                    tracing::debug!(error = %e, "cancelling the call's round");
                }
            }
        }
    }
}

/// Answers with the approval form as an `input_required` result, and keeps the call waiting
/// for the client to send it again with the answer.
fn hold(shared: &Shared, running: Running, ask: Ask) -> CallToolResponse {
    let state = toolslot::output::random_hex(16);
    let mut requests = InputRequests::new();
    requests.insert(
        APPROVAL_INPUT.to_string(),
        InputRequest::Elicitation(ElicitRequest::new(approval::form(&ask))),
    );
    shared
        .held
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(state.clone(), Held { running, ask });
    CallToolResponse::InputRequired(InputRequiredResult::new(Some(requests), Some(state)))
}

/// A held call sent again with the person's answer: the answer goes to its question, and the
/// call goes on.
async fn resume(
    shared: &Arc<Shared>,
    state: &str,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let taken = shared.held.lock().unwrap_or_else(|p| p.into_inner()).take(state);
    let Some(held) = taken else {
        return Err(ErrorData::invalid_params(
            "requestState names no call waiting here (its answer came already, or it was forgotten); send the call again without it",
            None,
        ));
    };
    if held.running.name != request.name {
        let reason = format!("requestState belongs to a call of `{}`, not `{}`", held.running.name, request.name);
        shared
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(state.to_string(), held);
        return Err(ErrorData::invalid_params(reason, None));
    }
    let decision = approval::decision_of(request.input_responses.as_ref().and_then(|r| r.get(APPROVAL_INPUT)));
    answer(shared, &held.ask, decision).await;
    drive(shared, held.running, context).await
}

/// Puts the form to the client (`elicitation/create`) and reads the decision; a client that
/// fails to answer rejects.
async fn elicit(peer: Peer<RoleServer>, ask: Ask) -> (Ask, HostDecision) {
    let decision = match peer.create_elicitation(approval::form(&ask)).await {
        Ok(result) => approval::decided(&result),
        Err(e) => {
            tracing::warn!(tool = %ask.tool, error = %e, "the client did not answer the approval form; rejected");
            HostDecision::Reject
        }
    };
    (ask, decision)
}

/// Answers the question `ask` names, and only it. An answer that finds it gone (answered
/// first by someone else, expired, cancelled) changes nothing: the first answer wins.
async fn answer(shared: &Shared, ask: &Ask, decision: HostDecision) {
    if let Err(e) = shared
        .dispatcher
        .answer_request(&ask.session, ask.index, Some(ask.request), decision)
        .await
    {
        tracing::info!(tool = %ask.tool, request = ask.request, error = %e, "the answer came after the question ended");
    }
}

/// The MCP result of a call's result: its content blocks (text, and the media it carries), its
/// structured value, and whether it is an error (whose text ends with the error's category).
fn result_of(result: ToolResult) -> CallToolResult {
    let content: Vec<ContentBlock> = match &result.blocks {
        Some(blocks) => blocks.iter().filter_map(block_of).collect(),
        None => vec![ContentBlock::text(result.content.clone())],
    };
    let content = if content.is_empty() {
        vec![ContentBlock::text(result.content)]
    } else {
        content
    };
    if result.is_error {
        CallToolResult::error(content)
    } else {
        let mut ok = CallToolResult::success(content);
        ok.structured_content = result.structured;
        ok
    }
}

/// One content block of a result's `blocks` (`{"type": "text", "text"}` or a media block
/// `{"type", "mimeType", "data"}`).
fn block_of(block: &Value) -> Option<ContentBlock> {
    let text = |key: &str| block.get(key).and_then(Value::as_str);
    match text("type")? {
        "text" => Some(ContentBlock::text(text("text")?)),
        "image" => Some(ContentBlock::image(text("data")?, text("mimeType")?)),
        "audio" => Some(ContentBlock::audio(text("data")?, text("mimeType")?)),
        _ => None,
    }
}

/// The result of a call the client cancelled before its turn came.
fn cancelled_unstarted(tool: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "Cancelled: the client cancelled `{tool}` before it started; nothing was run.\n{}",
        serde_json::json!({"error": "cancelled", "side_effect": "not_started"})
    ))])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_result_keeps_its_text_media_and_structured_value() {
        let result = ToolResult {
            index: 0,
            tool_use_id: "mcp_1".into(),
            name: "srv__chart".into(),
            is_error: false,
            content: "a chart".into(),
            blocks: Some(vec![
                json!({"type": "text", "text": "a chart"}),
                json!({"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}),
            ]),
            structured: Some(json!({"points": 3})),
        };
        let out = serde_json::to_value(result_of(result)).unwrap();
        assert_eq!(out["content"][0], json!({"type": "text", "text": "a chart"}));
        assert_eq!(out["content"][1]["type"], "image");
        assert_eq!(out["content"][1]["mimeType"], "image/png");
        assert_eq!(out["structuredContent"], json!({"points": 3}));
        assert_eq!(out["isError"], false);
    }

    #[test]
    fn an_error_result_is_an_error_with_its_category() {
        let result = ToolResult {
            index: 0,
            tool_use_id: "mcp_1".into(),
            name: "exec_shell".into(),
            is_error: true,
            content: "Not approved.\n{\"error\": \"not_approved\", \"side_effect\": \"not_started\"}".into(),
            blocks: None,
            structured: None,
        };
        let out = serde_json::to_value(result_of(result)).unwrap();
        assert_eq!(out["isError"], true);
        assert!(
            out["content"][0]["text"]
                .as_str()
                .unwrap()
                .ends_with("\"not_approved\", \"side_effect\": \"not_started\"}")
        );
        assert!(out.get("structuredContent").is_none());
    }

    #[test]
    fn a_call_is_a_round_of_one_call() {
        let mut assembler = toolslot::stream::Assembler::new(None);
        let mut out = Vec::new();
        assembler.push_events(one_call_round("mcp_1", "read_file", "{\"path\":\"a\"}".into()), &mut out);
        assembler.finish(&mut out);
        let calls: Vec<_> = out
            .iter()
            .filter_map(|e| match e {
                toolslot::stream::AssemblyEvent::CallReady(c) => Some((c.id.as_str(), c.name.as_str(), c.arguments.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(calls, [("mcp_1", "read_file", "{\"path\":\"a\"}")]);
        let ends = out
            .iter()
            .filter(|e| matches!(e, toolslot::stream::AssemblyEvent::RoundEnd(r) if r.call_count == 1))
            .count();
        assert_eq!(ends, 1);
    }
}
