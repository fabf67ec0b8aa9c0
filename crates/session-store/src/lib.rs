//! Sessions, inflight QoS 1/2 state, offline queues and retained durability behind a storage trait.
#![forbid(unsafe_code)]
