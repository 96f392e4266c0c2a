//! Any text through the repair ladder: never a panic; valid JSON objects pass unchanged and
//! whatever comes out is an object.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolslot::repair::args::repair_arguments;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match repair_arguments(text, 1 << 20) {
        Ok(r) => {
            assert!(r.value.is_object());
            if let Ok(v @ serde_json::Value::Object(_)) = serde_json::from_str::<serde_json::Value>(text) {
                assert_eq!(r.value, v);
                assert!(r.step.is_none());
            }
        }
        Err(_) => {}
    }
});
