//! MCP tools as `ToolSpec`s, and the resource discovery helpers.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::result::{describe_content, map_call_result};
use crate::output::wrap_external;
use crate::tool::{
    Capability, ErrorCategory, InputAnswer, InputRequest, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSource, ToolSpec,
};

/// The only MCP tools that are read-only by our own declaration (not a server's word): the
/// discovery helpers over the connected servers' resources.
pub const DISCOVERY_HELPERS: &[&str] = &["list_mcp_resources", "read_mcp_resource"];

/// Why a call to a server did not produce a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpCallError {
    /// The server is down, starting, or failed to start; nothing was sent.
    #[error("MCP server `{server}` is unavailable ({reason}); nothing was sent to it")]
    Unavailable {
        /// The server.
        server: String,
        /// Why.
        reason: String,
    },
    /// The server died while the call was in flight; it may or may not have acted.
    #[error("MCP server `{server}` stopped while the call was running ({reason}); its outcome is unknown, so check before retrying")]
    OutcomeUnknown {
        /// The server.
        server: String,
        /// Why.
        reason: String,
    },
    /// No answer in time; the request was cancelled at the server.
    #[error("MCP server `{server}` did not answer within {ms} ms; the request was cancelled and its outcome is unknown")]
    Timeout {
        /// The server.
        server: String,
        /// The timeout.
        ms: u64,
    },
    /// The server answered with a JSON-RPC error (unknown tool, bad arguments, …).
    #[error("MCP server `{server}` refused the call: {message}")]
    Refused {
        /// The server.
        server: String,
        /// Its message.
        message: String,
    },
    /// The server answered, but not with anything toolslot reads (over
    /// `mcp.max_message_bytes`, or not the shape of an answer): the call ran, its result is
    /// lost.
    #[error("MCP server `{server}` answered, but the answer was not read: {reason}. The call ran; its result is lost")]
    Unreadable {
        /// The server.
        server: String,
        /// Why (toolslot's words).
        reason: String,
    },
}

/// Receives a call's progress: (progress, total, message).
pub type ProgressSink = Arc<dyn Fn(f64, Option<f64>, Option<String>) + Send + Sync>;

/// Receives a question the server asks while a call runs (elicitation) and answers it.
pub type InputSink = Arc<dyn Fn(InputRequest) -> BoxFuture<'static, InputAnswer> + Send + Sync>;

/// What a call's server may send besides its answer, and where it goes.
#[derive(Clone, Default)]
pub struct CallHooks {
    /// Progress notifications.
    pub progress: Option<ProgressSink>,
    /// Questions for the user, with the session the call belongs to (a question is only put
    /// to a session whose call is in flight).
    pub input: Option<(String, InputSink)>,
}

/// Calls tools on one server. Implemented by the actors crate's supervised server actor.
pub trait McpCaller: Send + Sync {
    /// The server's name.
    fn server(&self) -> &str;
    /// Calls `tool` with `args`; the answer is the `tools/call` result as JSON. `read_only`
    /// allows one blind retry when the server dies mid-call; progress notifications and
    /// questions go to `hooks`.
    fn call<'a>(&'a self, tool: &'a str, args: Value, read_only: bool, hooks: CallHooks) -> BoxFuture<'a, Result<Value, McpCallError>>;
}

/// What a server says about one of its tools, with the name and capabilities we give it.
#[derive(Debug, Clone)]
pub struct McpToolDef {
    /// The catalog name (`<prefix>__<tool>`).
    pub name: String,
    /// The name at the server.
    pub remote: String,
    /// The server's title for it (`title`, or `annotations.title`), if any.
    pub title: Option<String>,
    /// The server's description.
    pub description: String,
    /// The server's input schema.
    pub schema: Value,
    /// Capabilities from the annotation policy.
    pub capabilities: Vec<Capability>,
    /// Whether the capabilities are the server's word (annotations it gave, believed).
    pub capabilities_declared: bool,
    /// Deferred until tool_search loads it.
    pub defer: bool,
    /// What was changed to admit it (descriptions trimmed, a name taken), for a notice.
    pub note: Option<String>,
    /// The server's output schema, when the tool declares one.
    pub output_schema: Option<Value>,
}

