//! The span exporter: OTLP/HTTP protobuf, encoded straight from toolslot's span records.
//!
//! Why not `opentelemetry-otlp`'s span exporter: it first converts every span into the
//! generated protobuf types (a `String` per attribute key and value, a `Vec` per id), then
//! encodes them with prost, which measures each nested message again at every level, then
//! frees it all: about 20,000 instructions a span, more than the pipeline spends on a no-op
//! call, on a thread that competes with the pipeline's for the cores. Written straight into
//! one buffer it is a small fraction of that. The wire format is
//! `opentelemetry/proto/trace/v1/trace.proto` (field numbers below); the tests decode what it
//! sends with the reference `opentelemetry-proto` package. Metrics, a few requests a minute,
//! keep `opentelemetry-otlp`'s exporter.

use opentelemetry::{Array, Value};
use opentelemetry_sdk::Resource;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use super::record::{Attr, SpanRecord, StatusRecord, Val};

/// The instrumentation scope every span of toolslot's is reported under.
const SCOPE: &str = "toolslot";

/// Posts batches of spans to one `/v1/traces` URL.
#[derive(Debug)]
pub(super) struct OtlpSpans {
    client: reqwest::blocking::Client,
    url: String,
    headers: HeaderMap,
    /// The `Resource` message, encoded once.
    resource: Vec<u8>,
}

impl OtlpSpans {
    /// `base` is the configured base URL; `None` reads the `OTEL_EXPORTER_OTLP_*` variables
    /// as the specification says (the traces endpoint as given, the general one with
    /// `/v1/traces` added). `headers` are the configured ones; the variables' are added.
    pub(super) fn new(
        client: reqwest::blocking::Client,
        base: Option<&str>,
        headers: &[(String, String)],
        resource: &Resource,
    ) -> Result<Self, String> {
        let var = |name: &str| std::env::var(name).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let url = match base {
            Some(b) => format!("{b}/v1/traces"),
            None => match var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
                Some(u) => u,
                None => match var("OTEL_EXPORTER_OTLP_ENDPOINT") {
                    Some(b) => format!("{}/v1/traces", b.trim_end_matches('/')),
                    None => "http://localhost:4318/v1/traces".into(),
                },
            },
        };
        let mut map = HeaderMap::new();
        map.insert(CONTENT_TYPE, HeaderValue::from_static("application/x-protobuf"));
        let from_env = ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"]
            .into_iter()
            .filter_map(var)
            .flat_map(|list| {
                list.split(',')
                    .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.trim().to_string(), percent_decoded(v.trim()))))
                    .collect::<Vec<_>>()
            });
        for (k, v) in headers.iter().cloned().chain(from_env) {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| format!("header name `{k}` is not valid"))?;
            let value = HeaderValue::from_str(&v).map_err(|_| format!("the value of header `{k}` is not valid"))?;
            map.insert(name, value);
        }
        let mut encoded = Vec::new();
        for (k, v) in resource.iter() {
            key_value(&mut encoded, 1, k.as_str(), v);
        }
        Ok(OtlpSpans {
            client,
            url,
            headers: map,
            resource: encoded,
        })
    }
}

/// `%XX` escapes decoded (the variables' values are W3C baggage-encoded); anything else kept.
fn percent_decoded(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) = v.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl OtlpSpans {
    /// Sends `batch`; the error says why it was not delivered.
    pub(super) fn export(&mut self, batch: &[SpanRecord]) -> Result<(), String> {
        if batch.is_empty() {
            return Ok(());
        }
        let body = encode_request(&self.resource, batch);
        let answer = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .body(body)
            .send()
            .map_err(|e| format!("export to {}: {e}", self.url))?;
        let status = answer.status();
        // The body is read so the connection can be reused.
        let _ = answer.bytes();
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("export to {}: HTTP {status}", self.url))
        }
    }
}

