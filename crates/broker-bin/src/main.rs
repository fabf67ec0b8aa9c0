//! `ringmq`: the broker binary.
#![forbid(unsafe_code)]

use clap::Parser;
use ringmq::cli::Cli;
use ringmq::config::DEFAULT_CONFIG_TOML;

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
    anyhow::bail!("the ringmq broker is not assembled yet (issue 5); configuration is valid")
}
