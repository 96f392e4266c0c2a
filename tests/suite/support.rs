//! Test support: small SSE builders, tools with controllable behaviour, and a round runner.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use toolslot::config::Config;
use toolslot::event::{PipelineEvent, ToolResult};
use toolslot::registry::RegistryBuilder;
use toolslot::tool::{Capability, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};
use toolslot_actors::{Dispatcher, RoundInput, SessionOptions};

/// An OpenAI Chat Completions stream with these calls (name, arguments).
pub fn openai_chat(calls: &[(&str, Value)], finish: &str) -> Vec<u8> {
    let mut out = String::new();
    for (n, (name, args)) in calls.iter().enumerate() {
        let head = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": n, "id": format!("call_{n}"), "type": "function", "function": {"name": name, "arguments": ""}}]}, "finish_reason": null}]});
        let body = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": n, "function": {"arguments": args.to_string()}}]}, "finish_reason": null}]});
        out.push_str(&format!("data: {head}\n\ndata: {body}\n\n"));
    }
    out.push_str(&format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    ));
    out.into_bytes()
}

/// The start of an Anthropic Messages stream: message_start and these complete tool_use
/// blocks.
pub fn anthropic_head(calls: &[(&str, Value)]) -> String {
    let mut out = format!(
        "event: message_start\ndata: {}\n\n",
        json!({"type": "message_start", "message": {"id": "msg_t", "content": []}})
    );
    for (i, (name, args)) in calls.iter().enumerate() {
        out.push_str(&format!("event: content_block_start\ndata: {}\n\n", json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": {}}})));
        out.push_str(&format!(
            "event: content_block_delta\ndata: {}\n\n",
            json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": args.to_string()}})
        ));
        out.push_str(&format!(
            "event: content_block_stop\ndata: {}\n\n",
            json!({"type": "content_block_stop", "index": i})
        ));
    }
    out
}

/// The end of an Anthropic stream: a text block, the stop reason, message_stop.
pub fn anthropic_tail(text: &str, stop: &str) -> String {
    let i = 99;
    let mut out = format!(
        "event: content_block_start\ndata: {}\n\n",
        json!({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
    );
    out.push_str(&format!(
        "event: content_block_delta\ndata: {}\n\n",
        json!({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": text}})
    ));
    out.push_str(&format!(
        "event: content_block_stop\ndata: {}\n\n",
        json!({"type": "content_block_stop", "index": i})
    ));
    out.push_str(&format!(
        "event: message_delta\ndata: {}\n\n",
        json!({"type": "message_delta", "delta": {"stop_reason": stop}})
    ));
    out.push_str(&format!("event: message_stop\ndata: {}\n\n", json!({"type": "message_stop"})));
    out
}

/// An OpenAI Chat stream whose calls carry raw (possibly broken) argument text.
pub fn openai_chat_raw(calls: &[(&str, &str)], finish: &str) -> Vec<u8> {
    let mut out = String::new();
    for (n, (name, args)) in calls.iter().enumerate() {
        let head = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": n, "id": format!("call_{n}"), "type": "function", "function": {"name": name, "arguments": args}}]}, "finish_reason": null}]});
        out.push_str(&format!("data: {head}\n\n"));
    }
    out.push_str(&format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    ));
    out.into_bytes()
}

/// A read-only, parallel tool that sleeps `ms` and answers `tag`.
pub struct Sleepy;

impl Tool for Sleepy {
    fn name(&self) -> &str {
        "sleepy"
    }
    fn description(&self) -> &str {
        "Sleeps, then echoes the tag"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"ms": {"type": "integer"}, "tag": {"type": "string"}}, "required": ["ms", "tag"]})
    }
    fn run<'a>(&'a self, input: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(input["ms"].as_u64().unwrap_or(0))).await;
            Ok(ToolOutput::text(input["tag"].as_str().unwrap_or("").to_string()))
        })
    }
}

impl ToolSpec for Sleepy {
    fn capabilities(&self) -> &[Capability] {
        &[Capability::ReadOnly]
    }
    fn supports_parallel(&self) -> bool {
        true
    }
}

/// A tool that panics, or fails, or counts its runs, depending on `mode`.
pub struct Odd {
    pub name: &'static str,
    pub runs: Arc<AtomicUsize>,
}

