//! `ringmq`: the broker binary.
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use ringmq::Broker;
use ringmq::cli::Cli;
use ringmq::config::DEFAULT_CONFIG_TOML;
use tracing_subscriber::EnvFilter;

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if cli.print_default_config {
        print!("{DEFAULT_CONFIG_TOML}");
        return Ok(());
    }
    let config = cli.config()?;
    if cli.check_config {
        println!("{config:#?}");
        return Ok(());
    }
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(config.log_level.as_str().to_ascii_lowercase()));
    tracing_subscriber::fmt().with_env_filter(filter).init();
    if let Err(error) = ring_runtime::raise_fd_limit(u64::MAX) {
        tracing::warn!(%error, "could not raise the open-file limit");
    }
    let broker = Broker::start(config).context("starting the broker")?;
    tracing::info!(
        addrs = ?broker.local_addrs(),
        backend = ?broker.backend(),
        shards = broker.shard_count(),
        "ringmq listening"
    );
    wait_for_signal()?;
    tracing::info!("shutting down");
    broker.shutdown();
    broker.join().context("stopping the broker")?;
    Ok(())
}

/// Blocks until SIGINT or SIGTERM.
fn wait_for_signal() -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}
