//! The ledger at the tail of the chain: per round, the results filed so far and the round's
//! end; a round completes when its end has arrived and every index below its call count has
//! exactly one result. This is where "exactly one result per call, by index" holds.

use std::collections::VecDeque;

use toolslot::event::ToolResult;
use toolslot::stream::StopReason;

use crate::pipeline::chain::{RoundClose, RoundNo};

/// The open rounds of a session, oldest first, and the ends of submissions between them.
#[derive(Debug, Default)]
pub struct Ledger {
    open: VecDeque<Entry>,
    /// The newest round completed: anything for it or an older one is late.
    completed: Option<RoundNo>,
}

#[derive(Debug)]
enum Entry {
    Round(Book),
    /// The submission ends here: its rounds before this entry are all it has.
    Close,
}

#[derive(Debug)]
struct Book {
    round: RoundNo,
    results: Vec<Option<ToolResult>>,
    filed: usize,
    end: Option<RoundClose>,
}

impl Book {
    fn complete(&self) -> bool {
        self.end.is_some() && self.filed == self.results.len()
    }
}

/// What completed, in order.
#[derive(Debug)]
pub enum Completed {
    /// A round: one result per call, by index.
    Round {
        /// Which round.
        round: RoundNo,
        /// Normalized stop reason.
        stop_reason: StopReason,
        /// Assistant text.
        text: String,
        /// The results.
        results: Vec<ToolResult>,
    },
    /// The submission is over.
    Submission,
}

impl Ledger {
    fn book(&mut self, round: RoundNo) -> Option<&mut Book> {
        // Rounds arrive in order: a round not open yet is newer than every open one.
        let known = self.open.iter().any(|e| matches!(e, Entry::Round(b) if b.round == round));
        if !known {
            let late =
                self.completed.is_some_and(|c| round <= c) || self.open.iter().any(|e| matches!(e, Entry::Round(b) if b.round > round));
            if late {
                return None;
            }
            self.open.push_back(Entry::Round(Book {
                round,
                results: Vec::new(),
                filed: 0,
                end: None,
            }));
        }
        self.open.iter_mut().rev().find_map(|e| match e {
            Entry::Round(b) if b.round == round => Some(b),
            _ => None,
        })
    }

    /// Whether call `index` of `round` already has its result.
    pub fn has(&self, round: RoundNo, index: usize) -> bool {
        self.open.iter().any(|e| match e {
            Entry::Round(b) if b.round == round => b.results.get(index).is_some_and(Option::is_some),
            _ => false,
        })
    }

    /// Files a call's result. Returns false (and files nothing) when the call already has one
    /// or its round has completed: a second result is never handed back.
    pub fn file(&mut self, round: RoundNo, result: ToolResult) -> bool {
        let Some(book) = self.book(round) else {
            return false;
        };
        let index = result.index;
        if book.results.len() <= index {
            book.results.resize_with(index + 1, || None);
        }
        if book.results[index].is_some() {
            return false;
        }
        book.results[index] = Some(result);
        book.filed += 1;
        true
    }

    /// Files a round's end: it completes once every index below its call count has a result.
    pub fn end_round(&mut self, round: RoundNo, end: RoundClose) {
        if let Some(book) = self.book(round) {
            if book.results.len() < end.call_count {
                book.results.resize_with(end.call_count, || None);
            }
            book.end = Some(end);
        }
    }

    /// Files the end of a submission, behind its rounds.
    pub fn end_submission(&mut self) {
        self.open.push_back(Entry::Close);
    }

    /// What completed since the last call, in order: a round waits for every round before it.
    pub fn take_completed(&mut self) -> Vec<Completed> {
        let mut out = Vec::new();
        loop {
            match self.open.front() {
                Some(Entry::Round(b)) if b.complete() => {}
                Some(Entry::Close) => {
                    self.open.pop_front();
                    out.push(Completed::Submission);
                    continue;
                }
                _ => return out,
            }
            if let Some(Entry::Round(book)) = self.open.pop_front()
                && let Some(end) = book.end
            {
                self.completed = Some(book.round);
                out.push(Completed::Round {
                    round: book.round,
                    stop_reason: end.stop_reason,
                    text: end.text,
                    results: book.results.into_iter().flatten().collect(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(index: usize, content: &str) -> ToolResult {
        ToolResult {
            index,
            tool_use_id: format!("call_{index}"),
            name: "t".into(),
            is_error: false,
            content: content.into(),
            blocks: None,
            structured: None,
        }
    }

    fn end(call_count: usize) -> RoundClose {
        RoundClose {
            stop_reason: StopReason::ToolUse,
            text: String::new(),
            call_count,
        }
    }

    fn contents(c: &Completed) -> Vec<(usize, String)> {
        match c {
            Completed::Round { results, .. } => results.iter().map(|r| (r.index, r.content.clone())).collect(),
            Completed::Submission => Vec::new(),
        }
    }

    #[test]
    fn a_round_completes_when_its_end_and_every_result_are_in_whatever_the_order() {
        let mut l = Ledger::default();
        assert!(l.file(RoundNo(0), result(2, "c")));
        l.end_round(RoundNo(0), end(3));
        assert!(l.take_completed().is_empty());
        assert!(l.file(RoundNo(0), result(0, "a")));
        assert!(l.take_completed().is_empty());
        assert!(l.file(RoundNo(0), result(1, "b")));
        let done = l.take_completed();
        assert_eq!(done.len(), 1);
        assert_eq!(contents(&done[0]), vec![(0, "a".into()), (1, "b".into()), (2, "c".into())]);
    }

    #[test]
    fn a_second_result_for_a_call_is_refused() {
        let mut l = Ledger::default();
        assert!(l.file(RoundNo(0), result(0, "first")));
        assert!(!l.file(RoundNo(0), result(0, "second")));
        l.end_round(RoundNo(0), end(1));
        let done = l.take_completed();
        assert_eq!(contents(&done[0]), vec![(0, "first".into())]);
        // Late, for a round that completed: refused too.
        assert!(!l.file(RoundNo(0), result(0, "late")));
    }

    #[test]
    fn rounds_and_the_submission_end_complete_in_order() {
        let mut l = Ledger::default();
        assert!(l.file(RoundNo(4), result(0, "r4")));
        l.end_round(RoundNo(4), end(2));
        l.end_round(RoundNo(5), end(1));
        assert!(l.file(RoundNo(5), result(0, "r5")));
        l.end_submission();
        // Round 5 is whole, but waits for round 4.
        assert!(l.take_completed().is_empty());
        assert!(l.file(RoundNo(4), result(1, "r4b")));
        let done = l.take_completed();
        assert_eq!(done.len(), 3);
        assert_eq!(contents(&done[0]).len(), 2);
        assert_eq!(contents(&done[1]), vec![(0, "r5".into())]);
        assert!(matches!(done[2], Completed::Submission));
    }

    #[test]
    fn a_round_without_calls_completes_at_its_end() {
        let mut l = Ledger::default();
        l.end_round(RoundNo(0), end(0));
        l.end_submission();
        let done = l.take_completed();
        assert!(matches!(&done[0], Completed::Round { results, .. } if results.is_empty()));
        assert!(matches!(done[1], Completed::Submission));
    }
}
