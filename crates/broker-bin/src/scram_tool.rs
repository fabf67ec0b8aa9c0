//! `ringmq scram add`: the command line over the SCRAM credential file of the `access` crate
//! (which derives the keys and writes the line).

use std::io::{BufRead, Write};
use std::num::NonZeroU32;
use std::path::Path;
use std::process::ExitCode;

use access::scram::file::with_credential;
use access::scram::{Mechanism, ScramCredential};
use anyhow::{Context, bail};

use crate::cli::ScramCommand;

/// Runs `command`.
pub fn run(command: &ScramCommand) -> anyhow::Result<ExitCode> {
    match command {
        ScramCommand::Add {
            file,
            user,
            mechanism,
            iterations,
            password,
        } => {
            let Some(mechanism) = Mechanism::from_name(mechanism) else {
                bail!("unknown mechanism `{mechanism}` (expected SCRAM-SHA-256 or SCRAM-SHA-512)");
            };
            let iterations =
                NonZeroU32::new(*iterations).context("--iterations must be at least 1")?;
            let password = match password {
                Some(password) => password.clone(),
                None => password_from_stdin()?,
            };
            let credential =
                ScramCredential::with_random_salt(mechanism, password.as_bytes(), iterations)
                    .map_err(|_| anyhow::anyhow!("the system random number generator failed"))?;
            add_to_file(file, user, &credential)?;
            println!(
                "{user}: {} credential written to {}",
                mechanism.name(),
                file.display()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The first line of standard input, without its line end.
fn password_from_stdin() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("reading the password from standard input")?;
    let password = line.trim_end_matches(['\r', '\n']).to_owned();
    if password.is_empty() {
        bail!("no password: give --password or a line on standard input");
    }
    Ok(password)
}

/// Writes `file` with `credential`'s line, through a temporary file renamed over it (mode 0600).
fn add_to_file(file: &Path, user: &str, credential: &ScramCredential) -> anyhow::Result<()> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => return Err(error).with_context(|| format!("reading {}", file.display())),
    };
    let text = with_credential(&text, user, credential)
        .with_context(|| format!("username `{}` cannot be written", user.escape_debug()))?;
    let temporary = file.with_extension("tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut out = options
        .open(&temporary)
        .with_context(|| format!("writing {}", temporary.display()))?;
    out.write_all(text.as_bytes())?;
    out.sync_all()?;
    std::fs::rename(&temporary, file)
        .with_context(|| format!("renaming {} to {}", temporary.display(), file.display()))?;
    Ok(())
}
