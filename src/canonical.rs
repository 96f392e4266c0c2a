//! Canonical JSON: the same value always gives the same text, whatever its key order.

use serde_json::{Map, Value};

/// Serializes `value` with object keys sorted at every level and no insignificant space, so
/// two calls that mean the same arguments fingerprint the same.
///
/// Written into one buffer, strings and numbers by serde_json's own serializer (so escapes and
/// number forms are exactly `serde_json`'s): every ledger record is canonicalized three times
/// (its input's digest, its MAC, its line), and a `String` per key and per scalar made this the
/// largest cost of a call with the ledger on.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::with_capacity(256);
    write(value, &mut out);
    // serde_json writes UTF-8 and the punctuation here is ASCII.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// [`canonical_json`] of an object, without making a `Value` of it first.
pub fn canonical_map(map: &Map<String, Value>) -> String {
    let mut out = Vec::with_capacity(256);
    object(map, &mut out);
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn write(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => object(map, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(item, out);
            }
            out.push(b']');
        }
        other => scalar(other, out),
    }
}

fn object(map: &Map<String, Value>, out: &mut Vec<u8>) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    // Keys are unique, so an unstable sort gives the one order.
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push(b'{');
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        scalar(k, out);
        out.push(b':');
        write(v, out);
    }
    out.push(b'}');
}

/// A string or a scalar as serde_json writes it (writing into a `Vec` cannot fail).
fn scalar<T: serde::Serialize + ?Sized>(v: &T, out: &mut Vec<u8>) {
    let _ = serde_json::to_writer(out, v);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_matter() {
        let a = json!({"b": 1, "a": {"y": [1, {"d": 2, "c": 3}], "x": null}});
        let b: Value = serde_json::from_str(r#"{"a":{"x":null,"y":[1,{"c":3,"d":2}]},"b":1}"#).unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(canonical_json(&a), r#"{"a":{"x":null,"y":[1,{"c":3,"d":2}]},"b":1}"#);
    }

    /// The writer this one replaced (a `String` per key and scalar through `Value`'s
    /// `Display`): what every ledger written so far was chained over, so the text must not move.
    fn before(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    before(&map[k], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    before(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }

    #[test]
    fn the_text_is_the_one_ledgers_were_chained_over() {
        let values = [
            json!(null),
            json!({"zeta": "ü \"quoted\" \n\t\u{1} \u{7f} 😀", "alpha": [1.5, -0.0, 1e300, 18446744073709551615u64, -9223372036854775808i64]}),
            json!({"B": 1, "a": 2, "é": 3, "e": 4, "": {"nested": [true, false, null, {"y": "</script>", "x": "\u{2028}"}]}}),
            json!([[], {}, "", 0, 0.1, 100000000000000000000.0]),
            serde_json::from_str::<Value>(r#"{"k":"\ud83d\ude00","n":1.0,"m":2.50}"#).unwrap(),
        ];
        for v in values {
            let mut want = String::new();
            before(&v, &mut want);
            assert_eq!(canonical_json(&v), want, "{v}");
        }
    }
}