/// An `ExportTraceServiceRequest` of one `ResourceSpans` holding one `ScopeSpans`.
///
/// Each span is written once into a scratch buffer and copied once into the body, after room
/// left for the envelope, whose lengths are known only then; the envelope is written into that
/// room and the body handed on from where it starts, so the spans are not copied again.
pub(super) fn encode_request(resource: &[u8], batch: &[SpanRecord]) -> bytes::Bytes {
    // InstrumentationScope: name 1.
    let mut scope = Vec::with_capacity(16);
    str_field(&mut scope, 1, SCOPE);
    // Room for: ResourceSpans' tag and length, its resource field, ScopeSpans' tag and
    // length, its scope field (a varint takes at most 10 bytes).
    let room = 11 + 11 + resource.len() + 11 + 11 + scope.len();
    let mut body = Vec::with_capacity(room + batch.len() * 384);
    body.resize(room, 0);
    let mut one = Vec::with_capacity(512);
    for s in batch {
        one.clear();
        span(&mut one, s);
        bytes_field(&mut body, 2, &one);
    }
    let spans_len = body.len() - room;
    // ScopeSpans: scope 1, spans 2.
    let ss_len = 1 + varint_len(scope.len() as u64) + scope.len() + spans_len;
    // ResourceSpans: resource 1, scope_spans 2.
    let rs_len = 1 + varint_len(resource.len() as u64) + resource.len() + 1 + varint_len(ss_len as u64) + ss_len;
    let mut head = Vec::with_capacity(room);
    tag(&mut head, 1, 2);
    varint(&mut head, rs_len as u64);
    bytes_field(&mut head, 1, resource);
    tag(&mut head, 2, 2);
    varint(&mut head, ss_len as u64);
    bytes_field(&mut head, 1, &scope);
    let start = room - head.len();
    body[start..room].copy_from_slice(&head);
    bytes::Bytes::from(body).slice(start..)
}

/// A `Span` message's fields, appended to `buf`.
fn span(buf: &mut Vec<u8>, s: &SpanRecord) {
    append(buf, room_for(s), |o| o.span(s));
}

/// Bytes enough for `s` encoded (a guess that errs high: `append` copes with one too low).
fn room_for(s: &SpanRecord) -> usize {
    // Per attribute: four tags and four lengths at most, and a scalar's ten bytes.
    let attributes = |list: &[Attr]| -> usize {
        list.iter()
            .map(|a| {
                48 + a.key.len()
                    + match &a.value {
                        Val::Str(t) => s.str(t).len(),
                        _ => 0,
                    }
            })
            .sum()
    };
    let status = match &s.status {
        StatusRecord::Error(description) => description.len(),
        _ => 0,
    };
    128 + s.str(&s.name).len()
        + s.trace_state.as_ref().map_or(0, |t| t.len())
        + attributes(&s.attributes)
        + s.events
            .iter()
            .map(|e| 48 + s.str(&e.name).len() + attributes(&e.attributes))
            .sum::<usize>()
        + status
}

