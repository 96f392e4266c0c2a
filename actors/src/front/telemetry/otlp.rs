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

/// A `Span` message's fields.
fn span(buf: &mut Vec<u8>, s: &SpanRecord) {
    bytes_field(buf, 1, &s.trace_id);
    bytes_field(buf, 2, &s.span_id);
    if let Some(state) = &s.trace_state {
        str_field(buf, 3, state);
    }
    if s.parent_id != [0; 8] {
        bytes_field(buf, 4, &s.parent_id);
    }
    str_field(buf, 5, s.str(&s.name));
    tag(buf, 6, 0);
    varint(buf, s.kind as u64);
    fixed64_field(buf, 7, s.start_ns);
    fixed64_field(buf, 8, s.end_ns);
    for a in &s.attributes {
        attribute(buf, 9, a, s);
    }
    let mut nested = Vec::new();
    for e in &s.events {
        nested.clear();
        fixed64_field(&mut nested, 1, e.time_ns);
        str_field(&mut nested, 2, s.str(&e.name));
        for a in &e.attributes {
            attribute(&mut nested, 3, a, s);
        }
        bytes_field(buf, 11, &nested);
    }
    // Status: message 2, code 3 (unset 0, ok 1, error 2).
    match &s.status {
        StatusRecord::Unset => bytes_field(buf, 15, &[]),
        StatusRecord::Ok => bytes_field(buf, 15, &[3 << 3, 1]),
        StatusRecord::Error(description) => {
            nested.clear();
            if !description.is_empty() {
                str_field(&mut nested, 2, description);
            }
            uint_field(&mut nested, 3, 2);
            bytes_field(buf, 15, &nested);
        }
    }
    fixed32_field(buf, 16, flags(s.parent_remote, s.flags));
}

/// A span attribute as a `KeyValue` (key 1, value 2): an `AnyValue` of one scalar, measured
/// without a scratch buffer.
fn attribute(buf: &mut Vec<u8>, field: u32, a: &Attr, s: &SpanRecord) {
    let mut scalar = [0u8; 10];
    let (any_tag, payload): (u32, &[u8]) = match &a.value {
        Val::Str(t) => (1 << 3 | 2, s.str(t).as_bytes()),
        Val::Bool(b) => {
            scalar[0] = u8::from(*b);
            (2 << 3, &scalar[..1])
        }
        Val::I64(i) => {
            let mut v = *i as u64;
            let mut n = 0;
            while v >= 0x80 {
                scalar[n] = (v as u8) | 0x80;
                v >>= 7;
                n += 1;
            }
            scalar[n] = v as u8;
            (3 << 3, &scalar[..=n])
        }
        Val::F64(f) => {
            scalar[..8].copy_from_slice(&f.to_le_bytes());
            (4 << 3 | 1, &scalar[..8])
        }
    };
    scalar_key_value(buf, field, a.key, any_tag, payload);
}

/// A `KeyValue` (key 1, value 2) whose `AnyValue` is one field, `any_tag` (its number and wire
/// type) with `payload` (length-prefixed for the length-delimited wire type), measured
/// without a scratch buffer.
fn scalar_key_value(buf: &mut Vec<u8>, field: u32, key: &str, any_tag: u32, payload: &[u8]) {
    let length_prefix = if any_tag & 7 == 2 { varint_len(payload.len() as u64) } else { 0 };
    let any_len = 1 + length_prefix + payload.len();
    let len = 1 + varint_len(key.len() as u64) + key.len() + 1 + varint_len(any_len as u64) + any_len;
    tag(buf, field, 2);
    varint(buf, len as u64);
    str_field(buf, 1, key);
    tag(buf, 2, 2);
    varint(buf, any_len as u64);
    buf.push(any_tag as u8);
    if length_prefix > 0 {
        varint(buf, payload.len() as u64);
    }
    buf.extend_from_slice(payload);
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
            scalar_key_value(buf, field, key, 1 << 3 | 2, s.as_str().as_bytes());
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

/// A varint field, left out at 0 as proto3 does.
fn uint_field(buf: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        tag(buf, field, 0);
        varint(buf, v);
    }
}

fn fixed64_field(buf: &mut Vec<u8>, field: u32, v: u64) {
    tag(buf, field, 1);
    buf.extend_from_slice(&v.to_le_bytes());
}

fn fixed32_field(buf: &mut Vec<u8>, field: u32, v: u32) {
    tag(buf, field, 5);
    buf.extend_from_slice(&v.to_le_bytes());
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
            attribute(
                &mut got,
                9,
                &Attr {
                    key: "gen_ai.tool.name",
                    value: value.clone(),
                },
                &span,
            );
            assert_eq!(got, want, "{value:?}");
        }
    }

    #[test]
    fn percent_escapes_are_decoded() {
        assert_eq!(percent_decoded("Basic%20abc%3D"), "Basic abc=");
        assert_eq!(percent_decoded("a%2"), "a%2");
    }
}
