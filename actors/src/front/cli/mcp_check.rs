//! `toolslot mcp-check`: connect to one MCP server as toolslot would, list its tools as the
//! catalog would show them, and optionally call each one. For a user asking "does my server
//! work here?", and for the MCP conformance suite, which drives a client with a server URL.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value, json};
use toolslot::config::{Config, McpServerConfig};
use toolslot::mcp::client::{ConnectOptions, connect};
use toolslot::mcp::{capabilities_for, server_prefixes, tool_name};

use super::CliError;

/// Options of `mcp-check`.
#[derive(Debug, clap::Args)]
pub struct McpCheckArgs {
    /// Config file overlaying the built-in defaults (timeouts, redirects).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The server's name (the prefix of its tools' names).
    #[arg(long, default_value = "server")]
    pub name: String,
    /// A PEM file of certificates to trust for an https server.
    #[arg(long)]
    pub ca_cert: Option<String>,
    /// The environment variable holding the bearer token of an HTTP server.
    #[arg(long)]
    pub bearer_token_env: Option<String>,
    /// A header sent to an HTTP server, as NAME=VALUE (repeatable).
    #[arg(long = "header", value_name = "NAME=VALUE")]
    pub headers: Vec<String>,
    /// Call every tool once, with arguments made from its schema (numbers 1, strings "x", …).
    /// Every tool means every tool, including ones that write or delete: use it on servers you
    /// are testing, not on ones holding data you care about.
    #[arg(long)]
    pub call_all: bool,
    /// A streamable HTTP URL, or a stdio server's command and arguments.
    #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
    pub server: Vec<String>,
}

pub fn run(args: McpCheckArgs) -> Result<(), CliError> {
    let cfg = Config::load(args.config.as_deref())?;
    let first = &args.server[0];
    let is_url = first.starts_with("http://") || first.starts_with("https://");
    // `ftp://…`, `ws://…`: a URL of a scheme MCP has no transport for, not a program to start.
    if !is_url && args.server.len() == 1 && url::Url::parse(first).is_ok_and(|u| u.has_host()) {
        return Err(CliError::Usage(format!(
            "`{first}` is not an http(s) URL: a streamable HTTP server's URL starts with http:// or https://, and a stdio server is given as its command"
        )));
    }
    let mut headers = Map::new();
    for h in &args.headers {
        let (name, value) = h
            .split_once('=')
            .ok_or_else(|| CliError::Usage(format!("--header takes NAME=VALUE, not `{h}`")))?;
        headers.insert(name.to_string(), json!(value));
    }
    let mut table = json!({"name": args.name, "ca_cert": args.ca_cert, "bearer_token_env": args.bearer_token_env, "headers": headers});
    if is_url {
        table["url"] = json!(first);
    } else {
        table["command"] = json!(args.server);
    }
    let server: McpServerConfig = serde_json::from_value(table).map_err(|e| CliError::Usage(format!("server: {e}")))?;
    let startup = Duration::from_millis(cfg.mcp.startup_timeout_ms);
    let call_timeout = Duration::from_millis(cfg.mcp.call_timeout_ms);
    let mut out = std::io::stdout().lock();
    let io = |e: std::io::Error| CliError::Io(format!("writing stdout: {e}"));
    let system = actix_rt::System::new();
    system.block_on(async {
        let options = ConnectOptions::of(&cfg.mcp, startup, None);
        let client = connect(&server, options).await.map_err(CliError::Startup)?;
        if let Some(mut stderr) = client.take_stderr() {
            // Kept flowing, so a chatty server never blocks on a full pipe.
            actix_rt::spawn(async move {
                let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
            });
        }
        let listing = client
            .list_tools()
            .await
            .map_err(|e| CliError::Startup(format!("server `{}`: listing tools failed: {e:?}", server.name)))?;
        let tools: Vec<Value> = listing
            .iter()
            .map(|t| {
                let remote = t.get("name").and_then(Value::as_str).unwrap_or("");
                json!({
                    "name": tool_name(&server_prefixes(std::slice::from_ref(&server))[0].0, remote),
                    "remote": remote,
                    "capabilities": capabilities_for(t.get("annotations"), false),
                })
            })
            .collect();
        let protocol = client.protocol_version();
        writeln!(out, "{}", json!({"server": server.name, "protocol": protocol, "tools": tools})).map_err(io)?;
        if args.call_all {
            for t in &listing {
                let remote = t.get("name").and_then(Value::as_str).unwrap_or("");
                let input = placeholder(t.get("inputSchema").unwrap_or(&Value::Null));
                let line = match client.call(remote, input.clone(), call_timeout).await {
                    Ok(result) => json!({"call": remote, "input": input, "result": result}),
                    Err(e) => json!({"call": remote, "input": input, "error": format!("{e:?}")}),
                };
                writeln!(out, "{line}").map_err(io)?;
            }
        }
        client.shutdown().await;
        Ok(())
    })
}

/// Arguments that satisfy `schema`'s types: what a smoke test can send without knowing the
/// tool.
fn placeholder(schema: &Value) -> Value {
    let kind = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null").unwrap_or("null"),
        _ if schema.get("properties").is_some() => "object",
        _ => "null",
    };
    if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|v| v.first()) {
        return first.clone();
    }
    match kind {
        "object" => {
            let mut obj = Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    obj.insert(k.clone(), placeholder(v));
                }
            }
            Value::Object(obj)
        }
        "array" => json!([]),
        "string" => json!("x"),
        "integer" | "number" => json!(1),
        "boolean" => json!(true),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::placeholder;
    use serde_json::json;

    #[test]
    fn placeholders_follow_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "number"}, "s": {"type": ["string", "null"]}, "e": {"enum": ["x", "y"]},
            "o": {"type": "object", "properties": {"b": {"type": "boolean"}}}, "l": {"type": "array"}}});
        assert_eq!(placeholder(&schema), json!({"a": 1, "s": "x", "e": "x", "o": {"b": true}, "l": []}));
    }
}