/// Appends what `write` writes to `buf`. Room for `bound` bytes is made first and `write`
/// fills it through a cursor: a store and one bounds check a byte, where `Vec::push` reloads
/// and checks the length and capacity each time, which was most of what encoding a span
/// cost. A `bound` found too low is made exact and the write done again.
fn append(buf: &mut Vec<u8>, bound: usize, write: impl Fn(&mut Out<'_>)) {
    let start = buf.len();
    let mut room = bound;
    loop {
        buf.resize(start + room, 0);
        let mut out = Out {
            buf: &mut buf[start..],
            at: 0,
        };
        write(&mut out);
        let used = out.at;
        if used <= room {
            buf.truncate(start + used);
            return;
        }
        room = used;
    }
}

/// A cursor over room made for a message. Past the end it only counts, so a cursor over
/// nothing measures what a write would take (a nested message's length, before it).
struct Out<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl Out<'_> {
    /// The length of what `write` writes.
    fn measure(write: impl Fn(&mut Out<'_>)) -> usize {
        let mut out = Out { buf: &mut [], at: 0 };
        write(&mut out);
        out.at
    }

    fn byte(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.at) {
            *slot = b;
        }
        self.at += 1;
    }

    fn bytes(&mut self, b: &[u8]) {
        if let Some(slot) = self.buf.get_mut(self.at..self.at + b.len()) {
            slot.copy_from_slice(b);
        }
        self.at += b.len();
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.byte((v as u8) | 0x80);
            v >>= 7;
        }
        self.byte(v as u8);
    }

    fn tag(&mut self, field: u32, wire: u32) {
        self.varint(u64::from(field << 3 | wire));
    }

    fn bytes_field(&mut self, field: u32, b: &[u8]) {
        self.tag(field, 2);
        self.varint(b.len() as u64);
        self.bytes(b);
    }

    fn fixed64_field(&mut self, field: u32, v: u64) {
        self.tag(field, 1);
        self.bytes(&v.to_le_bytes());
    }

    /// A nested message as field `field`: measured, then written.
    fn nested(&mut self, field: u32, write: impl Fn(&mut Out<'_>)) {
        self.tag(field, 2);
        self.varint(Out::measure(&write) as u64);
        write(self);
    }

    fn span(&mut self, s: &SpanRecord) {
        self.bytes_field(1, &s.trace_id);
        self.bytes_field(2, &s.span_id);
        if let Some(state) = &s.trace_state {
            self.bytes_field(3, state.as_bytes());
        }
        if s.parent_id != [0; 8] {
            self.bytes_field(4, &s.parent_id);
        }
        self.bytes_field(5, s.str(&s.name).as_bytes());
        self.tag(6, 0);
        self.varint(s.kind as u64);
        self.fixed64_field(7, s.start_ns);
        self.fixed64_field(8, s.end_ns);
        for a in &s.attributes {
            self.attribute(9, a, s);
        }
        for e in &s.events {
            self.nested(11, |o| {
                o.fixed64_field(1, e.time_ns);
                o.bytes_field(2, s.str(&e.name).as_bytes());
                for a in &e.attributes {
                    o.attribute(3, a, s);
                }
            });
        }
        // Status: message 2, code 3 (unset 0, ok 1, error 2).
        match &s.status {
            StatusRecord::Unset => self.bytes_field(15, &[]),
            StatusRecord::Ok => self.bytes_field(15, &[3 << 3, 1]),
            StatusRecord::Error(description) => self.nested(15, |o| {
                if !description.is_empty() {
                    o.bytes_field(2, description.as_bytes());
                }
                o.tag(3, 0);
                o.varint(2);
            }),
        }
        // SpanFlags, fixed32.
        self.tag(16, 5);
        self.bytes(&flags(s.parent_remote, s.flags).to_le_bytes());
    }

    /// A span attribute as a `KeyValue` (key 1, value 2): an `AnyValue` of one scalar.
    fn attribute(&mut self, field: u32, a: &Attr, s: &SpanRecord) {
        let mut scalar = [0u8; 10];
        let (any_tag, payload): (u32, &[u8]) = match &a.value {
            Val::Str(t) => (1 << 3 | 2, s.str(t).as_bytes()),
            Val::Bool(b) => {
                scalar[0] = u8::from(*b);
                (2 << 3, &scalar[..1])
            }
            Val::I64(i) => {
                let n = {
                    let mut o = Out { buf: &mut scalar, at: 0 };
                    o.varint(*i as u64);
                    o.at
                };
                (3 << 3, &scalar[..n])
            }
            Val::F64(f) => {
                scalar[..8].copy_from_slice(&f.to_le_bytes());
                (4 << 3 | 1, &scalar[..8])
            }
        };
        self.scalar_key_value(field, a.key, any_tag, payload);
    }

    /// A `KeyValue` (key 1, value 2) whose `AnyValue` is one field, `any_tag` (its number and
    /// wire type) with `payload` (length-prefixed for the length-delimited wire type),
    /// measured without writing it first.
    fn scalar_key_value(&mut self, field: u32, key: &str, any_tag: u32, payload: &[u8]) {
        let length_prefix = if any_tag & 7 == 2 { varint_len(payload.len() as u64) } else { 0 };
        let any_len = 1 + length_prefix + payload.len();
        let len = 1 + varint_len(key.len() as u64) + key.len() + 1 + varint_len(any_len as u64) + any_len;
        self.tag(field, 2);
        self.varint(len as u64);
        self.bytes_field(1, key.as_bytes());
        self.tag(2, 2);
        self.varint(any_len as u64);
        self.byte(any_tag as u8);
        if length_prefix > 0 {
            self.varint(payload.len() as u64);
        }
        self.bytes(payload);
    }
}

