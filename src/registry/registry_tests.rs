use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::notice::NoticeKind;
use crate::tool::{Capability, Tool, ToolContext, ToolFuture, ToolOutput, ToolSource, ToolSpec};

/// A tool whose name, schema and deferral are whatever the test says.
struct Fake {
    name: String,
    schema: Value,
    deferred: bool,
    description: String,
}

fn fake(name: &str) -> Fake {
    Fake {
        name: name.into(),
        schema: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        deferred: false,
        description: format!("The {name} tool."),
    }
}

impl Tool for Fake {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn input_schema(&self) -> Value {
        self.schema.clone()
    }
    fn run<'a>(&'a self, _input: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async { Ok(ToolOutput::text("ok")) })
    }
}

impl ToolSpec for Fake {
    fn capabilities(&self) -> &[Capability] {
        &[Capability::ReadOnly]
    }
    fn defer_loading(&self) -> bool {
        self.deferred
    }
    fn source(&self) -> ToolSource {
        ToolSource::Extension
    }
}

fn registry(tools: Vec<Fake>) -> Arc<Registry> {
    let cfg = Arc::new(Config::builtin());
    Arc::new(
        RegistryBuilder::new(cfg)
            .extend(tools.into_iter().map(|t| Arc::new(t) as Arc<dyn ToolSpec>))
            .build(),
    )
}

#[test]
fn bad_tools_fail_closed_without_breaking_the_others() {
    let mut not_object = fake("not_object");
    not_object.schema = json!({"type": "string"});
    let mut no_compile = fake("no_compile");
    no_compile.schema = json!({"type": "object", "properties": {"x": {"type": 12}}});
    let reg = registry(vec![
        fake("good"),
        fake("bad name!"),
        not_object,
        no_compile,
        fake("good"),
        fake(&"x".repeat(65)),
    ]);
    let names = reg.names().to_vec();
    assert_eq!(
        names,
        vec!["bad_name_", "good", "good_2", "no_compile", "not_object", "x".repeat(64).as_str()],
        "every tool is listed, invalid names sanitized"
    );
    assert_eq!(reg.notices().len(), 5);
    assert!(reg.notices().iter().all(|n| n.kind == NoticeKind::FailClosedTool));
    for n in ["bad_name_", "good_2", "no_compile", "not_object"] {
        assert_eq!(reg.get(n).unwrap().spec.description(), FAIL_CLOSED_DESCRIPTION, "{n}");
    }
    assert_eq!(reg.get("good").unwrap().spec.description(), "The good tool.");
    assert!(
        reg.notices()
            .iter()
            .any(|n| n.message.contains("`good`") && n.message.contains("already taken"))
    );
}

#[test]
fn fail_closed_tool_answers_unavailable() {
    let mut bad = fake("broken");
    bad.schema = json!({"type": "array"});
    let reg = registry(vec![bad]);
    let ctx = ToolContext {
        session_id: "s".into(),
        workspace: ".".into(),
        call_id: "c".into(),
        index: 0,
        config: Arc::new(Config::builtin()),
        services: Arc::new(crate::tool::NoServices),
        grant: Default::default(),
    };
    let tool = reg.get("broken").unwrap();
    let err = futures::executor::block_on(tool.spec.run(json!({}), &ctx)).unwrap_err();
    assert_eq!(err.category, crate::tool::ErrorCategory::Unavailable);
    assert!(err.message.contains("root is not an object"), "{}", err.message);
    assert!(!err.started);
}

#[test]
fn validation_names_the_field() {
    let reg = registry(vec![fake("reader")]);
    let tool = reg.get("reader").unwrap();
    assert!(tool.validate_input(&json!({"path": "a"})).is_ok());
    let missing = tool.validate_input(&json!({})).unwrap_err();
    assert_eq!(missing.field.as_deref(), Some("path"));
    let wrong = tool.validate_input(&json!({"path": 3})).unwrap_err();
    assert_eq!(wrong.field.as_deref(), Some("path"));
    assert!(wrong.message.contains("string"), "{}", wrong.message);
}

#[test]
fn catalog_is_sorted_and_cached() {
    let reg = registry(vec![fake("zeta"), fake("alpha"), fake("mid")]);
    let cat = reg.catalog();
    let bytes = cat.render(CatalogFormat::Anthropic);
    let parsed: Vec<Value> = serde_json::from_str(&bytes).unwrap();
    let names: Vec<&str> = parsed.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["alpha", "mid", "zeta"]);
    assert!(
        Arc::ptr_eq(&bytes, &cat.render(CatalogFormat::Anthropic)),
        "rendered once per generation"
    );
    let openai: Vec<Value> = serde_json::from_str(&cat.render(CatalogFormat::OpenAi)).unwrap();
    assert_eq!(openai[0]["type"], "function");
    assert_eq!(openai[0]["function"]["name"], "alpha");
    assert_eq!(openai[0]["function"]["parameters"]["required"], json!(["path"]));
}

