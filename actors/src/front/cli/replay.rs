//! `toolslot replay`: recorded model responses through the full pipeline.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::host::dispatcher::Dispatcher;
use crate::pipeline::chain::RoundInput;
use crate::pipeline::session::SessionOptions;
use crate::pipeline::stages::approval::HostDecision;
use futures::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt};
use toolslot::config::Config;
use toolslot::event::PipelineEvent;
use toolslot::results::{ResultFormat, SentNames};
use toolslot::stream::Dialect;

use super::CliError;

/// Options of `replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// Config file overlaying the built-in defaults.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// auto | anthropic | openai-chat | openai-responses | gemini.
    #[arg(long, default_value = "auto")]
    pub dialect: String,
    /// Workspace root for file tools (default: the current folder).
    #[arg(long)]
    pub workspace: Option<PathBuf>,
    /// Answer approval requests: all (approve), session (approve for the session), project
    /// (approve for the project), none (reject) or reject-session (reject for the session); a
    /// comma-separated list answers the requests in order, its last answer the rest.
    #[arg(long)]
    pub approve: Option<String>,
    /// Offer spawn_agent, its children answered by these recorded responses in turn.
    #[arg(long = "agent-response", value_name = "FILE")]
    pub agent_responses: Vec<PathBuf>,
    /// jsonl (default when stdout is not a terminal) or pretty.
    #[arg(long)]
    pub format: Option<String>,
    /// Also give each round's results as the messages the provider's next request needs, in
    /// `round_complete`'s `messages`: anthropic, openai-chat, openai-responses or gemini.
    #[arg(long)]
    pub results: Option<String>,
    /// Recorded responses, one round (or several messages) each; `-` reads stdin.
    #[arg(required = true)]
    pub files: Vec<String>,
}

/// How approval requests are answered.
#[derive(Clone, PartialEq, Eq)]
enum Answerer {
    /// These answers in turn, the last one for every request after.
    Given(Vec<HostDecision>),
    Prompt,
}

/// `--approve`'s answers: `all`, `session`, `none`, or a comma-separated list of them.
fn answers(list: &str) -> Result<Vec<HostDecision>, CliError> {
    list.split(',')
        .map(|a| match a.trim() {
            "all" => Ok(HostDecision::Approve),
            "session" => Ok(HostDecision::ApproveForSession),
            "project" => Ok(HostDecision::ApproveForProject),
            "none" => Ok(HostDecision::Reject),
            "reject-session" => Ok(HostDecision::RejectForSession),
            other => Err(CliError::Usage(format!(
                "--approve takes all, session, project, none or reject-session (or a comma-separated list of them), not `{other}`"
            ))),
        })
        .collect()
}

