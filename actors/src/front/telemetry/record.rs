//! An ended span as the layer hands it to the batch queue and the encoder writes it: ids,
//! times, and every string it holds in one buffer.
//!
//! Why not the SDK's `SpanData`: it holds each string attribute as its own allocation (a
//! `String` per value, made on the pipeline's thread and freed on the export thread), which
//! for a call span of seven string attributes was most of what the layer cost. Here a span's
//! strings (its name when made at run time, attribute values, event names) are appended to
//! one `text` and referred to by range, so a span costs two allocations however many fields
//! it has.

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::ops::Range;

/// A string of a span: static (field names, literal values) or a range of its `text`.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Text {
    Static(&'static str),
    At(u32, u32),
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Val {
    Str(Text),
    I64(i64),
    F64(f64),
    Bool(bool),
}

/// An attribute: the key is always a field's name, which `tracing` makes `'static`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Attr {
    pub key: &'static str,
    pub value: Val,
}

/// A span event (a warning or error logged inside the span).
#[derive(Debug, Clone)]
pub(super) struct EventRecord {
    pub time_ns: u64,
    pub name: Text,
    pub attributes: Vec<Attr>,
}

/// The span's status, as OTLP has it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum StatusRecord {
    Unset,
    Ok,
    Error(Cow<'static, str>),
}

/// OTLP's span kinds (the numbers are the protocol's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Internal = 1,
    Server = 2,
    Client = 3,
    Producer = 4,
    Consumer = 5,
}

impl Kind {
    /// The kind an `otel.kind` field names (any case); `Internal` for anything else.
    pub fn named(name: &str) -> Kind {
        match name.to_ascii_lowercase().as_str() {
            "server" => Kind::Server,
            "client" => Kind::Client,
            "producer" => Kind::Producer,
            "consumer" => Kind::Consumer,
            _ => Kind::Internal,
        }
    }
}

/// A span being recorded, then ended.
#[derive(Debug, Clone)]
pub(super) struct SpanRecord {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    /// All zero for a root.
    pub parent_id: [u8; 8],
    pub parent_remote: bool,
    pub flags: u8,
    /// The W3C `tracestate` header, when the trace carries one.
    pub trace_state: Option<Box<str>>,
    pub name: Text,
    pub kind: Kind,
    pub start_ns: u64,
    pub end_ns: u64,
    pub attributes: Vec<Attr>,
    pub events: Vec<EventRecord>,
    pub status: StatusRecord,
    /// Every `Text::At` of this span points in here.
    pub text: String,
}

impl SpanRecord {
    /// A span with nothing recorded yet, named `name`.
    pub fn blank(name: &'static str) -> SpanRecord {
        SpanRecord {
            trace_id: [0; 16],
            span_id: [0; 8],
            parent_id: [0; 8],
            parent_remote: false,
            flags: 0,
            trace_state: None,
            name: Text::Static(name),
            kind: Kind::Internal,
            start_ns: 0,
            end_ns: 0,
            attributes: Vec::new(),
            events: Vec::new(),
            status: StatusRecord::Unset,
            text: String::new(),
        }
    }

    /// Makes an exported span blank again, keeping what its vectors have room for, so the
    /// next span recorded into it allocates nothing.
    pub fn reset(&mut self) {
        self.trace_state = None;
        self.name = Text::Static("");
        self.kind = Kind::Internal;
        self.parent_remote = false;
        self.attributes.clear();
        self.events.clear();
        self.status = StatusRecord::Unset;
        self.text.clear();
    }

    /// The string `t` stands for.
    pub fn str<'a>(&'a self, t: &'a Text) -> &'a str {
        match t {
            Text::Static(s) => s,
            Text::At(start, end) => self.text.get(*start as usize..*end as usize).unwrap_or(""),
        }
    }

    /// Appends `s` to the span's text and returns where it is.
    pub fn keep(&mut self, s: &str) -> Text {
        let start = self.text.len();
        self.text.push_str(s);
        self.range(start..self.text.len())
    }

    /// Appends what `value` formats to and returns where it is: no string of its own.
    pub fn keep_formatted(&mut self, value: fmt::Arguments<'_>) -> Text {
        let start = self.text.len();
        let _ = self.text.write_fmt(value);
        self.range(start..self.text.len())
    }

    fn range(&self, r: Range<usize>) -> Text {
        // A span's text over 4 GiB is not a span anyone exports; its strings read empty.
        match (u32::try_from(r.start), u32::try_from(r.end)) {
            (Ok(s), Ok(e)) => Text::At(s, e),
            _ => Text::Static(""),
        }
    }

