//! What the server sends unasked: its questions (elicitation), progress of the calls in
//! flight, and news that its tool list changed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::ClientHandler;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::{NotificationContext, RoleClient};
use serde_json::Value;

use super::{McpClient, lock};
use crate::mcp::{InputSink, ProgressSink};

/// Handles what the server sends unasked. Server→client requests (sampling, elicitation)
/// are refused by rmcp's defaults and roots are answered empty, so no request is left
/// unanswered (an unanswered one keeps Node servers alive long after stdin closes).
/// Elicitation is answered by the session of the call in flight, when the host can answer.
#[derive(Clone, Default)]
pub(super) struct Handler {
    pub(super) on_tools_changed: Option<ToolsChanged>,
    /// Where each running call's progress goes, by progress token.
    pub(super) progress: Arc<Mutex<HashMap<String, ProgressSink>>>,
    /// Where the server's questions go: the calls in flight that can take one, oldest first.
    pub(super) inputs: Arc<Mutex<Vec<InputRoute>>>,
    /// Whether to announce elicitation: only when the host can answer.
    pub(super) elicitation: bool,
    pub(super) server: String,
}

/// A call in flight that can take its server's questions.
#[derive(Clone)]
pub(super) struct InputRoute {
    pub(super) key: u64,
    pub(super) session: String,
    pub(super) sink: InputSink,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        // What `initialize` offers when the server is not a newest-revision one (see
        // `lifecycle`): the newest revision with that handshake; a server may answer an older
        // one, which rmcp accepts.
        let mut capabilities = rmcp::model::ClientCapabilities::default();
        if self.elicitation {
            // Forms only: answers are checked against the requested schema before they go.
            capabilities.elicitation = Some(
                rmcp::model::ElicitationCapability::default()
                    .with_form(rmcp::model::FormElicitationCapability::new().with_schema_validation(true)),
            );
        }
        rmcp::model::ClientConfig::new(
            capabilities,
            rmcp::model::Implementation::new("toolslot", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        use rmcp::model::{ElicitResult, ElicitationAction};
        let decline = Ok(ElicitResult::new(ElicitationAction::Decline));
        // The protocol does not say which call a question belongs to. It goes to the calls in
        // flight at this server when they all belong to one session (the oldest's index);
        // with calls of several sessions in flight it could reach the wrong user, so it is
        // declined.
        let routes = lock(&self.inputs).clone();
        let Some(first) = routes.first() else {
            return decline;
        };
        if routes.iter().any(|r| r.session != first.session) {
            tracing::warn!(server = %self.server, "elicitation declined: calls of several sessions are in flight");
            return decline;
        }
        Ok(put_form(&self.server, Some(&first.sink), request).await)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(hook) = &self.on_tools_changed {
            hook();
        }
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        let key = serde_json::to_string(&params.progress_token).unwrap_or_default();
        let sink = self.progress.lock().unwrap_or_else(|p| p.into_inner()).get(&key).cloned();
        // Progress for a call nobody waits for any more (cancelled, timed out) is dropped.
        if let Some(sink) = sink {
            sink(params.progress, params.total, params.message);
        }
    }
}

/// Puts `server`'s question to `ask` and gives its answer; declined where there is nobody to
/// ask, or for a question by URL (only forms are announced).
pub(super) async fn put_form(
    server: &str,
    ask: Option<&InputSink>,
    request: rmcp::model::ElicitRequestParams,
) -> rmcp::model::ElicitResult {
    use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
    match (request, ask) {
        (
            ElicitRequestParams::FormElicitationParams {
                message, requested_schema, ..
            },
            Some(ask),
        ) => {
            let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
            let answer = ask(crate::tool::InputRequest {
                server: server.to_string(),
                message,
                schema,
            })
            .await;
            elicit_result(answer)
        }
        _ => ElicitResult::new(ElicitationAction::Decline),
    }
}

/// An answer as MCP's elicitation result.
pub(super) fn elicit_result(answer: crate::tool::InputAnswer) -> rmcp::model::ElicitResult {
    use rmcp::model::{ElicitResult, ElicitationAction};
    match answer {
        crate::tool::InputAnswer::Accept(content) => {
            let mut result = ElicitResult::new(ElicitationAction::Accept);
            result.content = Some(content);
            result
        }
        crate::tool::InputAnswer::Decline => ElicitResult::new(ElicitationAction::Decline),
        crate::tool::InputAnswer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
    }
}

/// Told when the server says its tool list changed (`notifications/tools/list_changed`); it
/// should list the tools again. Called on the connection's task: it must not block.
pub type ToolsChanged = Arc<dyn Fn() + Send + Sync>;

/// A server's tool-list changes on the newest revisions (a `subscriptions/listen` stream).
pub struct ToolChanges(rmcp::service::Subscription);

impl ToolChanges {
    /// Waits for the next change; `false` once the stream has ended (the server went away).
    ///
    /// # Cancel safety
    /// Dropping it may lose a notification in flight; the next listing sees the change.
    pub async fn next(&mut self) -> bool {
        loop {
            match self.0.next().await {
                Ok(Some(rmcp::model::ServerNotification::ToolListChangedNotification(_))) => return true,
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => return false,
            }
        }
    }
}

impl McpClient {
    /// Where the server says its tool list changed, on the newest revisions (which send such
    /// notifications only on a `subscriptions/listen` stream): opened when the server offers
    /// `tools.listChanged`. `None` on older revisions, whose notifications reach
    /// [`ConnectOptions::on_tools_changed`](super::ConnectOptions::on_tools_changed), or when
    /// the server offers none.
    pub async fn tool_changes(&self) -> Option<ToolChanges> {
        let info = self.service.peer_info()?;
        if info.protocol_version.has_initialize() {
            return None;
        }
        let offered = info.capabilities.tools.as_ref().and_then(|t| t.list_changed).unwrap_or(false);
        if !offered {
            return None;
        }
        let mut filter = rmcp::model::SubscriptionFilter::new();
        filter.tools_list_changed = Some(true);
        match self.service.peer().listen(filter).await {
            Ok(subscription) => Some(ToolChanges(subscription)),
            Err(e) => {
                tracing::warn!(server = %self.server, error = %e, "subscribing to tool list changes failed");
                None
            }
        }
    }
}
