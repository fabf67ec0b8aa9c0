//! `[runtime]`: shards, the I/O backend, write pacing, the scheduler slice, listen and
//! receive buffers; raw, typed and validated.

use std::time::Duration;

use super::error::ConfigError;
use super::fields::{in_range, narrow, need};
use super::overlay::raw_section;
use crate::settings::{BackendChoice, RuntimeSettings, WritePacingChoice};

raw_section!(
    /// `[runtime]`
    RawRuntime {
        shards: usize,
        backend: String,
        max_pending_changes: u64,
        mailbox_batches: u64,
        max_pending_posts: u64,
        write_interval_us: u64,
        write_pacing: String,
        sched_slice_us: u64,
        pin_threads: bool,
        unpin_when_shared: bool,
        coalesce_below: u64,
        spare_send_queues: u64,
        listen_backlog: u64,
        accept_backoff_ms: u64,
        recv_buffers: u64,
        recv_buffer_size: u64,
        subscribe_order: String,
        subscribe_order_keep_bytes: u64,
    }
);

/// Largest `runtime.listen_backlog` accepted (the kernel lowers it to `net.core.somaxconn`).
const MAX_LISTEN_BACKLOG: u64 = 1 << 20;
/// Most receive buffers per shard: io_uring's provided-buffer ring holds at most 32,768.
const MAX_RECV_BUFFERS: u64 = 32_768;
/// Smallest and largest receive buffer, in bytes.
const MIN_RECV_BUFFER: u64 = 512;
const MAX_RECV_BUFFER: u64 = 1 << 20;

/// `runtime.sched_slice_us`: 0 keeps the kernel's slice, else 100..=100,000 µs (the range the
/// kernel accepts; it would clamp anything else, and a silently changed value misleads).
fn sched_slice(v: &Option<u64>) -> Result<Option<Duration>, ConfigError> {
    const KEY: &str = "runtime.sched_slice_us";
    match need(KEY, v)? {
        0 => Ok(None),
        micros @ 100..=100_000 => Ok(Some(Duration::from_micros(micros))),
        other => Err(ConfigError::invalid(
            KEY,
            format!(
                "{other} µs is outside the kernel's range for a scheduler slice (100..=100000, or 0 for the kernel's default)"
            ),
        )),
    }
}

/// A receive-buffer count: a power of two in `1..=MAX_RECV_BUFFERS` (io_uring's buffer ring
/// indexes its entries with a mask).
fn power_of_two(key: &'static str, v: &Option<u64>) -> Result<u16, ConfigError> {
    let count: u16 = narrow(key, v, 1, MAX_RECV_BUFFERS)?;
    if !count.is_power_of_two() {
        return Err(ConfigError::invalid(
            key,
            format!("{count} is not a power of two (io_uring's buffer ring needs one)"),
        ));
    }
    Ok(count)
}

impl RawRuntime {
    pub(super) fn validate(&self) -> Result<RuntimeSettings, ConfigError> {
        let shards = in_range("runtime.shards", &self.shards.map(|s| s as u64), 0, 1024)?;
        let backend = match need("runtime.backend", &self.backend)?.as_str() {
            "auto" => BackendChoice::Auto,
            "uring" | "io_uring" => BackendChoice::Uring,
            "epoll" => BackendChoice::Epoll,
            other => {
                return Err(ConfigError::invalid(
                    "runtime.backend",
                    format!(
                        "unknown backend {other:?} (expected \"auto\", \"uring\" or \"epoll\")"
                    ),
                ));
            }
        };
        let write_pacing = match need("runtime.write_pacing", &self.write_pacing)?.as_str() {
            "adaptive" => WritePacingChoice::Adaptive,
            "fixed" => WritePacingChoice::Fixed,
            other => {
                return Err(ConfigError::invalid(
                    "runtime.write_pacing",
                    format!("unknown write pacing {other:?} (expected \"adaptive\" or \"fixed\")"),
                ));
            }
        };
        Ok(RuntimeSettings {
            shards: (shards != 0).then_some(shards as usize),
            backend,
            max_pending_changes: narrow(
                "runtime.max_pending_changes",
                &self.max_pending_changes,
                16,
                1 << 24,
            )?,
            mailbox_batches: narrow("runtime.mailbox_batches", &self.mailbox_batches, 1, 1 << 20)?,
            max_pending_posts: narrow(
                "runtime.max_pending_posts",
                &self.max_pending_posts,
                1,
                1 << 24,
            )?,
            write_interval: std::time::Duration::from_micros(in_range(
                "runtime.write_interval_us",
                &self.write_interval_us,
                0,
                1_000_000,
            )?),
            write_pacing,
            sched_slice: sched_slice(&self.sched_slice_us)?,
            pin_threads: need("runtime.pin_threads", &self.pin_threads)?,
            unpin_when_shared: need("runtime.unpin_when_shared", &self.unpin_when_shared)?,
            coalesce_below: narrow("runtime.coalesce_below", &self.coalesce_below, 0, 64 * 1024)?,
            spare_send_queues: narrow(
                "runtime.spare_send_queues",
                &self.spare_send_queues,
                0,
                65_536,
            )?,
            listen_backlog: {
                let backlog: i32 = narrow(
                    "runtime.listen_backlog",
                    &self.listen_backlog,
                    0,
                    MAX_LISTEN_BACKLOG,
                )?;
                (backlog != 0).then_some(backlog)
            },
            accept_backoff: Duration::from_millis(in_range(
                "runtime.accept_backoff_ms",
                &self.accept_backoff_ms,
                1,
                60_000,
            )?),
            recv_buffers: power_of_two("runtime.recv_buffers", &self.recv_buffers)?,
            recv_buffer_size: narrow(
                "runtime.recv_buffer_size",
                &self.recv_buffer_size,
                MIN_RECV_BUFFER,
                MAX_RECV_BUFFER,
            )?,
            strict_subscribe_order: subscribe_order(&self.subscribe_order)?,
            subscribe_order_keep_bytes: narrow(
                "runtime.subscribe_order_keep_bytes",
                &self.subscribe_order_keep_bytes,
                1 << 20,
                1 << 34,
            )?,
        })
    }
}

/// `runtime.subscribe_order`: `"received"` (input fences) or `"handled"`.
fn subscribe_order(v: &Option<String>) -> Result<bool, ConfigError> {
    const KEY: &str = "runtime.subscribe_order";
    match need(KEY, v)?.as_str() {
        "received" => Ok(true),
        "handled" => Ok(false),
        other => Err(ConfigError::invalid(
            KEY,
            format!("unknown order {other:?} (expected \"received\" or \"handled\")"),
        )),
    }
}
