//! Span, attribute and metric names: the OpenTelemetry semantic conventions' where they cover
//! what toolslot does, `toolslot.*` where they do not.

/// `gen_ai.operation.name`: `execute_tool` on a call's span.
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
/// The operation of a tool call's span.
pub const EXECUTE_TOOL: &str = "execute_tool";
/// `gen_ai.tool.name`: the tool's resolved name.
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
/// `gen_ai.tool.call.id`: the provider's id of the call.
pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
/// `gen_ai.tool.type`: `function` for every tool the model calls by name.
pub const GEN_AI_TOOL_TYPE: &str = "gen_ai.tool.type";
/// `gen_ai.tool.call.arguments`: only with `telemetry.capture_content`.
pub const GEN_AI_TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
/// `gen_ai.tool.call.result`: only with `telemetry.capture_content`.
pub const GEN_AI_TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
/// `gen_ai.conversation.id`: the session.
pub const GEN_AI_CONVERSATION_ID: &str = "gen_ai.conversation.id";
/// `error.type`: a failed call's error category (`refused`, `timeout`, …) or `tool_error`.
pub const ERROR_TYPE: &str = "error.type";

/// `mcp.method.name`: `tools/call`.
pub const MCP_METHOD_NAME: &str = "mcp.method.name";
/// `mcp.session.id`: the streamable HTTP session, where the server gave one.
pub const MCP_SESSION_ID: &str = "mcp.session.id";
/// `network.transport`: `pipe` for stdio servers, `tcp` for HTTP ones.
pub const NETWORK_TRANSPORT: &str = "network.transport";

/// `toolslot.round`: the round's number in its session.
pub const ROUND: &str = "toolslot.round";
/// `toolslot.call.index`: the call's index in the response.
pub const CALL_INDEX: &str = "toolslot.call.index";
/// `toolslot.speculative`: the call started before the stream ended.
pub const SPECULATIVE: &str = "toolslot.speculative";
/// `toolslot.approval.decision`: `run` or `refuse`.
pub const APPROVAL_DECISION: &str = "toolslot.approval.decision";
/// `toolslot.approval.decided_by`: rule, mode, hook, host, remembered, timeout.
pub const APPROVAL_DECIDED_BY: &str = "toolslot.approval.decided_by";
/// `toolslot.policy.rule`: the policy rule that matched (`layer#index`).
pub const POLICY_RULE: &str = "toolslot.policy.rule";
/// `toolslot.sandbox`: the sandbox backend configured for programs (`shell.sandbox`).
pub const SANDBOX: &str = "toolslot.sandbox";
/// `toolslot.approval.wait_ms`: how long the host took to answer, when it was asked.
pub const APPROVAL_WAIT_MS: &str = "toolslot.approval.wait_ms";
/// `toolslot.loop_guard`: the loop guard's verdict after this call, when it gave one: `warn`
/// (the failure streak reached `loop_guard.failure_warn`) or `pause` (this failure paused the
/// session; later calls are refused with `error.type` `unavailable` until the host resumes it).
pub const LOOP_GUARD: &str = "toolslot.loop_guard";
/// `toolslot.repair`: the repair step that made the arguments parse (`close_brackets`, …), or
/// `rejected`; absent for arguments valid as sent.
pub const REPAIR: &str = "toolslot.repair";
/// `toolslot.output.truncated`: `true` when the result was cut to its budget.
pub const OUTPUT_TRUNCATED: &str = "toolslot.output.truncated";
/// `toolslot.output.overflow_ref`: the ref of a cut result's full text (`retrieve_tool_result`).
pub const OVERFLOW_REF: &str = "toolslot.output.overflow_ref";
/// `toolslot.remote.key`: a remote call's key (its record on the bus).
pub const REMOTE_KEY: &str = "toolslot.remote.key";
/// `toolslot.remote.pool`: the pool a remote call was routed to.
pub const REMOTE_POOL: &str = "toolslot.remote.pool";
/// `toolslot.worker.id`: the worker that ran a remote call.
pub const WORKER_ID: &str = "toolslot.worker.id";

/// Histogram of tool call durations (s), by `gen_ai.tool.name` and `error.type`.
pub const METRIC_EXECUTE_TOOL_DURATION: &str = "gen_ai.execute_tool.duration";
/// Histogram of MCP client request durations (s), by `mcp.method.name` and `error.type`.
pub const METRIC_MCP_CLIENT_DURATION: &str = "mcp.client.operation.duration";
/// Histogram of the time a call waited for the host's approval (s), by decision.
pub const METRIC_APPROVAL_WAIT: &str = "toolslot.approval.wait.duration";