#[test]
fn activation_appends_and_keeps_the_byte_prefix() {
    let mut d1 = fake("deferred_b");
    d1.deferred = true;
    let mut d2 = fake("deferred_a");
    d2.deferred = true;
    let reg = registry(vec![fake("zeta"), d1, fake("alpha"), d2]);
    let gen0 = reg.catalog();
    assert_eq!(gen0.visible_names(), vec!["alpha", "zeta"]);
    assert!(!gen0.contains("deferred_a"));
    let gen1 = gen0.activate(&["deferred_b".into()]);
    let gen2 = gen1.activate(&["deferred_a".into(), "alpha".into(), "nope".into()]);
    assert_eq!(
        gen2.visible_names(),
        vec!["alpha", "zeta", "deferred_b", "deferred_a"],
        "activation order, not sorted"
    );
    assert_eq!(gen2.generation(), 2);
    for format in [CatalogFormat::Anthropic, CatalogFormat::OpenAi] {
        let b0 = gen0.render(format);
        let b1 = gen1.render(format);
        let b2 = gen2.render(format);
        // Everything but the closing bracket of the earlier array is a byte-identical prefix.
        assert!(b1.as_bytes().starts_with(&b0.as_bytes()[..b0.len() - 1]));
        assert!(b2.as_bytes().starts_with(&b1.as_bytes()[..b1.len() - 1]));
        assert_ne!(b1, b2);
    }
    // Nothing new: same generation, same cached bytes.
    let again = gen2.activate(&["deferred_a".into()]);
    assert!(Arc::ptr_eq(
        &again.render(CatalogFormat::Anthropic),
        &gen2.render(CatalogFormat::Anthropic)
    ));
}

#[test]
fn same_tools_give_the_same_bytes() {
    let a = registry(vec![fake("b"), fake("a")]).catalog().render(CatalogFormat::OpenAi);
    let b = registry(vec![fake("a"), fake("b")]).catalog().render(CatalogFormat::OpenAi);
    assert_eq!(a, b);
}

#[test]
fn descriptions_are_capped_and_stripped_of_control_characters() {
    let mut noisy = fake("noisy");
    noisy.description = format!("line one\u{7}\u{1b}[31m\nline two {}", "x".repeat(5000));
    let reg = registry(vec![noisy]);
    let d = &reg.get("noisy").unwrap().model_description;
    assert!(!d.contains('\u{7}') && !d.contains('\u{1b}'));
    assert!(d.contains('\n'));
    assert_eq!(d.chars().count(), 2048);
    assert!(d.ends_with('…'));
}

#[test]
fn tool_names_are_checked() {
    assert!(is_valid_tool_name("read_file-2"));
    assert!(!is_valid_tool_name(""));
    assert!(!is_valid_tool_name("a.b"));
    assert!(!is_valid_tool_name(&"a".repeat(65)));
    assert_eq!(sanitize_tool_name("a.b c"), "a_b_c");
    assert_eq!(sanitize_tool_name(""), "unnamed_tool");
}

fn specs(tools: Vec<Fake>) -> Vec<Arc<dyn ToolSpec>> {
    tools.into_iter().map(|t| Arc::new(t) as Arc<dyn ToolSpec>).collect()
}

#[test]
fn tools_added_later_are_appended_after_everything_a_session_saw() {
    let mut d = fake("deferred_a");
    d.deferred = true;
    let live = LiveRegistry::from(registry(vec![fake("zeta"), fake("beta"), d]));
    let gen0 = live.current().catalog();
    let activated = gen0.activate(&["deferred_a".into()]);

    // A server adds a resident tool that sorts first, a deferred one, and re-lists a known
    // one with another description: only the new names arrive, none is sorted in.
    let mut later_deferred = fake("deferred_b");
    later_deferred.deferred = true;
    let mut relisted = fake("zeta");
    relisted.description = "changed".into();
    let (grew, notices) = live.append(specs(vec![fake("aardvark"), later_deferred, relisted]));
    assert!(grew);
    assert!(notices.is_empty(), "{notices:?}");
    let next = live.current();
    assert_eq!(next.generation(), 1);
    assert_eq!(next.get("zeta").unwrap().model_description, "The zeta tool.");

    let adopted = activated.adopt(Arc::clone(&next));
    assert_eq!(adopted.visible_names(), vec!["beta", "zeta", "deferred_a", "aardvark"]);
    assert!(adopted.contains("aardvark"));
    assert!(!adopted.contains("deferred_b"), "a deferred newcomer is only searchable");
    let hits = next.search_index().unwrap().search("deferred_b", 3);
    assert_eq!(hits[0].name, "deferred_b");
    for format in [CatalogFormat::Anthropic, CatalogFormat::OpenAi] {
        let before = activated.render(format);
        let after = adopted.render(format);
        assert!(after.as_bytes().starts_with(&before.as_bytes()[..before.len() - 1]));
        assert!(after.contains("aardvark"));
    }
    // A session opened on the new generation sees the newcomer after the resident block too.
    assert_eq!(next.catalog().visible_names(), vec!["beta", "zeta", "aardvark"]);

    // Nothing new: no new generation.
    let (grew, _) = live.append(specs(vec![fake("aardvark")]));
    assert!(!grew);
    assert_eq!(live.current().generation(), 1);
}

#[test]
fn a_bad_tool_added_later_fails_closed_alone() {
    let live = LiveRegistry::from(registry(vec![fake("alpha")]));
    let mut bad = fake("bad_schema");
    bad.schema = json!({"type": "array"});
    let (grew, notices) = live.append(specs(vec![bad, fake("good")]));
    assert!(grew);
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].kind, NoticeKind::FailClosedTool);
    assert!(notices[0].message.contains("bad_schema"), "{}", notices[0].message);
    let current = live.current();
    assert!(current.get("good").is_some());
    assert_eq!(current.get("bad_schema").unwrap().meta.source, ToolSource::Extension);
    assert!(current.notices().iter().any(|n| n.message.contains("bad_schema")));
}