/// What bounds each tool of a listing.
#[derive(Debug, Clone, Copy)]
pub struct ListingLimits {
    /// Longest description kept (characters, 0 = no cap); descriptions inside an oversized
    /// schema are cut to it too.
    pub description_max_chars: usize,
    /// Largest schema (bytes, serialized).
    pub max_schema_bytes: usize,
}

impl ListingLimits {
    /// The limits of `[mcp]`.
    pub fn of(cfg: &crate::config::McpConfig) -> Self {
        Self {
            description_max_chars: cfg.description_max_chars,
            max_schema_bytes: cfg.max_schema_bytes,
        }
    }
}

/// The remote name of a listing entry, when it has one.
pub fn entry_name(entry: &Value) -> Option<&str> {
    entry.get("name").and_then(Value::as_str).filter(|n| !n.is_empty())
}

/// A server's `tools/list` answer as tools calling through `caller`, named under `prefix`
/// (see [`super::server_prefixes`]); each entry is admitted on its own (see [`tool_from_entry`]).
pub fn tools_from_listing(
    cfg: &crate::config::McpServerConfig,
    prefix: &str,
    listing: &[Value],
    limits: ListingLimits,
    caller: &Arc<dyn McpCaller>,
) -> Vec<Arc<dyn crate::tool::ToolSpec>> {
    listing
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let name = match entry_name(entry) {
                Some(remote) => super::tool_name(prefix, remote),
                None => super::tool_name(prefix, &format!("entry_{i}")),
            };
            tool_from_entry(cfg, name, None, entry, limits, caller)
        })
        .collect()
}

/// One entry of a listing as the tool `name`. An entry that is not a usable tool (not an
/// object, no string name, no object `inputSchema`, annotations that are not an object of
/// booleans, a schema nested too deep or too large even with its descriptions trimmed)
/// becomes a fail-closed stand-in saying why: one bad entry never costs the server's other
/// tools. `note` (a rename) is reported with the tool.
pub fn tool_from_entry(
    cfg: &crate::config::McpServerConfig,
    name: String,
    note: Option<String>,
    entry: &Value,
    limits: ListingLimits,
    caller: &Arc<dyn McpCaller>,
) -> Arc<dyn crate::tool::ToolSpec> {
    let original = entry_name(entry).map_or_else(|| name.clone(), str::to_string);
    match checked_entry(entry, limits) {
        Ok((schema, trimmed)) => {
            let annotations = entry.get("annotations");
            let notes: Vec<String> = note.into_iter().chain(trimmed).collect();
            let def = McpToolDef {
                name,
                remote: original,
                title: entry
                    .get("title")
                    .or_else(|| annotations.and_then(|a| a.get("title")))
                    .and_then(Value::as_str)
                    .map(str::to_string),
                description: entry.get("description").and_then(Value::as_str).unwrap_or("").to_string(),
                schema,
                capabilities: super::capabilities_for(annotations, cfg.trust_annotations),
                capabilities_declared: cfg.trust_annotations && annotations.is_some(),
                defer: cfg.defer,
                note: (!notes.is_empty()).then(|| notes.join("; ")),
                output_schema: entry.get("outputSchema").filter(|s| s.is_object()).cloned(),
            };
            Arc::new(McpTool::new(def, limits.description_max_chars, Arc::clone(caller)))
        }
        Err(reason) => Arc::new(crate::registry::FailClosedTool::new(
            name,
            format!("{original} (MCP server `{}`)", cfg.name),
            reason,
            ToolSource::Mcp,
        )),
    }
}

