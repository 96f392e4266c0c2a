//! The documents a client keeps open at a server, and which published diagnostics belong to
//! which edit.
//!
//! Every edit gives its document a new version. A result waits for the diagnostics of exactly
//! that version: a server that publishes with versions (pyright) is matched by version; one
//! that publishes without (typescript-language-server) is matched by order, taking only what
//! it published after this edit was sent and before any later edit of the same document, and
//! only once it has stopped publishing for a while ([`Fresh::exact`] is false: such servers
//! publish in passes, syntax before types). A versioned answer for an older version is never
//! appended to a newer edit's result; an unversioned one cannot be told apart if it arrives
//! after the newer edit was sent, which is why pull diagnostics are preferred.

use std::collections::HashMap;

use lsp_types::{Diagnostic, Url};

/// How the client must tell the server about an edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncKind {
    /// First time: `textDocument/didOpen` with the whole text.
    Open,
    /// Later: `textDocument/didChange` with the whole text.
    Change,
}

/// What one edit's result waits for: the document version the edit produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expect {
    /// The document.
    pub uri: Url,
    /// Its version after the edit.
    pub version: i32,
    /// The client's edit counter when this edit was sent (orders unversioned publications).
    pub generation: u64,
}

/// Diagnostics a server published for a document.
#[derive(Debug, Clone, PartialEq)]
pub struct Published {
    /// The version they are for, when the server says.
    pub version: Option<i32>,
    /// The edit counter when they arrived: an unversioned publication belongs to the last
    /// edit sent before it.
    pub generation: u64,
    /// The diagnostics.
    pub diagnostics: Vec<Diagnostic>,
    /// How many publications the document had when this one arrived (tells a newer
    /// unversioned publication from the one already seen).
    pub seq: u64,
}

/// Diagnostics that belong to the edit a result waits for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fresh<'a> {
    /// The diagnostics.
    pub diagnostics: &'a [Diagnostic],
    /// Matched by version: final. Otherwise matched by order, and a later publication for the
    /// same edit (a server's next pass) replaces it.
    pub exact: bool,
    /// The publication's number, to notice a newer one.
    pub seq: u64,
}

#[derive(Debug)]
struct Doc {
    version: i32,
    generation: u64,
    published: Option<Published>,
    publications: u64,
}

/// The open documents of one server connection.
#[derive(Debug, Default)]
pub struct Documents {
    docs: HashMap<Url, Doc>,
    generation: u64,
}

impl Documents {
    /// Records an edit of `uri`: its next version, and how to tell the server. The caller
    /// must send the notification before anything else is recorded for this connection, so
    /// that the order here is the order on the wire.
    pub fn edit(&mut self, uri: &Url) -> (SyncKind, Expect) {
        self.generation += 1;
        let generation = self.generation;
        let (kind, version) = match self.docs.get_mut(uri) {
            Some(doc) => {
                doc.version += 1;
                doc.generation = generation;
                (SyncKind::Change, doc.version)
            }
            None => {
                self.docs.insert(
                    uri.clone(),
                    Doc {
                        version: 1,
                        generation,
                        published: None,
                        publications: 0,
                    },
                );
                (SyncKind::Open, 1)
            }
        };
        (
            kind,
            Expect {
                uri: uri.clone(),
                version,
                generation,
            },
        )
    }

    /// Records diagnostics the server published. Documents this client never opened are
    /// ignored (a server may report on the whole workspace; only edits wait here).
    pub fn publish(&mut self, uri: &Url, version: Option<i32>, diagnostics: Vec<Diagnostic>) {
        let Some(doc) = self.docs.get_mut(uri) else {
            return;
        };
        // A publication for an older version than one already kept says nothing new.
        if let (Some(v), Some(Published { version: Some(kept), .. })) = (version, &doc.published)
            && v < *kept
        {
            return;
        }
        doc.publications += 1;
        doc.published = Some(Published {
            version,
            generation: doc.generation,
            diagnostics,
            seq: doc.publications,
        });
    }

