//! The span exporter: OTLP/HTTP protobuf, encoded straight from the SDK's span data.
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

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{SpanId, SpanKind, Status};
use opentelemetry::{Array, KeyValue, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

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
    pub(super) fn new(client: reqwest::blocking::Client, base: Option<&str>, headers: &[(String, String)]) -> Result<Self, String> {
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
        Ok(OtlpSpans {
            client,
            url,
            headers: map,
            resource: Vec::new(),
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

impl SpanExporter for OtlpSpans {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        if batch.is_empty() {
            return Ok(());
        }
        let body = encode_request(&self.resource, &batch);
        drop(batch);
        let answer = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .body(body)
            .send()
            .map_err(|e| OTelSdkError::InternalFailure(format!("export to {}: {e}", self.url)))?;
        let status = answer.status();
        // The body is read so the connection can be reused.
        let _ = answer.bytes();
        if status.is_success() {
            Ok(())
        } else {
            Err(OTelSdkError::InternalFailure(format!("export to {}: HTTP {status}", self.url)))
        }
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }

    fn set_resource(&mut self, resource: &Resource) {
        let mut buf = Vec::new();
        for (k, v) in resource.iter() {
            key_value(&mut buf, 1, k.as_str(), v);
        }
        self.resource = buf;
    }
}

/// An `ExportTraceServiceRequest` of one `ResourceSpans`, with one `ScopeSpans` per run of
/// spans from the same instrumentation scope.
pub(super) fn encode_request(resource: &[u8], batch: &[SpanData]) -> Vec<u8> {
    let mut scopes = Vec::with_capacity(batch.len() * 256);
    let mut spans = Vec::with_capacity(batch.len() * 256);
    let mut one = Vec::with_capacity(512);
    let mut scope = Vec::with_capacity(64);
    let mut i = 0;
    while i < batch.len() {
        let first = &batch[i].instrumentation_scope;
        spans.clear();
        while i < batch.len() && batch[i].instrumentation_scope == *first {
            one.clear();
            span(&mut one, &batch[i]);
            bytes_field(&mut spans, 2, &one);
            i += 1;
        }
        // InstrumentationScope: name 1, version 2.
        scope.clear();
        str_field(&mut scope, 1, first.name());
        if let Some(v) = first.version() {
            str_field(&mut scope, 2, v);
        }
        // ScopeSpans: scope 1, spans 2, schema_url 3.
        let mut len = 1 + varint_len(scope.len() as u64) + scope.len() + spans.len();
        if let Some(url) = first.schema_url() {
            len += 1 + varint_len(url.len() as u64) + url.len();
        }
        tag(&mut scopes, 2, 2);
        varint(&mut scopes, len as u64);
        bytes_field(&mut scopes, 1, &scope);
        scopes.extend_from_slice(&spans);
        if let Some(url) = first.schema_url() {
            str_field(&mut scopes, 3, url);
        }
    }
    // ResourceSpans: resource 1, scope_spans 2.
    let rs_len = 1 + varint_len(resource.len() as u64) + resource.len() + scopes.len();
    let mut out = Vec::with_capacity(rs_len + 16);
    tag(&mut out, 1, 2);
    varint(&mut out, rs_len as u64);
    bytes_field(&mut out, 1, resource);
    out.extend_from_slice(&scopes);
    out
}

/// A `Span` message's fields.
fn span(buf: &mut Vec<u8>, s: &SpanData) {
    let cx = &s.span_context;
    bytes_field(buf, 1, &cx.trace_id().to_bytes());
    bytes_field(buf, 2, &cx.span_id().to_bytes());
    let state = cx.trace_state().header();
    if !state.is_empty() {
        str_field(buf, 3, &state);
    }
    if s.parent_span_id != SpanId::INVALID {
        bytes_field(buf, 4, &s.parent_span_id.to_bytes());
    }
    str_field(buf, 5, &s.name);
    let kind = match s.span_kind {
        SpanKind::Internal => 1,
        SpanKind::Server => 2,
        SpanKind::Client => 3,
        SpanKind::Producer => 4,
        SpanKind::Consumer => 5,
    };
    tag(buf, 6, 0);
    varint(buf, kind);
    fixed64_field(buf, 7, nanos(s.start_time));
    fixed64_field(buf, 8, nanos(s.end_time));
    for kv in &s.attributes {
        attribute(buf, 9, kv);
    }
    uint_field(buf, 10, s.dropped_attributes_count.into());
    let mut nested = Vec::new();
    for e in s.events.iter() {
        nested.clear();
        fixed64_field(&mut nested, 1, nanos(e.timestamp));
        str_field(&mut nested, 2, &e.name);
        for kv in &e.attributes {
            attribute(&mut nested, 3, kv);
        }
        uint_field(&mut nested, 4, e.dropped_attributes_count.into());
        bytes_field(buf, 11, &nested);
    }
    uint_field(buf, 12, s.events.dropped_count.into());
    for l in s.links.iter() {
        nested.clear();
        bytes_field(&mut nested, 1, &l.span_context.trace_id().to_bytes());
        bytes_field(&mut nested, 2, &l.span_context.span_id().to_bytes());
        let state = l.span_context.trace_state().header();
        if !state.is_empty() {
            str_field(&mut nested, 3, &state);
        }
        for kv in &l.attributes {
            attribute(&mut nested, 4, kv);
        }
        uint_field(&mut nested, 5, l.dropped_attributes_count.into());
        fixed32_field(
            &mut nested,
            6,
            flags(l.span_context.is_remote(), l.span_context.trace_flags().to_u8()),
        );
        bytes_field(buf, 13, &nested);
    }
    uint_field(buf, 14, s.links.dropped_count.into());
    // Status: message 2, code 3 (unset 0, ok 1, error 2).
    nested.clear();
    match &s.status {
        Status::Unset => {}
        Status::Ok => uint_field(&mut nested, 3, 1),
        Status::Error { description } => {
            if !description.is_empty() {
                str_field(&mut nested, 2, description);
            }
            uint_field(&mut nested, 3, 2);
        }
    }
    bytes_field(buf, 15, &nested);
    fixed32_field(buf, 16, flags(s.parent_span_is_remote, cx.trace_flags().to_u8()));
}

/// `SpanFlags`: the trace flags, and whether the parent is remote (known: 0x100, is: 0x200).
fn flags(remote: bool, trace_flags: u8) -> u32 {
    u32::from(trace_flags) | 0x100 | if remote { 0x200 } else { 0 }
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

fn attribute(buf: &mut Vec<u8>, field: u32, kv: &KeyValue) {
    key_value(buf, field, kv.key.as_str(), &kv.value);
}

/// A `KeyValue` (key 1, value 2) as field `field`. Scalars are measured without a scratch
/// buffer: they are nearly every attribute.
fn key_value(buf: &mut Vec<u8>, field: u32, key: &str, value: &Value) {
    let mut any = Vec::new();
    let any: &[u8] = match value {
        Value::String(s) => {
            let s = s.as_str();
            let any_len = 1 + varint_len(s.len() as u64) + s.len();
            let len = 1 + varint_len(key.len() as u64) + key.len() + 1 + varint_len(any_len as u64) + any_len;
            tag(buf, field, 2);
            varint(buf, len as u64);
            str_field(buf, 1, key);
            tag(buf, 2, 2);
            varint(buf, any_len as u64);
            str_field(buf, 1, s);
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
    fn percent_escapes_are_decoded() {
        assert_eq!(percent_decoded("Basic%20abc%3D"), "Basic abc=");
        assert_eq!(percent_decoded("a%2"), "a%2");
    }
}
