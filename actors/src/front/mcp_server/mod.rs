//! `toolslot mcp`: toolslot as an MCP server, so that any MCP client (a desktop app, an IDE,
//! another agent) gets governed tools.
//!
//! One MCP connection is one toolslot session on the [`Dispatcher`]: its own remembered
//! approvals, loop guard, activated tools and saved outputs. `tools/list` is the session's
//! catalog; each `tools/call` becomes a round of one call, submitted to the session as decoded
//! stream events, so it passes through exactly the chain a call in a provider's stream does
//! (validation, policy, hooks, loop guard, approval, sandbox, ledger, truncation, handles, the
//! external-content envelope) and its result is read from the round's `round_complete`.
//!
//! # Brief overview
//! - [`listing`] turns the session's catalog into MCP tools: annotations from capabilities,
//!   `outputSchema` passed through, tools a policy denies outright left out.
//! - [`call`] builds the one-call round, follows its events and makes the MCP result.
//! - [`approval`] asks a person: the form an approval question is put in (elicitation), what
//!   its answer decides, and what the server's instructions say about it.
//!
//! Approvals reach a person through elicitation, in the shape the negotiated revision allows:
//! an `elicitation/create` request to the client (revisions with `initialize`), or an
//! `input_required` result whose retry carries the answer (2026-07-28, where a server may not
//! send requests). Either way the question is the session's pending approval, the first answer
//! wins, and it binds to that question only (`Dispatcher::answer_request` with its number).
//!
//! Calls run one at a time: a session runs one round at a time, so a call waits for the one
//! before it (an approval question it holds included).

mod approval;
mod call;
mod listing;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeRequestParams, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, SubscriptionFilter,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use toolslot::policy::Policy;

use crate::host::dispatcher::Dispatcher;

/// The MCP server of one session: what an MCP connection talks to. Cheap to clone.
#[derive(Clone)]
pub struct McpFront {
    inner: Arc<Shared>,
}

impl std::fmt::Debug for McpFront {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpFront")
            .field("session", &self.inner.session)
            .finish_non_exhaustive()
    }
}

struct Shared {
    dispatcher: Arc<Dispatcher>,
    session: String,
    policy: Arc<Policy>,
    /// The session's turn: a call holds it from its submission until its round completes.
    turn: Arc<tokio::sync::Mutex<()>>,
    /// Calls answered with `input_required`, by the `requestState` the client sends back.
    held: Mutex<HeldCalls>,
    /// Numbers the calls' ids (`mcp_1`, `mcp_2`, …).
    calls: AtomicU64,
    /// The names the client was last shown (listed, or told of by a change notification).
    shown: Mutex<Option<Vec<String>>>,
    /// Counts catalog changes, for `subscriptions/listen` streams.
    changed: tokio::sync::watch::Sender<u64>,
}

/// Calls held for the client's answer, oldest first.
#[derive(Default)]
struct HeldCalls {
    by_state: HashMap<String, call::Held>,
    order: VecDeque<String>,
}

/// How many held calls are kept: only one can be waiting (a session runs one round at a
/// time), the others are results the client has not come back for.
const HELD_KEPT: usize = 16;

impl HeldCalls {
    fn insert(&mut self, state: String, held: call::Held) {
        while self.order.len() >= HELD_KEPT {
            if let Some(old) = self.order.pop_front() {
                self.by_state.remove(&old);
            }
        }
        self.order.push_back(state.clone());
        self.by_state.insert(state, held);
    }

    fn take(&mut self, state: &str) -> Option<call::Held> {
        self.order.retain(|s| s != state);
        self.by_state.remove(state)
    }
}

impl McpFront {
    /// The MCP server of session `session` of `dispatcher`, whose policy is `policy` (what
    /// `tools/list` consults for tools denied outright).
    pub fn new(dispatcher: Arc<Dispatcher>, session: String, policy: Arc<Policy>) -> Self {
        Self {
            inner: Arc::new(Shared {
                dispatcher,
                session,
                policy,
                turn: Arc::new(tokio::sync::Mutex::new(())),
                held: Mutex::new(HeldCalls::default()),
                calls: AtomicU64::new(0),
                shown: Mutex::new(None),
                changed: tokio::sync::watch::channel(0).0,
            }),
        }
    }

    /// The session this server serves.
    pub fn session(&self) -> &str {
        &self.inner.session
    }

    /// Tells the client the catalog changed when it differs from what the client was shown
    /// (a deferred tool activated, a tool an MCP server added): a legacy client by
    /// `notifications/tools/list_changed`, a 2026-07-28 client on its `subscriptions/listen`
    /// streams.
    async fn announce_changes(&self, context: &RequestContext<RoleServer>) {
        let Ok(catalog) = self.inner.dispatcher.catalog(&self.inner.session) else {
            return;
        };
        let names = catalog.visible_names();
        {
            let mut shown = self.inner.shown.lock().unwrap_or_else(|p| p.into_inner());
            match shown.as_ref() {
                // Nothing listed yet: the first listing will show it all.
                None => return,
                Some(before) if *before == names => return,
                Some(_) => *shown = Some(names),
            }
        }
        self.inner.changed.send_modify(|n| *n += 1);
        if !call::is_modern(context)
            && let Err(e) = context.peer.notify_tool_list_changed().await
        {
            tracing::debug!(error = %e, "tools/list_changed not sent");
        }
    }
}

/// Serves `front` on this process's stdin and stdout until the client closes them.
///
/// # Errors
/// A one-line reason when the MCP session could not start or ended in error.
pub async fn serve_stdio(front: McpFront) -> Result<(), String> {
    let running = rmcp::serve_server(front, rmcp::transport::stdio_pipes())
        .await
        .map_err(|e| format!("the MCP session did not start: {e}"))?;
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(|e| format!("the MCP session ended in error: {e}"))
}

impl ServerHandler for McpFront {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build();
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new("toolslot", env!("CARGO_PKG_VERSION")))
            .with_instructions(approval::instructions(self.inner.dispatcher.config(), None))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        // This client said at the handshake whether it can ask a person: say what follows.
        let elicits = approval::can_elicit(Some(&request.capabilities));
        result.instructions = Some(approval::instructions(self.inner.dispatcher.config(), Some(elicits)));
        Ok(result)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let (tools, names) = listing::tools(&self.inner.dispatcher, &self.inner.session, &self.inner.policy)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        *self.inner.shown.lock().unwrap_or_else(|p| p.into_inner()) = Some(names);
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(&self, request: CallToolRequestParams, context: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        let answer = call::call(self, request, &context).await;
        self.announce_changes(&context).await;
        answer
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        // Only the tool list changes here.
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.inner.changed.subscribe();
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    if context.accepted().tools_list_changed == Some(true)
                        && let Err(e) = context.sink().notify_tool_list_changed().await
                    {
                        tracing::debug!(error = %e, "tools/list_changed not sent on a subscription");
                        return Ok(());
                    }
                }
            }
        }
    }
}