pub fn run(args: ReplayArgs) -> Result<(), CliError> {
    let cfg = Arc::new(Config::load(args.config.as_deref())?);
    let dialect = match args.dialect.as_str() {
        "auto" => None,
        d => Some(d.parse::<Dialect>().map_err(CliError::Usage)?),
    };
    let answerer = match args.approve.as_deref() {
        Some(list) => Answerer::Given(answers(list)?),
        None => Answerer::Prompt,
    };
    let pretty = match args.format.as_deref() {
        Some("pretty") => true,
        Some("jsonl") => false,
        Some(other) => {
            return Err(CliError::Usage(format!("--format takes jsonl or pretty, not `{other}`")));
        }
        None => std::io::stdout().is_terminal(),
    };
    let results_format = args
        .results
        .as_deref()
        .map(|f| f.parse::<ResultFormat>().map_err(|e| CliError::Usage(format!("--results: {e}"))))
        .transpose()?;
    let mut printer = Printer {
        pretty,
        results: results_format.map(|f| (f, SentNames::default())),
    };
    if args.files.is_empty() {
        return Err(CliError::Usage("replay needs at least one FILE (or - for stdin)".into()));
    }
    // Unusable input is refused before anything runs.
    for f in &args.files {
        if f != "-" && std::fs::metadata(f).map(|m| !m.is_file()).unwrap_or(true) {
            return Err(CliError::Io(format!("cannot read `{f}`: not a readable file")));
        }
    }
    let workspace = args.workspace.unwrap_or_else(|| PathBuf::from("."));
    if !workspace.is_dir() {
        return Err(CliError::Usage(format!("--workspace `{}` is not a folder", workspace.display())));
    }
    // A session does not start under a policy that does not load, or a mode it forbids.
    let policy = Arc::new(toolslot::policy::Policy::load(&cfg, &workspace).map_err(|e| CliError::Usage(e.to_string()))?);
    if let Some(why) = policy.forbids(cfg.approval.mode) {
        return Err(CliError::Usage(why));
    }
    let runner = super::recorded_runner(&args.agent_responses)?;
    let system = actix_rt::System::new();
    system.block_on(async move {
        let toolset = crate::host::toolset::build_toolset(Arc::clone(&cfg), runner).await.map_err(CliError::Startup)?;
        for notice in toolset.notices.iter().chain(toolset.registry.current().notices()) {
            printer.print(&PipelineEvent::Notice(notice.clone()))?;
        }
        let toolset_remote = toolset.remote.clone();
        let dispatcher = toolset.attach(Dispatcher::new(cfg, toolset.registry.clone()));
        let session = dispatcher.open_session(SessionOptions {
            workspace: Some(workspace),
            approval_mode: None,
            dialect,
            policy: Some(policy),
        });
        let can_prompt = answerer == Answerer::Prompt && std::io::stdin().is_terminal() && !args.files.iter().any(|f| f == "-");
        let mut asked = 0usize;
        for file in &args.files {
            let input = open_input(file).await?;
            let mut events = dispatcher.submit_round(&session, RoundInput::Bytes(input)).map_err(|e| CliError::Io(e.to_string()))?;
            while let Some(event) = events.recv().await {
                printer.print(&event)?;
                // The session's own requests, and its sub-agents' (answered at their session).
                let ask = match &event {
                    PipelineEvent::ApprovalRequired {
                        index,
                        name,
                        input,
                        request,
                        ..
                    } => Some((session.as_str(), index, name, input, *request)),
                    PipelineEvent::Subagent { session: child, event, .. } => match event.as_ref() {
                        PipelineEvent::ApprovalRequired {
                            index,
                            name,
                            input,
                            request,
                            ..
                        } => Some((child.as_str(), index, name, input, *request)),
                        _ => None,
                    },
                    _ => None,
                };
                if let Some((at, index, name, input, request)) = ask {
                    let decision = match &answerer {
                        Answerer::Given(list) => {
                            asked += 1;
                            list.get(asked - 1).or(list.last()).copied().unwrap_or(HostDecision::Reject)
                        }
                        Answerer::Prompt if can_prompt => prompt(*index, name, input),
                        Answerer::Prompt => {
                            eprintln!("toolslot: call {index} (`{name}`) needs approval and there is no terminal to ask; rejected (use --approve all|none)");
                            HostDecision::Reject
                        }
                    };
                    // The request may have been answered already (cancelled); nothing to do then.
                    let _ = dispatcher.answer_request(at, *index, Some(request), decision).await;
                }
            }
        }
        // The ledger's closing record is on disk before the process goes.
        if let Ok(sealing) = dispatcher.close_session(&session)
            && let Err(e) = sealing.wait().await
        {
            eprintln!("toolslot: the ledger's closing record was not written: {e}");
        }
        if let Some(hub) = &toolset_remote {
            // Calls given up at the end (a timeout, a cancel) are settled with their workers
            // before the process goes.
            hub.drain(std::time::Duration::from_secs(5)).await;
        }
        crate::host::toolset::shutdown_servers(&toolset.mcp).await;
        Ok::<(), CliError>(())
    })
}

