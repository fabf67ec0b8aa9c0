//! `ringmq-bench`: the RingMQ MQTT load generator.
#![forbid(unsafe_code)]

mod cli;
mod client;
mod offline;
mod payload;
mod phase;
mod plan;
mod run;
mod shard;
mod stats;
mod summary;

use anyhow::Context;
use clap::Parser;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let cli = cli::Cli::parse();
    if let Err(error) = ring_runtime::raise_fd_limit(u64::MAX) {
        eprintln!("warning: could not raise the open-file limit: {error}");
    }
    let (text, json, json_path) = match cli.command {
        cli::Command::Offline { common, offline } => {
            let summary = offline::run(&common, &offline)?;
            (
                summary.text(),
                serde_json::to_string_pretty(&summary),
                common.json,
            )
        }
        command => {
            let plan = plan::build(command)?;
            let json_path = plan.common.json.clone();
            let summary = run::run(plan)?;
            (
                summary.text(),
                serde_json::to_string_pretty(&summary),
                json_path,
            )
        }
    };
    println!("{text}");
    let json = json.context("encoding the summary")?;
    match json_path {
        Some(path) => {
            std::fs::write(&path, json).with_context(|| format!("writing {}", path.display()))?
        }
        None => println!("{json}"),
    }
    Ok(())
}
