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
pub mod http;
mod listing;
mod malformed;
mod stdio;
mod stdout_watch;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CustomRequest, CustomResult, Implementation, InitializeRequestParams, InitializeResult,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, SubscriptionFilter,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use toolslot::policy::Policy;

use crate::host::dispatcher::Dispatcher;

pub use stdout_watch::stdout_closed;

/// The MCP server of one connection: what an MCP client talks to. Cheap to clone.
///
/// On stdio it serves the one session it was made with. Over HTTP it finds its session on
/// its first request (see [`http`]): the endpoint's `workspace` query, else the client's first
/// root, opens one; a connection with the `initialize` handshake keeps it until the client
/// ends the connection, and a 2026-07-28 client, which has no connections, shares one per
/// workspace and token.
#[derive(Clone)]
pub struct McpFront {
    conn: Arc<Conn>,
}

impl std::fmt::Debug for McpFront {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpFront")
            .field("session", &self.conn.bound.get().map(|s| s.session.as_str()))
            .finish_non_exhaustive()
    }
}

/// One MCP connection: the session it serves once known, and where an HTTP one finds it.
struct Conn {
    dispatcher: Arc<Dispatcher>,
    bound: OnceLock<Arc<Shared>>,
    /// How an HTTP connection finds its session (`None` on stdio: bound from the start).
    http: Option<Arc<http::HttpSessions>>,
}

impl Drop for Conn {
    /// An HTTP connection's own session ends with it (the client's `DELETE`, or its
    /// transport's end); a stdio session is closed by `toolslot mcp` itself, which waits for
    /// its ledger.
    fn drop(&mut self) {
        if self.http.is_some()
            && let Some(shared) = self.bound.get()
            && shared.owned_by_connection
            && let Err(e) = shared.dispatcher.close_session(&shared.session)
        {
            tracing::debug!(session = %shared.session, error = %e, "the MCP connection's session was closed already");
        }
    }
}

struct Shared {
    dispatcher: Arc<Dispatcher>,
    session: String,
    policy: Arc<Policy>,
    /// Whether the session ends with the connection that opened it (an HTTP connection with
    /// the handshake), rather than with the process or by going idle.
    owned_by_connection: bool,
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

impl Shared {
    fn new(dispatcher: Arc<Dispatcher>, session: String, policy: Arc<Policy>, owned_by_connection: bool) -> Arc<Self> {
        Arc::new(Self {
            dispatcher,
            session,
            policy,
            owned_by_connection,
            turn: Arc::new(tokio::sync::Mutex::new(())),
            held: Mutex::new(HeldCalls::default()),
            calls: AtomicU64::new(0),
            shown: Mutex::new(None),
            changed: tokio::sync::watch::channel(0).0,
        })
    }
}

impl McpFront {
    /// The MCP server of session `session` of `dispatcher`, whose policy is `policy` (what
    /// `tools/list` consults for tools denied outright).
    pub fn new(dispatcher: Arc<Dispatcher>, session: String, policy: Arc<Policy>) -> Self {
        let bound = OnceLock::new();
        let _ = bound.set(Shared::new(Arc::clone(&dispatcher), session, policy, false));
        Self {
            conn: Arc::new(Conn {
                dispatcher,
                bound,
                http: None,
            }),
        }
    }

    /// The MCP server of one HTTP connection (or one request of a client without
    /// connections), which finds its session in `sessions` on its first request.
    pub fn over_http(sessions: Arc<http::HttpSessions>) -> Self {
        Self {
            conn: Arc::new(Conn {
                dispatcher: Arc::clone(sessions.dispatcher()),
                bound: OnceLock::new(),
                http: Some(sessions),
            }),
        }
    }

    /// The session this server serves, once known.
    pub fn session(&self) -> Option<&str> {
        self.conn.bound.get().map(|s| s.session.as_str())
    }

    /// The session of the request `context`: the bound one, or (over HTTP) the one its
    /// endpoint, its token or its client's roots name.
    async fn shared(&self, context: &RequestContext<RoleServer>) -> Result<Arc<Shared>, ErrorData> {
        if let Some(shared) = self.conn.bound.get() {
            return Ok(Arc::clone(shared));
        }
        let Some(sessions) = &self.conn.http else {
            return Err(ErrorData::internal_error("this MCP connection has no session", None));
        };
        if call::is_modern(context) {
            // No connection to keep it for: the workspace and token find it again next time.
            return sessions.keyed(context);
        }
        let shared = sessions.open_for(context).await?;
        if let Err(extra) = self.conn.bound.set(Arc::clone(&shared)) {
            // Two first requests raced: keep the first session, close the other.
            let _ = extra.dispatcher.close_session(&extra.session);
        }
        Ok(Arc::clone(self.conn.bound.get().unwrap_or(&shared)))
    }

    /// The dispatcher behind this connection.
    fn dispatcher(&self) -> &Dispatcher {
        &self.conn.dispatcher
    }

    /// Tells the client the catalog changed when it differs from what the client was shown
    /// (a deferred tool activated, a tool an MCP server added): a legacy client by
    /// `notifications/tools/list_changed`, a 2026-07-28 client on its `subscriptions/listen`
    /// streams.
    async fn announce_changes(&self, shared: &Shared, context: &RequestContext<RoleServer>) {
        let Ok(catalog) = shared.dispatcher.catalog(&shared.session) else {
            return;
        };
        let names = catalog.visible_names();
        {
            let mut shown = shared.shown.lock().unwrap_or_else(|p| p.into_inner());
            match shown.as_ref() {
                // Nothing listed yet: the first listing will show it all.
                None => return,
                Some(before) if *before == names => return,
                Some(_) => *shown = Some(names),
            }
        }
        shared.changed.send_modify(|n| *n += 1);
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
    let (read, write) = rmcp::transport::stdio_pipes();
    let transport = stdio::ClientLines::new(read, write, front.dispatcher().config().mcp.max_message_bytes);
    let running = rmcp::serve_server(front, transport)
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
            .with_instructions(approval::instructions(self.dispatcher().config(), None))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        if let Some(sessions) = &self.conn.http {
            // Over HTTP the session is found now when the endpoint names its workspace (so a
            // workspace that cannot be used fails the handshake), or on the first request from
            // the client's roots; with neither, the handshake fails saying what is missing.
            if let Some(shared) = sessions.open_at_initialize(&context, &request)? {
                let _ = self.conn.bound.set(shared);
            }
        }
        let mut result = self.negotiate_initialize(&request)?;
        // This client said at the handshake whether it can ask a person: say what follows.
        let elicits = approval::can_elicit(Some(&request.capabilities));
        result.instructions = Some(approval::instructions(self.dispatcher().config(), Some(elicits)));
        Ok(result)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let shared = self.shared(&context).await?;
        let (tools, names) = listing::tools(&shared.dispatcher, &shared.session, &shared.policy)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        *shared.shown.lock().unwrap_or_else(|p| p.into_inner()) = Some(names);
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(&self, request: CallToolRequestParams, context: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        let shared = self.shared(&context).await?;
        let answer = call::call(&shared, request, &context).await;
        self.announce_changes(&shared, &context).await;
        answer
    }

    async fn on_custom_request(&self, request: CustomRequest, _context: RequestContext<RoleServer>) -> Result<CustomResult, ErrorData> {
        Err(malformed::custom_request(&request.method, request.params.as_ref()))
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        // Only the tool list changes here.
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let shared = self.shared(context.request_context()).await?;
        let mut changes = shared.changed.subscribe();
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