impl Tool for Odd {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "A tool that misbehaves on purpose"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"x": {}}})
    }
    fn run<'a>(&'a self, _input: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            self.runs.fetch_add(1, Ordering::SeqCst);
            match self.name {
                "panicky" => panic!("tool bug"),
                "failing" => Err(ToolError::tool("it failed")),
                _ => Ok(ToolOutput::text("ran")),
            }
        })
    }
}

impl ToolSpec for Odd {
    fn capabilities(&self) -> &[Capability] {
        &[Capability::ReadOnly]
    }
}

/// A test bed: config, a registry with the built-ins and the test tools, a workspace.
pub struct Bed {
    pub config: Arc<Config>,
    pub workspace: tempfile::TempDir,
    pub runs: Arc<AtomicUsize>,
}

impl Bed {
    pub fn new(toml: &str) -> Self {
        let workspace = tempfile::tempdir().unwrap();
        let file = workspace.path().join(".config.toml");
        let overflow = workspace.path().join(".overflow");
        std::fs::write(&file, toml).unwrap();
        // One worker thread per test system, and saved outputs and the ledger inside the
        // test's folder; the ledger's key outside it (one inside the workspace is refused), in
        // the build's folder rather than the user's home.
        let env = [
            ("TOOLSLOT_EXECUTION__WORKERS".to_string(), "1".to_string()),
            ("TOOLSLOT_OVERFLOW__DIR".to_string(), overflow.display().to_string()),
            (
                "TOOLSLOT_AUDIT__LEDGER_DIR".to_string(),
                workspace.path().join(".ledger").display().to_string(),
            ),
            (
                "TOOLSLOT_AUDIT__KEY_FILE".to_string(),
                concat!(env!("CARGO_TARGET_TMPDIR"), "/ledger-key/ledger.key").to_string(),
            ),
        ];
        let config = Arc::new(Config::load_with_env(Some(&file), env).unwrap());
        Self {
            config,
            workspace,
            runs: Arc::new(AtomicUsize::new(0)),
        }
    }

    pub fn dispatcher(&self) -> Dispatcher {
        let mut b = RegistryBuilder::new(Arc::clone(&self.config))
            .extend(toolslot::builtin::enabled(&self.config))
            .with_tool(Arc::new(Sleepy));
        for name in ["panicky", "failing", "counter"] {
            b = b.with_tool(Arc::new(Odd {
                name,
                runs: Arc::clone(&self.runs),
            }));
        }
        Dispatcher::new(Arc::clone(&self.config), Arc::new(b.build()))
    }

    pub fn session(&self, d: &Dispatcher) -> String {
        d.open_session(SessionOptions {
            workspace: Some(self.workspace.path().to_path_buf()),
            ..Default::default()
        })
    }
}

/// Submits `body` in one chunk and collects every event until the receiver ends.
pub async fn run_round(d: &Dispatcher, session: &str, body: Vec<u8>) -> Vec<PipelineEvent> {
    let stream = futures::stream::iter([Ok(body)]);
    let mut rx = d.submit_round(session, RoundInput::Bytes(Box::pin(stream))).unwrap();
    let mut events = Vec::new();
    while let Some(e) = tokio::time::timeout(Duration::from_secs(30), rx.recv()).await.expect("round hung") {
        events.push(e);
    }
    events
}

/// The results of the last `round_complete`.
pub fn results(events: &[PipelineEvent]) -> Vec<ToolResult> {
    events
        .iter()
        .rev()
        .find_map(|e| match e {
            PipelineEvent::RoundComplete { results, .. } => Some(results.clone()),
            _ => None,
        })
        .expect("a round_complete")
}

/// Notice kinds, in order, as their serialized names.
pub fn notice_kinds(events: &[PipelineEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            PipelineEvent::Notice(n) => serde_json::to_value(n.kind).ok().and_then(|v| v.as_str().map(str::to_string)),
            _ => None,
        })
        .collect()
}

/// Runs an async test body on a fresh actix system.
pub fn system<F: std::future::Future<Output = ()>>(f: F) {
    actix_rt::System::new().block_on(f);
}
