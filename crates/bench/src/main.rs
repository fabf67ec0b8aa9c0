//! `ringmq-bench`: the RingMQ MQTT load generator.
#![forbid(unsafe_code)]

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    anyhow::bail!("ringmq-bench is not built yet (issue 6)")
}