    /// The value of attribute `key` as a string, for tests and checks.
    #[cfg(test)]
    pub fn attr_str(&self, key: &str) -> Option<&str> {
        self.attributes.iter().find(|a| a.key == key).and_then(|a| match &a.value {
            Val::Str(t) => Some(self.str(t)),
            _ => None,
        })
    }
}

/// One histogram sample, recorded into the SDK's histogram on the export thread: the SDK
/// hashes and looks up the attribute set under a lock on every sample, more than a no-op
/// call costs, so the pipeline's thread only queues it. Up to [`SAMPLE_ATTRIBUTES`]
/// attributes, their values one after the other in `inline` (or in `spilled` when they do
/// not fit there): a sample allocates nothing in the common case, where a `String` made on
/// the pipeline's thread and freed on the export thread cost more than the rest of it.
#[derive(Debug, Clone)]
pub(super) struct Sample {
    pub metric: &'static str,
    pub seconds: f64,
    pub keys: [&'static str; SAMPLE_ATTRIBUTES],
    /// Where each value ends in the text (each starts where the one before ends).
    pub ends: [u32; SAMPLE_ATTRIBUTES],
    pub len: u8,
    inline: [u8; SAMPLE_INLINE],
    /// The values when together they pass [`SAMPLE_INLINE`] bytes; empty otherwise.
    spilled: String,
}

/// The most attributes a sample keeps (the histograms have two: a name and an error type).
pub(super) const SAMPLE_ATTRIBUTES: usize = 4;

/// Room for a sample's values without an allocation: a tool's name and an error type.
const SAMPLE_INLINE: usize = 64;

impl Sample {
    /// A sample of `metric` with `attributes` (those past [`SAMPLE_ATTRIBUTES`] are left out).
    pub fn new(metric: &'static str, seconds: f64, attributes: &[(&'static str, &str)]) -> Sample {
        let kept = &attributes[..attributes.len().min(SAMPLE_ATTRIBUTES)];
        let total: usize = kept.iter().map(|(_, v)| v.len()).sum();
        let mut sample = Sample {
            metric,
            seconds,
            keys: [""; SAMPLE_ATTRIBUTES],
            ends: [0; SAMPLE_ATTRIBUTES],
            len: 0,
            inline: [0; SAMPLE_INLINE],
            spilled: String::new(),
        };
        if total > SAMPLE_INLINE {
            sample.spilled.reserve_exact(total);
        }
        let mut end = 0;
        for (i, (k, v)) in kept.iter().enumerate() {
            if total > SAMPLE_INLINE {
                sample.spilled.push_str(v);
            } else {
                sample.inline[end..end + v.len()].copy_from_slice(v.as_bytes());
            }
            end += v.len();
            sample.keys[i] = k;
            sample.ends[i] = u32::try_from(end).unwrap_or(u32::MAX);
            sample.len += 1;
        }
        sample
    }

    /// The values, one after the other.
    pub fn text(&self) -> &[u8] {
        if self.spilled.is_empty() {
            let end = self.ends[..usize::from(self.len)].last().map_or(0, |&e| e as usize);
            &self.inline[..end.min(SAMPLE_INLINE)]
        } else {
            self.spilled.as_bytes()
        }
    }

    /// The attributes as key and value.
    pub fn attributes(&self) -> impl Iterator<Item = (&'static str, &str)> {
        let text = self.text();
        (0..usize::from(self.len)).map(move |i| {
            let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
            // Each value was copied whole from a `&str`, so every range is on a boundary.
            let value = text.get(start..self.ends[i] as usize).and_then(|b| std::str::from_utf8(b).ok());
            (self.keys[i], value.unwrap_or(""))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_keeps_its_attributes_in_order() {
        let s = Sample::new("m", 0.5, &[("gen_ai.tool.name", "read_file"), ("error.type", ""), ("x", "é")]);
        let got: Vec<_> = s.attributes().collect();
        assert_eq!(got, [("gen_ai.tool.name", "read_file"), ("error.type", ""), ("x", "é")]);
        let many: Vec<(&'static str, &str)> = vec![("a", "1"); 6];
        assert_eq!(Sample::new("m", 1.0, &many).attributes().count(), SAMPLE_ATTRIBUTES);
        let long = "t".repeat(SAMPLE_INLINE);
        let s = Sample::new("m", 1.0, &[("gen_ai.tool.name", &long), ("error.type", "timeout")]);
        let got: Vec<_> = s.attributes().collect();
        assert_eq!(got, [("gen_ai.tool.name", long.as_str()), ("error.type", "timeout")]);
        let empty = Sample::new("m", 1.0, &[]);
        assert_eq!(empty.attributes().count(), 0);
    }
}
