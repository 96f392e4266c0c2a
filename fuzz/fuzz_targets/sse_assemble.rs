//! Any bytes, in any chunking, through the SSE parser and the assembler: never a panic, and
//! every round ends.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolslot::stream::{Assembler, AssemblyEvent};

fuzz_target!(|data: &[u8]| {
    // The first byte picks the chunk size, so the same bytes are also tried split up.
    let Some((&size, body)) = data.split_first() else { return };
    let size = usize::from(size).max(1);
    let mut a = Assembler::new(None);
    let mut out = Vec::new();
    for chunk in body.chunks(size) {
        a.feed(chunk, &mut out);
    }
    a.finish(&mut out);
    assert!(out.iter().any(|e| matches!(e, AssemblyEvent::RoundEnd(_))), "every stream ends a round");
});
