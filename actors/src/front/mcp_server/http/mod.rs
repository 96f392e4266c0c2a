//! MCP over Streamable HTTP: `/mcp` of `toolslot serve`.
//!
//! rmcp's Streamable HTTP server does the protocol (sessions by `Mcp-Session-Id`, `DELETE`,
//! SSE for the server's messages, the stateless 2026-07-28 path); [`bridge`] carries actix-web
//! requests to it after the server's own token, Host and Origin rules admitted them. This
//! file decides which toolslot session a request belongs to:
//! - a client with the `initialize` handshake gets a session of its own for its connection,
//!   in the workspace the endpoint's `workspace` query names (`/mcp?workspace=/path`), else its
//!   first `file://` root, else `server.workspace_root`; it ends with the connection;
//! - a 2026-07-28 client has no connection: its requests to one endpoint (workspace, and the
//!   `session` query a client may add to have a session of its own: `&session=NAME`) under one
//!   token share a session, closed after `server.idle_session_secs` without a request.
//!
//! Either way the workspace must lie under `server.workspace_root` when that is set, exactly as
//! for `POST /v1/sessions`, and sessions count against `server.max_sessions`.

pub mod bridge;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::InitializeRequestParams;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use toolslot::config::Config;
use toolslot::policy::Policy;

use super::Shared;
use crate::host::dispatcher::Dispatcher;
use crate::pipeline::session::SessionOptions;

/// A session shared by the requests of a client without connections: its workspace, the
/// `session` query it names, and the credentials it came with (so two tokens never share one).
type Key = (PathBuf, String, Vec<u8>);

/// Where the MCP requests of `toolslot serve` find their sessions.
pub struct HttpSessions {
    dispatcher: Arc<Dispatcher>,
    config: Arc<Config>,
    /// The sessions of clients without connections, with their last request.
    keyed: Mutex<HashMap<Key, (Arc<Shared>, Instant)>>,
}

impl std::fmt::Debug for HttpSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSessions").finish_non_exhaustive()
    }
}

impl HttpSessions {
    /// The sessions of `dispatcher`'s MCP clients, under `config`'s `[server]` rules.
    pub fn new(dispatcher: Arc<Dispatcher>, config: Arc<Config>) -> Arc<Self> {
        Arc::new(Self {
            dispatcher,
            config,
            keyed: Mutex::new(HashMap::new()),
        })
    }

    /// The dispatcher the sessions live on.
    pub fn dispatcher(&self) -> &Arc<Dispatcher> {
        &self.dispatcher
    }

    /// At the handshake: the session, when the endpoint names a workspace (a workspace that
    /// cannot be used fails the handshake); none yet when the client's roots will name it.
    ///
    /// # Errors
    /// An invalid-params error naming the problem: no workspace can be found, or the one named
    /// cannot be used.
    pub(super) fn open_at_initialize(
        &self,
        context: &RequestContext<RoleServer>,
        request: &InitializeRequestParams,
    ) -> Result<Option<Arc<Shared>>, ErrorData> {
        if let Some(asked) = asked_workspace(context) {
            return self.open(Some(&asked), true).map(Some);
        }
        if request.capabilities.roots.is_some() {
            return Ok(None);
        }
        if self.config.server.workspace_root.is_empty() {
            return Err(no_workspace());
        }
        self.open(None, true).map(Some)
    }

    /// The first request of a handshake connection whose session was left to its roots.
    ///
    /// # Errors
    /// As [`Self::open_at_initialize`], and when the client cannot list its roots.
    // Roots are deprecated from 2026-07-28 on, but this path serves only the revisions with a
    // handshake, which have them and whose clients name their project by them.
    #[allow(deprecated)]
    pub(super) async fn open_for(&self, context: &RequestContext<RoleServer>) -> Result<Arc<Shared>, ErrorData> {
        if let Some(asked) = asked_workspace(context) {
            return self.open(Some(&asked), true);
        }
        let roots = context.peer.list_roots().await.map_err(|e| {
            ErrorData::invalid_params(
                format!("the client's roots could not be listed ({e}); {}", no_workspace().message),
                None,
            )
        })?;
        let first = roots.roots.iter().find_map(|root| {
            url::Url::parse(&root.uri)
                .ok()
                .filter(|u| u.scheme() == "file")
                .and_then(|u| u.to_file_path().ok())
        });
        match first {
            Some(path) => self.open(Some(&path), true),
            None if !self.config.server.workspace_root.is_empty() => self.open(None, true),
            None => Err(no_workspace()),
        }
    }