/// The entry's schema, fit for the catalog, and a note when it had to be trimmed; or why the
/// entry is not a usable tool.
fn checked_entry(entry: &Value, limits: ListingLimits) -> Result<(Value, Option<String>), String> {
    let obj = entry.as_object().ok_or("the server listed it as something other than an object")?;
    entry_name(entry).ok_or("it has no name (a non-empty string)")?;
    if obj.get("description").is_some_and(|d| !d.is_string() && !d.is_null()) {
        return Err("its description is not a string".into());
    }
    match obj.get("annotations") {
        None | Some(Value::Null) => {}
        Some(Value::Object(a)) => {
            for hint in ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] {
                if a.get(hint).is_some_and(|v| !v.is_boolean()) {
                    return Err(format!("its annotation `{hint}` is not a boolean"));
                }
            }
        }
        Some(_) => return Err("its annotations are not an object".into()),
    }
    let schema = match obj.get("inputSchema") {
        Some(s @ Value::Object(_)) => s.clone(),
        Some(_) => return Err("its inputSchema is not an object".into()),
        None => return Err("it has no inputSchema".into()),
    };
    let text = schema.to_string();
    if text.contains(super::frame::TOO_DEEP) {
        return Err("its inputSchema is nested deeper than mcp.max_json_depth".into());
    }
    if text.len() <= limits.max_schema_bytes {
        return Ok((schema, None));
    }
    let mut trimmed = schema;
    trim_descriptions(&mut trimmed, limits.description_max_chars);
    let size = trimmed.to_string().len();
    if size > limits.max_schema_bytes {
        return Err(format!(
            "its inputSchema is {} bytes, over mcp.max_schema_bytes ({}) even with the descriptions inside it trimmed",
            text.len(),
            limits.max_schema_bytes
        ));
    }
    Ok((
        trimmed,
        Some(format!(
            "the descriptions inside its inputSchema were trimmed to mcp.description_max_chars, from {} to {size} bytes, to fit mcp.max_schema_bytes",
            text.len()
        )),
    ))
}

/// Cuts every `description` and `title` string inside `schema` to `max` characters.
fn trim_descriptions(schema: &mut Value, max: usize) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match value {
                    Value::String(text) if (key == "description" || key == "title") && text.chars().count() > max => {
                        *text = text.chars().take(max.saturating_sub(1)).collect::<String>() + "…";
                    }
                    other => trim_descriptions(other, max),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| trim_descriptions(v, max)),
        _ => {}
    }
}

/// One server tool in the slot.
pub struct McpTool {
    name: String,
    remote: String,
    title: Option<String>,
    description: String,
    schema: Value,
    capabilities: Vec<Capability>,
    capabilities_declared: bool,
    defer: bool,
    note: Option<String>,
    /// The tool's `outputSchema`, compiled: its results' structured content must match it.
    output: Option<Arc<jsonschema::Validator>>,
    /// The tool's `outputSchema` as the server wrote it.
    output_schema: Option<Value>,
    caller: Arc<dyn McpCaller>,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.name)
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    /// The tool `def` calling through `caller`. The description is stripped of control
    /// characters and capped at `description_max_chars` (0 = no cap): it comes from a server we
    /// do not control and goes straight into the prompt.
    pub fn new(def: McpToolDef, description_max_chars: usize, caller: Arc<dyn McpCaller>) -> Self {
        let mut description: String = def.description.chars().filter(|c| !c.is_control() || *c == '\n').collect();
        if description_max_chars > 0 && description.chars().count() > description_max_chars {
            description = description
                .chars()
                .take(description_max_chars.saturating_sub(1))
                .collect::<String>()
                + "…";
        }
        if description.trim().is_empty() {
            description = format!("Tool `{}` of MCP server `{}`.", def.remote, caller.server());
        }
        // Untrusted text, like the description: no control characters, under the same cap.
        let cap = if description_max_chars == 0 {
            usize::MAX
        } else {
            description_max_chars
        };
        let title = def.title.map(|t| t.chars().filter(|c| !c.is_control()).take(cap).collect());
        // A schema that does not compile cannot be checked against; the results are still
        // the server's, given as they came.
        let output = def.output_schema.as_ref().and_then(|schema| match jsonschema::validator_for(schema) {
            Ok(v) => Some(Arc::new(v)),
            Err(e) => {
                tracing::warn!(server = %caller.server(), tool = %def.remote, error = %e, "outputSchema does not compile; results are not checked");
                None
            }
        });
        Self {
            name: def.name,
            remote: def.remote,
            title,
            description,
            schema: def.schema,
            capabilities: def.capabilities,
            capabilities_declared: def.capabilities_declared,
            defer: def.defer,
            note: def.note,
            // Listed only when it compiles: a client cannot check against it either.
            output_schema: def.output_schema.filter(|_| output.is_some()),
            output,
            caller,
        }
    }
}