/// `SpanFlags`: the trace flags, and whether the parent is remote (known: 0x100, is: 0x200).
fn flags(remote: bool, trace_flags: u8) -> u32 {
    u32::from(trace_flags) | 0x100 | if remote { 0x200 } else { 0 }
}

/// A resource's `KeyValue` (key 1, value 2) as field `field`.
fn key_value(buf: &mut Vec<u8>, field: u32, key: &str, value: &Value) {
    let mut any = Vec::new();
    let any: &[u8] = match value {
        Value::String(s) => {
            let payload = s.as_str().as_bytes();
            append(buf, 48 + key.len() + payload.len(), |o| {
                o.scalar_key_value(field, key, 1 << 3 | 2, payload)
            });
            return;
        }
        other => {
            any_value(&mut any, other);
            &any
        }
    };
    let len = 1 + varint_len(key.len() as u64) + key.len() + 1 + varint_len(any.len() as u64) + any.len();
    tag(buf, field, 2);
    varint(buf, len as u64);
    str_field(buf, 1, key);
    bytes_field(buf, 2, any);
}

/// An `AnyValue`'s fields: string 1, bool 2, int 3, double 4, array 5.
fn any_value(buf: &mut Vec<u8>, value: &Value) {
    match value {
        Value::String(s) => str_field(buf, 1, s.as_str()),
        Value::Bool(b) => {
            tag(buf, 2, 0);
            buf.push(u8::from(*b));
        }
        Value::I64(i) => {
            tag(buf, 3, 0);
            varint(buf, *i as u64);
        }
        Value::F64(f) => {
            tag(buf, 4, 1);
            buf.extend_from_slice(&f.to_le_bytes());
        }
        Value::Array(a) => {
            // ArrayValue: values 1.
            let mut values = Vec::new();
            let mut one = Vec::new();
            let mut push = |v: Value| {
                one.clear();
                any_value(&mut one, &v);
                bytes_field(&mut values, 1, &one);
            };
            match a {
                Array::Bool(v) => v.iter().for_each(|x| push(Value::Bool(*x))),
                Array::I64(v) => v.iter().for_each(|x| push(Value::I64(*x))),
                Array::F64(v) => v.iter().for_each(|x| push(Value::F64(*x))),
                Array::String(v) => v.iter().for_each(|x| push(Value::String(x.clone()))),
                other => push(Value::String(other.to_string().into())),
            }
            bytes_field(buf, 5, &values);
        }
        other => str_field(buf, 1, &other.to_string()),
    }
}

fn tag(buf: &mut Vec<u8>, field: u32, wire: u32) {
    varint(buf, u64::from(field << 3 | wire));
}

fn varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn varint_len(v: u64) -> usize {
    // 7 bits a byte; 0 still takes one.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn bytes_field(buf: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    tag(buf, field, 2);
    varint(buf, bytes.len() as u64);
    buf.extend_from_slice(bytes);
}