fn prompt(index: usize, name: &str, input: &serde_json::Value) -> HostDecision {
    eprint!("approve call {index}: {name} {input}? [y]es / [s]ession / [p]roject / [r]eject for the session / [N]o: ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    match line.trim().to_lowercase().as_str() {
        "y" | "yes" => HostDecision::Approve,
        "s" | "session" => HostDecision::ApproveForSession,
        "p" | "project" => HostDecision::ApproveForProject,
        "r" | "reject-session" => HostDecision::RejectForSession,
        _ => HostDecision::Reject,
    }
}

/// Writes events to stdout, each `round_complete` with its results in the provider's format
/// when `--results` asked for one.
struct Printer {
    pretty: bool,
    results: Option<(ResultFormat, SentNames)>,
}

impl Printer {
    fn print(&mut self, event: &PipelineEvent) -> Result<(), CliError> {
        let line = match (&mut self.results, self.pretty) {
            (Some((format, names)), false) => {
                let value = toolslot::results::event_with_messages(event, *format, names).map_err(|e| CliError::Io(e.to_string()))?;
                value.to_string()
            }
            (Some((format, names)), true) => {
                let value = toolslot::results::event_with_messages(event, *format, names).map_err(|e| CliError::Io(e.to_string()))?;
                match value.get("messages") {
                    Some(messages) => format!("{}\n  messages ({format}): {messages}", pretty_line(event)),
                    None => pretty_line(event),
                }
            }
            (None, true) => pretty_line(event),
            (None, false) => serde_json::to_string(event).map_err(|e| CliError::Io(e.to_string()))?,
        };
        write_line(&line)
    }
}

fn write_line(line: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    // Each event goes out the moment it happens: a host piping a live stream sees calls
    // start and finish before the stream ends.
    writeln!(out, "{line}").and_then(|_| out.flush()).map_err(|e| match e.kind() {
        std::io::ErrorKind::BrokenPipe => CliError::BrokenPipe,
        _ => CliError::Io(format!("writing stdout: {e}")),
    })
}

fn pretty_line(event: &PipelineEvent) -> String {
    match event {
        PipelineEvent::Notice(n) => format!(
            "notice   {:?}{}: {}",
            n.kind,
            n.index.map(|i| format!(" #{i}")).unwrap_or_default(),
            n.message
        ),
        PipelineEvent::CallAssembled {
            index,
            name,
            input,
            repair,
            ..
        } => {
            format!(
                "assembled #{index} {name} {input} repair={}",
                serde_json::to_string(repair).unwrap_or_default()
            )
        }
        PipelineEvent::CallStarted {
            index, name, speculative, ..
        } => format!("started  #{index} {name}{}", if *speculative { " (speculative)" } else { "" }),
        PipelineEvent::ApprovalRequired {
            index, name, requirement, ..
        } => format!("approval #{index} {name} ({requirement:?})"),
        PipelineEvent::ApprovalDecided { index, decision, .. } => format!("decided  #{index} {decision:?}"),
        PipelineEvent::InputRequired {
            n, index, server, message, ..
        } => format!("input    #{index} {server} asks (request {n}): {message}"),
        PipelineEvent::InputAnswered { n, index, action } => format!("answered #{index} request {n}: {action:?}"),
        PipelineEvent::ApprovalExpired { index, timeout_ms, .. } => format!("expired  #{index} after {timeout_ms} ms"),
        PipelineEvent::InputRewritten { index, hook, input, .. } => format!("rewrote  #{index} by `{hook}`: {input}"),
        PipelineEvent::Subagent { index, session, event, .. } => {
            format!("sub-agent of #{index} (session {session}): {}", pretty_line(event))
        }
        PipelineEvent::CallFinished {
            index,
            name,
            is_error,
            duration_ms,
            ..
        } => format!("finished #{index} {name} error={is_error} {duration_ms}ms"),
        PipelineEvent::Progress {
            index,
            progress,
            total,
            message,
            ..
        } => {
            let of = total.map(|t| format!("/{t}")).unwrap_or_default();
            format!("progress #{index} {progress}{of} {}", message.as_deref().unwrap_or(""))
        }
        PipelineEvent::RoundComplete {
            stop_reason,
            text,
            results,
        } => {
            let mut s = format!("round complete ({stop_reason:?}): {}", text.trim());
            for r in results {
                let first = r.content.lines().next().unwrap_or("");
                s.push_str(&format!("\n  result #{} {} error={}: {first}", r.index, r.name, r.is_error));
            }
            s
        }
    }
}

