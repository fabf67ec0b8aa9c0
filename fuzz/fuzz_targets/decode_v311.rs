//! The MQTT 3.1.1 decoder on arbitrary streams: no panic, the framing contract holds, and
//! feeding the stream in chunks gives the same packets and error.
#![no_main]

use codec::ProtocolVersion;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ringmq_fuzz::check_decoder(data, ProtocolVersion::V3_1_1);
});