fn str_field(buf: &mut Vec<u8>, field: u32, s: &str) {
    bytes_field(buf, field, s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_measured_as_written() {
        for v in [0u64, 1, 127, 128, 300, 16_383, 16_384, u32::MAX.into(), u64::MAX] {
            let mut b = Vec::new();
            varint(&mut b, v);
            assert_eq!(b.len(), varint_len(v), "{v}");
        }
    }

    #[test]
    fn attributes_are_framed_as_nested_messages_would_be() {
        use super::super::record::{Attr, SpanRecord, Val};
        let mut span = SpanRecord::blank("s");
        let long = "x".repeat(300);
        let t = span.keep(&long);
        let short = span.keep("read_file");
        let cases = [
            (Val::Str(short), {
                let mut any = Vec::new();
                str_field(&mut any, 1, "read_file");
                any
            }),
            (Val::Str(t), {
                let mut any = Vec::new();
                str_field(&mut any, 1, &long);
                any
            }),
            (Val::Bool(true), vec![2 << 3, 1]),
            (Val::I64(-1), {
                let mut any = vec![3 << 3];
                varint(&mut any, u64::MAX);
                any
            }),
            (Val::F64(0.5), {
                let mut any = vec![4 << 3 | 1];
                any.extend_from_slice(&0.5f64.to_le_bytes());
                any
            }),
        ];
        for (value, any) in cases {
            let mut kv = Vec::new();
            str_field(&mut kv, 1, "gen_ai.tool.name");
            bytes_field(&mut kv, 2, &any);
            let mut want = Vec::new();
            bytes_field(&mut want, 9, &kv);
            let mut got = Vec::new();
            let a = Attr {
                key: "gen_ai.tool.name",
                value: value.clone(),
            };
            // A bound too low is found and made exact.
            for bound in [0, 3, 512] {
                got.clear();
                append(&mut got, bound, |o| o.attribute(9, &a, &span));
                assert_eq!(got, want, "{value:?}, room {bound}");
            }
        }
    }

    #[test]
    fn a_span_with_state_events_and_an_error_is_framed_as_nested_messages_would_be() {
        use super::super::record::{Attr, EventRecord, SpanRecord, StatusRecord, Text, Val};
        use std::borrow::Cow;
        let mut s = SpanRecord::blank("call");
        s.trace_id = [7; 16];
        s.span_id = [8; 8];
        s.parent_id = [9; 8];
        s.trace_state = Some("k=v".into());
        s.start_ns = 1;
        s.end_ns = 300;
        let name = s.keep("denied by rule");
        s.events.push(EventRecord {
            time_ns: 2,
            name,
            attributes: vec![Attr {
                key: "level",
                value: Val::Str(Text::Static("ERROR")),
            }],
        });
        s.status = StatusRecord::Error(Cow::Borrowed("denied by rule"));
        s.attributes.push(Attr {
            key: "toolslot.call.index",
            value: Val::I64(3),
        });

        // What nested messages written one by one into their own buffers give.
        let mut want = Vec::new();
        bytes_field(&mut want, 1, &s.trace_id);
        bytes_field(&mut want, 2, &s.span_id);
        str_field(&mut want, 3, "k=v");
        bytes_field(&mut want, 4, &s.parent_id);
        str_field(&mut want, 5, "call");
        want.extend_from_slice(&[6 << 3, 1]);
        want.push(7 << 3 | 1);
        want.extend_from_slice(&1u64.to_le_bytes());
        want.push(8 << 3 | 1);
        want.extend_from_slice(&300u64.to_le_bytes());
        let key_value = |key: &str, any: &[u8]| {
            let mut kv = Vec::new();
            str_field(&mut kv, 1, key);
            bytes_field(&mut kv, 2, any);
            kv
        };
        bytes_field(&mut want, 9, &key_value("toolslot.call.index", &[3 << 3, 3]));
        let mut event = vec![1 << 3 | 1];
        event.extend_from_slice(&2u64.to_le_bytes());
        str_field(&mut event, 2, "denied by rule");
        let mut error = Vec::new();
        str_field(&mut error, 1, "ERROR");
        bytes_field(&mut event, 3, &key_value("level", &error));
        bytes_field(&mut want, 11, &event);
        let mut status = Vec::new();
        str_field(&mut status, 2, "denied by rule");
        status.extend_from_slice(&[3 << 3, 2]);
        bytes_field(&mut want, 15, &status);
        tag(&mut want, 16, 5);
        want.extend_from_slice(&flags(false, 0).to_le_bytes());

        let mut got = Vec::new();
        span(&mut got, &s);
        assert_eq!(got, want);
        assert!(room_for(&s) >= got.len(), "the room guessed covers the span");
    }

    #[test]
    fn percent_escapes_are_decoded() {
        assert_eq!(percent_decoded("Basic%20abc%3D"), "Basic abc=");
        assert_eq!(percent_decoded("a%2"), "a%2");
    }
}