type ByteStream = std::pin::Pin<Box<dyn Stream<Item = Result<Vec<u8>, std::io::Error>> + Send>>;

/// Opens a recording as an incremental byte stream. `.jsonl` recordings (data payloads only,
/// one a line) are framed as SSE on the fly.
async fn open_input(file: &str) -> Result<ByteStream, CliError> {
    let jsonl = Path::new(file).extension().is_some_and(|e| e == "jsonl");
    let reader: Box<dyn AsyncRead + Unpin + Send> = if file == "-" {
        Box::new(tokio::io::stdin())
    } else {
        Box::new(
            tokio::fs::File::open(file)
                .await
                .map_err(|e| CliError::Io(format!("cannot read `{file}`: {e}")))?,
        )
    };
    let stream = futures::stream::unfold((reader, Vec::new(), false), move |(mut reader, mut carry, done)| async move {
        if done {
            return None;
        }
        let mut buf = vec![0u8; 64 * 1024];
        match reader.read(&mut buf).await {
            Ok(0) => {
                if jsonl && !carry.is_empty() {
                    let framed = toolslot::stream::sse::frame_data_lines(&carry);
                    return Some((Ok(framed), (reader, Vec::new(), true)));
                }
                None
            }
            Ok(n) => {
                buf.truncate(n);
                if !jsonl {
                    return Some((Ok(buf), (reader, carry, false)));
                }
                carry.extend_from_slice(&buf);
                let cut = carry.iter().rposition(|b| *b == b'\n').map_or(0, |p| p + 1);
                let rest = carry.split_off(cut);
                Some((Ok(toolslot::stream::sse::frame_data_lines(&carry)), (reader, rest, false)))
            }
            Err(e) => Some((Err(e), (reader, Vec::new(), true))),
        }
    });
    // A provider's stream arrives event by event; so does a recording here, so that what
    // happens while a stream is still coming (calls started early) happens in a replay too.
    let events = stream.flat_map(|chunk| {
        let pieces: Vec<Result<Vec<u8>, std::io::Error>> = match chunk {
            Ok(bytes) => split_events(&bytes).into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e)],
        };
        futures::stream::iter(pieces)
    });
    Ok(Box::pin(events))
}

/// Cuts bytes after each blank line (the end of an SSE event); the pieces join back into the
/// same bytes, so the parser sees exactly what was recorded.
fn split_events(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + 1 < bytes.len() {
        let end = match (bytes[i], bytes[i + 1]) {
            (b'\n', b'\n') => Some(i + 2),
            (b'\n', b'\r') if bytes.get(i + 2) == Some(&b'\n') => Some(i + 3),
            _ => None,
        };
        match end {
            Some(e) => {
                pieces.push(bytes[start..e].to_vec());
                start = e;
                i = e;
            }
            None => i += 1,
        }
    }
    if start < bytes.len() {
        pieces.push(bytes[start..].to_vec());
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::split_events;

    #[test]
    fn events_are_cut_after_blank_lines_and_nothing_is_lost() {
        let body = b"data: a\n\ndata: b\r\n\r\nevent: x\ndata: c\n\npartial";
        let pieces = split_events(body);
        assert_eq!(pieces.len(), 4, "{pieces:?}");
        assert_eq!(pieces[0], b"data: a\n\n");
        assert_eq!(pieces.concat(), body.to_vec());
        assert!(split_events(b"").is_empty());
    }
}
