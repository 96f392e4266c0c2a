//! Repaired arguments through the whole pipeline, against docs/CONTRACT.md ("Repair step
//! names"): what the host is asked to approve is the input that would run.

use serde_json::json;
use toolslot::event::{PipelineEvent, RepairMark, RepairStep};
use toolslot::notice::NoticeKind;

use super::support::*;

#[test]
fn the_approval_prompt_shows_the_repaired_input() {
    system(async {
        // Nobody answers: the question expires and nothing runs.
        let bed = Bed::new("[approval]\ntimeout_ms = 100\n");
        let d = bed.dispatcher();
        let s = bed.session(&d);
        let raw = "```json\n{path: 'asked.txt', content: 'x', // what to write\n}\n```";
        let events = run_round(&d, &s, openai_chat_raw(&[("write_file", raw)], "tool_calls")).await;
        let want = json!({"path": "asked.txt", "content": "x"});
        let assembled = events.iter().find_map(|e| match e {
            PipelineEvent::CallAssembled { input, repair, .. } => Some((input.as_ref().clone(), *repair)),
            _ => None,
        });
        assert_eq!(assembled, Some((want.clone(), RepairMark::Step(RepairStep::TrailingCommas))));
        let asked = events.iter().find_map(|e| match e {
            PipelineEvent::ApprovalRequired { input, .. } => Some(input.as_ref().clone()),
            _ => None,
        });
        assert_eq!(asked, Some(want));
        let repaired = events.iter().find_map(|e| match e {
            PipelineEvent::Notice(n) if n.kind == NoticeKind::ArgsRepaired => Some(n.message.clone()),
            _ => None,
        });
        assert_eq!(
            repaired.as_deref(),
            Some("arguments of `write_file` repaired (surrounding_text, comments, single_quotes, unquoted_keys, trailing_commas)")
        );
        assert!(!bed.workspace.path().join("asked.txt").exists());
    });
}
