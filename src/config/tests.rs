use super::*;
use std::io::Write;
use std::path::Path;

fn file_with(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

#[test]
fn builtin_defaults_load() {
    let c = Config::builtin();
    assert_eq!(c.approval.mode, ApprovalMode::Ask);
    assert_eq!(c.network.policy, NetworkPolicy::Prompt);
    assert_eq!(
        (c.output.shell_max_bytes, c.output.shell_head_bytes, c.output.shell_tail_bytes),
        (30_000, 22_000, 8_000)
    );
    assert_eq!(c.loop_guard.repeat_block, 3);
}

#[test]
fn remote_routes_name_pools_nats_accepts() {
    let f = file_with("[remote]\nroutes = { \"exec_shell\" = \"shell\", \"git__*\" = \"mcp-pool_2\" }\n");
    let c = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap();
    assert_eq!(c.remote.routes.get("git__*").map(String::as_str), Some("mcp-pool_2"));
    assert!(!c.remote.enabled(), "routes alone route nothing: no NATS server is named");
    for bad in ["a.b", "a b", "", "x>"] {
        let f = file_with(&format!("[remote]\nroutes = {{ \"exec_shell\" = \"{bad}\" }}\n"));
        let err = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap_err().to_string();
        assert!(err.contains("remote.routes"), "{bad:?}: {err}");
    }
    let f = file_with("[remote]\nnats_url = \"nats://127.0.0.1:4222\"\nack_wait_ms = 10\n");
    let err = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap_err().to_string();
    assert!(err.contains("ack_wait_ms"), "{err}");
}

#[test]
fn file_overlays_defaults() {
    let f = file_with("[approval]\nmode = \"full-auto\"\n[network]\nallow_hosts = [\"127.0.0.1\"]\n");
    let c = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap();
    assert_eq!(c.approval.mode, ApprovalMode::FullAuto);
    assert_eq!(c.network.allow_hosts, vec!["127.0.0.1".to_string()]);
    assert_eq!(c.search.top_n, 5, "untouched keys keep their defaults");
}

#[test]
fn env_overlays_file() {
    let f = file_with("[approval]\nmode = \"full-auto\"\n");
    let env = vec![
        ("TOOLSLOT_APPROVAL__MODE".to_string(), "read-only".to_string()),
        ("TOOLSLOT_SEARCH__TOP_N".to_string(), "9".to_string()),
        ("PATH".to_string(), "/bin".to_string()),
    ];
    let c = Config::load_with_env(Some(f.path()), env).unwrap();
    assert_eq!(c.approval.mode, ApprovalMode::ReadOnly);
    assert_eq!(c.search.top_n, 9);
}

#[test]
fn unknown_key_names_file_and_key() {
    let f = file_with("[output]\nshell_max_byte = 5\n");
    let err = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&f.path().display().to_string()), "{text}");
    assert!(text.contains("shell_max_byte"), "{text}");
}

#[test]
fn malformed_file_is_a_clear_error() {
    let f = file_with("[approval\nmode = ");
    let err = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap_err();
    assert!(matches!(err, ConfigError::File { .. }), "{err}");
}

#[test]
fn wrong_type_names_the_key() {
    let f = file_with("[search]\ntop_n = \"many\"\n");
    let err = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap_err();
    assert!(err.to_string().contains("top_n"), "{err}");
}

#[test]
fn bad_env_value_names_the_variable() {
    let env = vec![("TOOLSLOT_APPROVAL__MODE".to_string(), "yolo".to_string())];
    let err = Config::load_with_env(None, env).unwrap_err();
    assert!(err.to_string().contains("TOOLSLOT_APPROVAL__MODE"), "{err}");
}

#[test]
fn a_zero_disconnect_grace_is_refused_only_while_it_cancels() {
    let f = file_with("[server]\ndisconnect_grace_ms = 0\n");
    let err = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap_err();
    assert!(err.to_string().contains("server.disconnect_grace_ms"), "{err}");
    let f = file_with("[server]\ndisconnect_grace_ms = 0\ncancel_on_disconnect = false\n");
    assert!(Config::load_with_env(Some(f.path()), std::iter::empty()).is_ok());
}

#[test]
fn missing_file_is_a_clear_error() {
    let err = Config::load_with_env(Some(Path::new("/nonexistent/x.toml")), std::iter::empty()).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/x.toml"), "{err}");
}

#[test]
fn inconsistent_budget_is_refused() {
    let f = file_with("[output]\nshell_head_bytes = 29000\n");
    let err = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap_err();
    assert!(err.to_string().contains("shell_head_bytes"), "{err}");
}

#[test]
fn bad_host_entries_and_origins_are_refused() {
    for (text, key) in [
        ("[network]\nallow_hosts = [\"intranet:http\"]\n", "network.allow_hosts"),
        ("[server]\nallowed_hosts = [\"[::1\"]\n", "server.allowed_hosts"),
        ("[server]\nallowed_origins = [\"ui.example\"]\n", "server.allowed_origins"),
        (
            "[server]\nallowed_origins = [\"https://ui.example/app\"]\n",
            "server.allowed_origins",
        ),
    ] {
        let f = file_with(text);
        let err = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap_err();
        assert!(err.to_string().contains(key), "{text}: {err}");
    }
    let f = file_with(
        "[network]\nallow_hosts = [\"127.0.0.1:8080\", \"[::1]:9000\", \"db.internal\"]\n[server]\nallowed_origins = [\"https://ui.example\"]\n",
    );
    assert!(Config::load_with_env(Some(f.path()), std::iter::empty()).is_ok());
}