/// The model's view of a failed call. What the server said (its error message, the end of its
/// stderr in a reason) is external content like its answers, so it is wrapped; toolslot's own
/// words around it are not.
fn to_tool_error(e: McpCallError) -> ToolError {
    let category = match &e {
        McpCallError::Unavailable { .. } => ErrorCategory::Unavailable,
        McpCallError::Timeout { .. } => ErrorCategory::Timeout,
        McpCallError::OutcomeUnknown { .. } | McpCallError::Refused { .. } | McpCallError::Unreadable { .. } => ErrorCategory::ToolError,
    };
    let started = !matches!(e, McpCallError::Unavailable { .. });
    let message = match e {
        McpCallError::Unavailable { server, reason } => format!(
            "MCP server `{server}` is unavailable; nothing was sent to it. What it reported:\n{}",
            wrap_external(&format!("mcp:{server}"), &reason)
        ),
        McpCallError::OutcomeUnknown { server, reason } => format!(
            "MCP server `{server}` stopped while the call was running; its outcome is unknown, so check before retrying. What it reported:\n{}",
            wrap_external(&format!("mcp:{server}"), &reason)
        ),
        McpCallError::Refused { server, message } => format!(
            "MCP server `{server}` refused the call. Its message:\n{}",
            wrap_external(&format!("mcp:{server}"), &message)
        ),
        other @ (McpCallError::Timeout { .. } | McpCallError::Unreadable { .. }) => other.to_string(),
    };
    ToolError {
        category,
        message,
        field: None,
        started,
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn input_schema(&self) -> Value {
        self.schema.clone()
    }
    fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }
    fn output_schema(&self) -> Option<&Value> {
        self.output_schema.as_ref()
    }
    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let read_only = crate::tool::is_read_only(&self.capabilities);
            let (index, id) = (ctx.index, ctx.call_id.clone());
            let services = Arc::clone(&ctx.services);
            let progress: ProgressSink = Arc::new(move |p, t, m| services.progress(index, &id, p, t, m));
            let (services, id) = (Arc::clone(&ctx.services), ctx.call_id.clone());
            let ask: InputSink = Arc::new(move |request| services.request_input(index, &id, request));
            let hooks = CallHooks {
                progress: Some(progress),
                input: Some((ctx.session_id.clone(), ask)),
            };
            let result = self
                .caller
                .call(&self.remote, input, read_only, hooks)
                .await
                .map_err(to_tool_error)?;
            map_call_result(&result, self.caller.server(), &self.remote, self.output.as_deref())
        })
    }
}

impl ToolSpec for McpTool {
    fn capabilities(&self) -> &[Capability] {
        &self.capabilities
    }
    fn capabilities_declared(&self) -> bool {
        self.capabilities_declared
    }
    fn admission_note(&self) -> Option<String> {
        self.note.clone()
    }
    fn source(&self) -> ToolSource {
        ToolSource::Mcp
    }
    fn defer_loading(&self) -> bool {
        self.defer
    }
    fn supports_parallel(&self) -> bool {
        crate::tool::is_read_only(&self.capabilities)
    }
}