    /// The diagnostics published for the version `expect` waits for, once some are in.
    pub fn fresh(&self, expect: &Expect) -> Option<Fresh<'_>> {
        let doc = self.docs.get(&expect.uri)?;
        let p = doc.published.as_ref()?;
        let (ours, exact) = match p.version {
            Some(v) => (v == expect.version, true),
            None => (p.generation == expect.generation && doc.generation == expect.generation, false),
        };
        ours.then_some(Fresh {
            diagnostics: &p.diagnostics,
            exact,
            seq: p.seq,
        })
    }

    /// Whether a later edit of the document was sent: diagnostics for `expect` can no longer
    /// be told apart from the later edit's, so waiting for them is pointless.
    pub fn superseded(&self, expect: &Expect) -> bool {
        self.docs.get(&expect.uri).is_none_or(|d| d.version != expect.version)
    }

    /// Forgets every document (the connection was replaced: the new server knows none).
    pub fn clear(&mut self) {
        self.docs.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsp_types::{DiagnosticSeverity, Position, Range};

    fn uri(name: &str) -> Url {
        Url::parse(&format!("file:///w/{name}")).unwrap()
    }

    fn diag(message: &str) -> Diagnostic {
        Diagnostic {
            range: Range::new(Position::new(0, 0), Position::new(0, 1)),
            severity: Some(DiagnosticSeverity::ERROR),
            message: message.into(),
            ..Diagnostic::default()
        }
    }

    #[test]
    fn first_edit_opens_later_ones_change() {
        let mut docs = Documents::default();
        let (k1, e1) = docs.edit(&uri("a.py"));
        let (k2, e2) = docs.edit(&uri("a.py"));
        let (k3, e3) = docs.edit(&uri("b.py"));
        assert_eq!((k1, e1.version), (SyncKind::Open, 1));
        assert_eq!((k2, e2.version), (SyncKind::Change, 2));
        assert_eq!((k3, e3.version), (SyncKind::Open, 1));
    }

    #[test]
    fn versioned_publications_match_their_version_only() {
        let mut docs = Documents::default();
        let (_, first) = docs.edit(&uri("a.py"));
        let (_, second) = docs.edit(&uri("a.py"));
        // The answer for the first edit arrives after the second was sent.
        docs.publish(&uri("a.py"), Some(1), vec![diag("old")]);
        assert!(docs.fresh(&second).is_none(), "a late answer is not the new edit's");
        assert!(docs.superseded(&first));
        docs.publish(&uri("a.py"), Some(2), vec![]);
        let fresh = docs.fresh(&second).unwrap();
        assert!(fresh.diagnostics.is_empty() && fresh.exact);
        // An older version arriving after a newer one does not replace it.
        docs.publish(&uri("a.py"), Some(1), vec![diag("older")]);
        assert!(docs.fresh(&second).unwrap().diagnostics.is_empty());
    }

    #[test]
    fn unversioned_publications_match_by_order() {
        let mut docs = Documents::default();
        let (_, first) = docs.edit(&uri("a.ts"));
        // A server that publishes in passes: syntax (nothing), then types (the error).
        docs.publish(&uri("a.ts"), None, vec![]);
        let syntax = docs.fresh(&first).unwrap();
        assert!(!syntax.exact && syntax.diagnostics.is_empty());
        let seen = syntax.seq;
        docs.publish(&uri("a.ts"), None, vec![diag("broken")]);
        let types = docs.fresh(&first).unwrap();
        assert!(
            types.seq > seen && types.diagnostics.len() == 1,
            "the later pass replaces the earlier"
        );
        let (_, second) = docs.edit(&uri("a.ts"));
        assert!(docs.fresh(&second).is_none(), "what came before the edit is not its answer");
        assert!(docs.fresh(&first).is_none(), "nor the old edit's any more");
        docs.publish(&uri("a.ts"), None, vec![]);
        assert!(docs.fresh(&second).unwrap().diagnostics.is_empty());
    }

    #[test]
    fn other_documents_are_ignored_and_cleared() {
        let mut docs = Documents::default();
        docs.publish(&uri("never.py"), Some(1), vec![diag("x")]);
        let (_, e) = docs.edit(&uri("a.py"));
        docs.publish(&uri("a.py"), Some(1), vec![diag("x")]);
        assert!(docs.fresh(&e).is_some());
        docs.clear();
        assert!(docs.fresh(&e).is_none());
        assert!(docs.superseded(&e));
        let (kind, _) = docs.edit(&uri("a.py"));
        assert_eq!(kind, SyncKind::Open, "a new connection opens the document again");
    }
}
