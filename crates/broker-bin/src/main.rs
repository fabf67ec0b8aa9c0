//! `ringmq`: the broker binary.
#![forbid(unsafe_code)]

use std::sync::mpsc;

use anyhow::Context;
use clap::Parser;
use ring_runtime::ShardExit;
use ringmq::Broker;
use ringmq::cli::{Cli, Command};
use ringmq::config::DEFAULT_CONFIG_TOML;
use ringmq::upgrade::{Handover, UPGRADE_SOCKET_ENV};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR2};
use signal_hook::iterator::Signals;

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<std::process::ExitCode> {
    let cli = Cli::parse();
    if let Some(Command::Store(command)) = &cli.command {
        return ringmq::store_tool::run(&cli, command);
    }
    if let Some(Command::Scram(command)) = &cli.command {
        return ringmq::scram_tool::run(command);
    }
    run_broker(&cli).map(|()| std::process::ExitCode::SUCCESS)
}

/// Runs the broker (or prints or checks its configuration) as `cli` says.
fn run_broker(cli: &Cli) -> anyhow::Result<()> {
    if cli.print_default_config {
        print!("{DEFAULT_CONFIG_TOML}");
        return Ok(());
    }
    if cli.check_config {
        return check_config(cli);
    }
    let raw = cli.raw_config()?;
    let config = raw.validate()?;
    let log_control = ringmq::logging::init(&config)?;
    if let Err(error) = ring_runtime::raise_fd_limit(u64::MAX) {
        tracing::warn!(%error, "could not raise the open-file limit");
    }
    // Installed before the listeners open: a SIGHUP (or SIGTERM) that arrives while the broker
    // starts is handled like any later one, never the default action (terminate).
    let signals =
        Signals::new([SIGINT, SIGTERM, SIGHUP, SIGUSR2]).context("installing signal handlers")?;
    let broker = match std::env::var_os(UPGRADE_SOCKET_ENV) {
        Some(path) => {
            let inherited = ringmq::upgrade::take_over(std::path::Path::new(&path))
                .context("taking over from the process before")?;
            Broker::start_upgraded(config, inherited)
        }
        None => Broker::start(config),
    }
    .context("starting the broker")?;
    // The only control handed over: it cannot be refused.
    let _ = broker.set_log_control(log_control);
    let source_cli = cli.clone();
    broker.set_config_source(
        &raw,
        Box::new(move || {
            let raw = source_cli.raw_config()?;
            let config = raw.validate()?;
            Ok((raw, config))
        }),
    );
    tracing::info!(
        addrs = ?broker.local_addrs(),
        backend = ?broker.backend(),
        shards = broker.shard_count(),
        "ringmq listening"
    );
    match run_until_stop(&broker, signals)? {
        Stop::Signal(signal) => {
            tracing::info!(signal, "shutting down");
            broker.shutdown();
            broker.join().context("stopping the broker")?;
            Ok(())
        }
        Stop::Upgraded(handover) => {
            tracing::info!(
                successor = handover.successor,
                "upgrade: shutting down for the new process"
            );
            broker.shutdown();
            let stopped = broker.join().context("stopping the broker");
            handover.released();
            stopped
        }
        Stop::ShardEnded(exit) => stop_after_shard_exit(broker, exit),
    }
}

/// Why the broker stops.
enum Stop {
    /// SIGINT or SIGTERM (SIGHUP only passes through).
    Signal(i32),
    /// SIGUSR2: a new process took the listeners (`upgrade.rs`); this one drains and ends.
    Upgraded(Handover),
    /// A shard's thread ended on its own (a panic or an error): the broker cannot run on
    /// without it, since every SUBACK waits for every shard.
    ShardEnded(ShardExit),
}

/// Blocks until SIGINT or SIGTERM arrives or a shard ends, whichever comes first; SIGHUP
/// reloads the TLS certificates meanwhile.
fn run_until_stop(broker: &Broker, mut signals: Signals) -> anyhow::Result<Stop> {
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
            Stop::Signal(SIGHUP) => reload(broker),
            Stop::Signal(SIGUSR2) => match upgrade(broker) {
                Ok(handover) => return Ok(Stop::Upgraded(handover)),
                Err(error) => tracing::error!(%error, "upgrade refused; serving on"),
            },
            stop => return Ok(stop),
        }
    }
}

/// SIGUSR2: starts the binary at this process's path (a new version installed over it) with
/// the same arguments and hands it the listeners.
fn upgrade(broker: &Broker) -> Result<Handover, ringmq::upgrade::UpgradeError> {
    let exe = std::env::current_exe()
        .unwrap_or_else(|_| std::env::args_os().next().unwrap_or_default().into());
    // A binary replaced on disk shows as "<path> (deleted)": the new one is at <path>.
    let exe = match exe
        .to_str()
        .and_then(|text| text.strip_suffix(" (deleted)"))
    {
        Some(path) => std::path::PathBuf::from(path),
        None => exe,
    };
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    tracing::info!(exe = %exe.display(), "upgrade: starting the new process");
    ringmq::upgrade::start_successor(&exe, &args, broker.listeners())
}

/// SIGHUP: reads the config file again and reloads what can change live (the certificates,
/// password and ACL files, `[ip]`, publish rates, `[overload]`, the log level and lifecycle
/// bound); every other changed key is logged as taking effect at the next start. A config file
/// that no longer loads is refused whole and the running configuration stays.
fn reload(broker: &Broker) {
    broker.reload_from_source().log("SIGHUP");
}

/// `--check-config`: validates the configuration and prints it, every key with its effective
/// value, as TOML (usable as a config file once any secret, shown as `<redacted>`, is put
/// back); a bad one is an error naming the key.
fn check_config(cli: &Cli) -> anyhow::Result<()> {
    let raw = cli.raw_config()?;
    let config = raw.validate()?;
    let text = ringmq::config::redacted_toml(&raw, &config)
        .context("printing the effective configuration")?;
    print!("{text}");
    Ok(())
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