    /// The session of a request of a client without connections (2026-07-28).
    ///
    /// # Errors
    /// As [`Self::open_at_initialize`].
    pub(super) fn keyed(&self, context: &RequestContext<RoleServer>) -> Result<Arc<Shared>, ErrorData> {
        let asked = asked_workspace(context);
        if asked.is_none() && self.config.server.workspace_root.is_empty() {
            return Err(no_workspace());
        }
        let credentials = parts(context)
            .and_then(|p| {
                p.headers
                    .get(http::header::AUTHORIZATION)
                    .or_else(|| p.headers.get(http::header::COOKIE))
            })
            .map(|v| v.as_bytes().to_vec())
            .unwrap_or_default();
        let named = query(context, "session").unwrap_or_default();
        let key = (asked.clone().unwrap_or_default(), named, credentials);
        let mut keyed = self.keyed.lock().unwrap_or_else(|p| p.into_inner());
        // Only the request's own session is looked at here; the others are the reaper's
        // (`reap`), so a request costs the same with ten thousand sessions as with one.
        if let Some((shared, last)) = keyed.get_mut(&key) {
            if self.keeps(shared, *last) {
                *last = Instant::now();
                return Ok(Arc::clone(shared));
            }
            keyed.remove(&key);
        }
        let shared = self.open(asked.as_deref(), false)?;
        keyed.insert(key, (Arc::clone(&shared), Instant::now()));
        Ok(shared)
    }

    /// Closes the sessions of clients without connections idle past
    /// `server.idle_session_secs`, and forgets those closed by someone else (`DELETE
    /// /v1/sessions/{id}`). The server's reaper calls it on its period.
    pub fn reap(&self) {
        let mut keyed = self.keyed.lock().unwrap_or_else(|p| p.into_inner());
        keyed.retain(|_, (shared, last)| self.keeps(shared, *last));
    }

    /// Whether a keyed session last asked for at `last` lives on: a session closed by someone
    /// else does not, and one idle too long is closed here.
    fn keeps(&self, shared: &Shared, last: Instant) -> bool {
        let idle = Duration::from_secs(self.config.server.idle_session_secs);
        match self.dispatcher.is_running(&shared.session) {
            Err(_) => false,
            Ok(running) if !running && !idle.is_zero() && last.elapsed() > idle => {
                tracing::info!(session = %shared.session, "idle MCP session closed");
                let _ = self.dispatcher.close_session(&shared.session);
                false
            }
            Ok(_) => true,
        }
    }

    /// Opens a session in `asked` (else `server.workspace_root`) under the server's rules.
    fn open(&self, asked: Option<&Path>, owned_by_connection: bool) -> Result<Arc<Shared>, ErrorData> {
        let workspace = crate::host::workspace::admit(asked, &self.config.server.workspace_root)
            .map_err(|e| ErrorData::invalid_params(e, None))?
            .ok_or_else(no_workspace)?;
        // A session does not start under a policy that does not load, or a mode it forbids.
        let policy = Policy::load(&self.config, &workspace).map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        if let Some(why) = policy.forbids(self.config.approval.mode) {
            return Err(ErrorData::invalid_params(why, None));
        }
        let policy = Arc::new(policy);
        let session = self
            .dispatcher
            .open_session_here_limited(
                SessionOptions {
                    workspace: Some(workspace),
                    approval_mode: None,
                    dialect: None,
                    policy: Some(Arc::clone(&policy)),
                },
                self.config.server.max_sessions,
            )
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(Shared::new(Arc::clone(&self.dispatcher), session, policy, owned_by_connection))
    }
}

/// The HTTP request a message came in (rmcp puts its head in the request's extensions).
fn parts(context: &RequestContext<RoleServer>) -> Option<&http::request::Parts> {
    context.extensions.get::<http::request::Parts>()
}

/// The endpoint's `workspace` query, when it has one.
fn asked_workspace(context: &RequestContext<RoleServer>) -> Option<PathBuf> {
    query(context, "workspace").map(PathBuf::from)
}

/// The endpoint's query parameter `name`, when it has a non-empty one.
fn query(context: &RequestContext<RoleServer>, name: &str) -> Option<String> {
    let query = parts(context)?.uri.query()?;
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, v)| k == name && !v.is_empty())
        .map(|(_, v)| v.into_owned())
}

fn no_workspace() -> ErrorData {
    ErrorData::invalid_params(
        "no workspace for this MCP session: add it to the endpoint (`/mcp?workspace=/path/to/project`), use a client that declares roots, or set server.workspace_root",
        None,
    )
}
