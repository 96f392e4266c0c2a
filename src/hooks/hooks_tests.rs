use serde_json::json;

use super::*;
use crate::config::HookConfig;

struct Bed {
    ws: tempfile::TempDir,
    config: Config,
}

fn hook(event: HookEvent, script: &str, timeout_ms: Option<u64>, on_error: HookOnError) -> HookConfig {
    HookConfig {
        event,
        tool: "exec_*".into(),
        command: vec!["sh".into(), "-c".into(), script.into()],
        timeout_ms,
        on_error,
    }
}

impl Bed {
    fn new(hooks: Vec<HookConfig>) -> Self {
        let mut config = Config::builtin();
        config.policy.managed_file = "/nonexistent/managed.toml".into();
        config.hooks = hooks;
        Self {
            ws: tempfile::tempdir().unwrap(),
            config,
        }
    }
    fn policy(&self) -> Policy {
        Policy::load(&self.config, self.ws.path()).unwrap()
    }
    fn ctx(&self) -> HookContext<'_> {
        HookContext {
            workspace: self.ws.path(),
            config: &self.config,
        }
    }
}

fn call<'a>(input: &'a Value) -> HookCall<'a> {
    HookCall {
        session: "s1",
        call_id: "call_7",
        index: 3,
        tool: "exec_shell",
        input,
    }
}

fn pre(bed: &Bed, input: Value) -> PreVerdict {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(pre_tool_use(&bed.policy(), &call(&input), bed.ctx()))
}

fn post(bed: &Bed, input: Value, result: (bool, &str)) -> PostVerdict {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(post_tool_use(&bed.policy(), &call(&input), result, bed.ctx()))
}

const PRE: HookEvent = HookEvent::PreToolUse;
const POST: HookEvent = HookEvent::PostToolUse;

#[test]
fn a_hook_gets_the_call_and_its_exit_status_decides() {
    let bed = Bed::new(vec![hook(PRE, "cat >&2; exit 2", None, HookOnError::Block)]);
    let v = pre(&bed, json!({"command": "git push"}));
    assert_eq!(v.decision, Some(RuleDecision::Deny));
    let seen: Value = serde_json::from_str(v.reason.as_deref().unwrap()).unwrap();
    assert_eq!(
        seen,
        json!({"event": "pre_tool_use", "session": "s1", "call_id": "call_7", "index": 3, "tool": "exec_shell", "input": {"command": "git push"}})
    );
    let bed = Bed::new(vec![hook(PRE, "exit 0", None, HookOnError::Block)]);
    assert_eq!(pre(&bed, json!({"command": "ls"})), PreVerdict::default());
}

#[test]
fn a_crash_a_hang_or_garbage_blocks_unless_on_error_allows() {
    for (script, says) in [
        ("exit 1", "status 1"),
        ("kill -9 $$", "failed"),
        ("sleep 30", "did not answer within 300 ms"),
        ("echo 'this is not json'", "not a JSON object"),
        ("echo '{\"decision\": \"maybe\"}'", "not allow, ask or deny"),
        ("head -c 200000 /dev/zero | tr '\\0' x", "longer than"),
        ("/nonexistent/hook", "status 127"),
    ] {
        let bed = Bed::new(vec![hook(PRE, script, Some(300), HookOnError::Block)]);
        let v = pre(&bed, json!({"command": "ls"}));
        assert_eq!(v.decision, Some(RuleDecision::Deny), "{script}");
        let reason = v.reason.unwrap();
        assert!(reason.contains(says) && reason.contains("on_error"), "{script}: {reason}");
        let bed = Bed::new(vec![hook(PRE, script, Some(300), HookOnError::Allow)]);
        let v = pre(&bed, json!({"command": "ls"}));
        assert_eq!(v.decision, None, "{script}");
        assert_eq!(v.ignored_failures.len(), 1, "{script}");
    }
}

#[test]
fn a_hung_hook_and_what_it_started_are_killed() {
    let bed = Bed::new(vec![hook(
        PRE,
        "(sleep 2; echo late > /tmp/never) & sleep 30",
        Some(200),
        HookOnError::Block,
    )]);
    let started = std::time::Instant::now();
    let v = pre(&bed, json!({"command": "ls"}));
    assert_eq!(v.decision, Some(RuleDecision::Deny));
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn rewrites_pass_from_hook_to_hook_and_the_strictest_decision_wins() {
    let bed = Bed::new(vec![
        hook(
            PRE,
            "echo '{\"decision\": \"allow\", \"updated_input\": {\"command\": \"git status\"}}'",
            None,
            HookOnError::Block,
        ),
        hook(
            PRE,
            "grep -q 'git status' && echo '{\"decision\": \"ask\", \"reason\": \"checked\"}'",
            None,
            HookOnError::Block,
        ),
    ]);
    let v = pre(&bed, json!({"command": "git push"}));
    assert_eq!(v.updated_input, Some(json!({"command": "git status"})));
    assert_eq!(v.decision, Some(RuleDecision::Ask));
    assert_eq!(v.reason.as_deref(), Some("checked"));
    assert!(v.hook.unwrap().contains("grep"));
}

#[test]
fn hooks_run_read_only_in_the_sandbox() {
    assert_ne!(
        crate::sandbox::backend(crate::config::SandboxMode::Auto),
        crate::sandbox::Backend::None,
        "a sandbox works here"
    );
    let bed = Bed::new(vec![hook(PRE, "touch MARKER", None, HookOnError::Allow)]);
    let v = pre(&bed, json!({"command": "ls"}));
    assert!(!bed.ws.path().join("MARKER").exists(), "{v:?}");
    assert_eq!(v.ignored_failures.len(), 1, "touch failed: {v:?}");
}

#[test]
fn post_hooks_add_context_or_withhold_the_result() {
    let bed = Bed::new(vec![
        hook(
            POST,
            "grep -q '\"is_error\":false' && echo '{\"additional_context\": \"reviewed\"}'",
            None,
            HookOnError::Block,
        ),
        hook(POST, "echo '{\"additional_context\": \"twice\"}'", None, HookOnError::Block),
    ]);
    let v = post(&bed, json!({"command": "ls"}), (false, "a\nb"));
    assert_eq!(v.additional_context, vec!["reviewed", "twice"]);
    assert_eq!(v.withheld, None);
    let bed = Bed::new(vec![hook(
        POST,
        "grep -q SECRET && { echo 'it holds a secret' >&2; exit 2; }; exit 0",
        None,
        HookOnError::Block,
    )]);
    let v = post(&bed, json!({"command": "cat x"}), (false, "the SECRET is 42"));
    assert_eq!(v.withheld.as_deref(), Some("it holds a secret"));
    assert_eq!(post(&bed, json!({"command": "cat y"}), (false, "nothing")).withheld, None);
}
