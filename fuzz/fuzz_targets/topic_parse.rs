//! Topic names and filters (plain and `$share/`) from arbitrary bytes: no panic, what parses
//! keeps its bytes, and a valid name is a filter matching itself.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    router::fuzz_support::parse_any(data);
});
