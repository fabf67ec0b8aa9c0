//! `ringmq`: the broker binary.
#![forbid(unsafe_code)]

use std::sync::mpsc;

use anyhow::Context;
use clap::Parser;
use ring_runtime::ShardExit;
use ringmq::Broker;
use ringmq::cli::Cli;
use ringmq::config::DEFAULT_CONFIG_TOML;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
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
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    if let Err(error) = ring_runtime::raise_fd_limit(u64::MAX) {
        tracing::warn!(%error, "could not raise the open-file limit");
    }
    // Installed before the listeners open: a SIGHUP (or SIGTERM) that arrives while the broker
    // starts is handled like any later one, never the default action (terminate).
    let signals = Signals::new([SIGINT, SIGTERM, SIGHUP]).context("installing signal handlers")?;
    let broker = Broker::start(config).context("starting the broker")?;
    tracing::info!(
        addrs = ?broker.local_addrs(),
        backend = ?broker.backend(),
        shards = broker.shard_count(),
        "ringmq listening"
    );
    match run_until_stop(&broker, signals, &cli)? {
        Stop::Signal(signal) => {
            tracing::info!(signal, "shutting down");
            broker.shutdown();
            broker.join().context("stopping the broker")?;
            Ok(())
        }
        Stop::ShardEnded(exit) => stop_after_shard_exit(broker, exit),
    }
}

/// Why the broker stops.
enum Stop {
    /// SIGINT or SIGTERM (SIGHUP only passes through).
    Signal(i32),
    /// A shard's thread ended on its own (a panic or an error): the broker cannot run on
    /// without it, since every SUBACK waits for every shard.
    ShardEnded(ShardExit),
}

/// Blocks until SIGINT or SIGTERM arrives or a shard ends, whichever comes first; SIGHUP
/// reloads the TLS certificates meanwhile.
fn run_until_stop(broker: &Broker, mut signals: Signals, cli: &Cli) -> anyhow::Result<Stop> {
    let (stop_tx, stop_rx) = mpsc::channel();
    let signal_tx = stop_tx.clone();
    std::thread::Builder::new()
        .name("ringmq-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if signal_tx.send(Stop::Signal(signal)).is_err() {
                    break;
                }
            }
        })
        .context("starting the signal thread")?;
    let exits = broker.shard_exits();
    std::thread::Builder::new()
        .name("ringmq-shard-watch".into())
        .spawn(move || {
            let _ = stop_tx.send(Stop::ShardEnded(exits.wait_first()));
        })
        .context("starting the shard watcher")?;
    loop {
        match stop_rx.recv().context("waiting for a stop signal")? {
            Stop::Signal(SIGHUP) => reload(broker, cli),
            stop => return Ok(stop),
        }
    }
}

/// SIGHUP: new TLS handshakes use the certificates and keys on disk now (open connections keep
/// theirs), new CONNECTs the password file and the ACL on disk now, new connections the
/// `[ip]` and `[overload]` sections of the config file, later PUBLISH packets its publish rates;
/// `[[bridges]]` added, removed or changed start, stop or restart.
/// Whatever fails to load keeps its old contents.
fn reload(broker: &Broker, cli: &Cli) {
    let mut errors = broker.reload();
    match cli.config() {
        Ok(config) => broker.apply_reloadable(&config),
        Err(error) => errors.push(format!("config: {error}")),
    }
    if errors.is_empty() {
        tracing::info!(
            "SIGHUP: certificates, password file, ACL file, [ip], publish rates, [overload] and bridges reloaded"
        );
    }
    for error in errors {
        tracing::error!(%error, "SIGHUP: reload failed; the old one stays in use");
    }
}

/// A shard ended by itself: log the cause, stop the other shards, exit non-zero. (A store
/// failure stops the shards too: that is the cause then.)
fn stop_after_shard_exit(broker: Broker, exit: ShardExit) -> anyhow::Result<()> {
    if let Some(failure) = broker.store_failure() {
        broker.shutdown();
        let _ = broker.join();
        return Err(anyhow::anyhow!("persistence failed: {failure}"));
    }
    tracing::error!(shard = %exit.shard, cause = ?exit.cause, "{exit}; stopping the broker");
    broker.shutdown();
    if let Err(error) = broker.join() {
        tracing::error!(%error, "while stopping the other shards");
    }
    Err(anyhow::anyhow!("{exit}"))
}
