//! `ringmq store check` and `ringmq store salvage`: the command line over the store tools of
//! the `session-store` crate (which does the reading and writing).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use session_store::storage::{StoreReport, check_store, salvage_store};

use crate::cli::{Cli, StoreCommand};

/// Runs `command`, printing its report; the exit code: 0 for a sound store (or a salvage
/// whose new store opens), 2 when `check` finds damage or a store that would not open, 1 when
/// the new store of a salvage does not open.
pub fn run(cli: &Cli, command: &StoreCommand) -> anyhow::Result<ExitCode> {
    match command {
        StoreCommand::Check { dir } => {
            let dir = store_dir(cli, dir.as_ref())?;
            let report =
                check_store(&dir).with_context(|| format!("checking {}", dir.display()))?;
            println!("{report}");
            Ok(check_exit(&report))
        }
        StoreCommand::Salvage { dir, into } => {
            let dir = store_dir(cli, dir.as_ref())?;
            let report = salvage_store(&dir, into)
                .with_context(|| format!("salvaging {} into {}", dir.display(), into.display()))?;
            println!("salvaged from {}", dir.display());
            println!("{report}");
            Ok(if report.opens.is_ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

fn check_exit(report: &StoreReport) -> ExitCode {
    if report.damaged || report.opens.is_err() {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

/// `dir` if given, else the configuration's `persistence.dir`.
fn store_dir(cli: &Cli, dir: Option<&PathBuf>) -> anyhow::Result<PathBuf> {
    match dir {
        Some(dir) => Ok(dir.clone()),
        None => Ok(cli.config()?.core.persistence.dir.clone()),
    }
}
