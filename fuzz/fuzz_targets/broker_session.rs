//! The broker's session logic on a simulated shard (no sockets, a manual clock): a few clients
//! on MQTT 3.1.1 and 5.0 run operations read from the input, and every packet the broker sends
//! them is checked against the protocol's invariants (see `ringmq_fuzz::session`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ringmq_fuzz::session::run(data);
});