/// A server's resources, for the discovery helpers.
pub trait ResourceSource: Send + Sync {
    /// The server's name.
    fn server(&self) -> &str;
    /// `resources/list`, as JSON.
    fn list_resources(&self) -> BoxFuture<'_, Result<Value, McpCallError>>;
    /// `resources/read` of `uri`, as JSON.
    fn read_resource<'a>(&'a self, uri: &'a str) -> BoxFuture<'a, Result<Value, McpCallError>>;
}

/// `list_mcp_resources`: what the connected servers offer to read.
pub struct ListMcpResources(pub Vec<Arc<dyn ResourceSource>>);

/// `read_mcp_resource`: reads one resource of one server.
pub struct ReadMcpResource(pub Vec<Arc<dyn ResourceSource>>);

impl Tool for ListMcpResources {
    fn name(&self) -> &str {
        "list_mcp_resources"
    }
    fn description(&self) -> &str {
        "List the resources (files, documents, data) the connected MCP servers offer, with their URIs. Read one with read_mcp_resource."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"server": {"type": "string", "description": "Only this server"}}, "additionalProperties": false})
    }
    fn run<'a>(&'a self, input: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let only = input.get("server").and_then(Value::as_str);
            let mut out = String::new();
            for source in self.0.iter().filter(|s| only.is_none_or(|o| o == s.server())) {
                match source.list_resources().await {
                    Ok(list) => {
                        let items = list.get("resources").and_then(Value::as_array).cloned().unwrap_or_default();
                        out.push_str(&format!("{} ({} resources)\n", source.server(), items.len()));
                        for r in items {
                            let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                            out.push_str(&format!("- {} {} {}\n", s("uri"), s("name"), s("mimeType")));
                        }
                    }
                    Err(e) => out.push_str(&format!("{}: {e}\n", source.server())),
                }
            }
            if out.is_empty() {
                return Err(ToolError::invalid("server", "no connected MCP server matches"));
            }
            Ok(ToolOutput::text(out))
        })
    }
}

impl ToolSpec for ListMcpResources {
    fn capabilities(&self) -> &[Capability] {
        &[Capability::ReadOnly]
    }
    fn source(&self) -> ToolSource {
        ToolSource::Mcp
    }
    fn supports_parallel(&self) -> bool {
        true
    }
}

impl Tool for ReadMcpResource {
    fn name(&self) -> &str {
        "read_mcp_resource"
    }
    fn description(&self) -> &str {
        "Read one resource of an MCP server by its URI (see list_mcp_resources)."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"server": {"type": "string"}, "uri": {"type": "string"}}, "required": ["server", "uri"], "additionalProperties": false})
    }
    fn run<'a>(&'a self, input: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let server = input.get("server").and_then(Value::as_str).unwrap_or("");
            let uri = input.get("uri").and_then(Value::as_str).unwrap_or("");
            let Some(source) = self.0.iter().find(|s| s.server() == server) else {
                let known: Vec<&str> = self.0.iter().map(|s| s.server()).collect();
                return Err(ToolError::invalid(
                    "server",
                    format!("no MCP server `{server}`; connected: {}", known.join(", ")),
                ));
            };
            let result = source.read_resource(uri).await.map_err(to_tool_error)?;
            let contents = result.get("contents").and_then(Value::as_array).cloned().unwrap_or_default();
            let text: Vec<String> = contents
                .iter()
                .map(|c| describe_content(&json!({"type": "resource", "resource": c}), source.server()))
                .collect();
            Ok(ToolOutput::text(text.join("\n")))
        })
    }
}

impl ToolSpec for ReadMcpResource {
    fn capabilities(&self) -> &[Capability] {
        &[Capability::ReadOnly]
    }
    fn source(&self) -> ToolSource {
        ToolSource::Mcp
    }
    fn supports_parallel(&self) -> bool {
        true
    }
}
