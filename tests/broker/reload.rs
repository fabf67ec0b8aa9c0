//! `Broker::reload_config` (SIGHUP, the admin API): live keys are put in force, keys read only
//! at start are reported, a configuration that does not load is refused whole, and the log
//! level changes. The binary's log of a reload says only what was put in force.

use std::io::Write;
use std::path::Path;

use ringmq::logging::LogControl;

use crate::binary::BrokerProcess;
use crate::harness::{TestBroker, wait_until};
use crate::pki::TestPki;

#[test]
fn an_unchanged_config_reloads_completely() {
    let broker = TestBroker::start();
    let report = broker.reload_config("");
    assert!(report.is_complete(), "{report:?}");
    assert!(report.applied.is_empty(), "{report:?}");
}

#[test]
fn a_changed_listener_is_reported_for_the_next_start_and_live_keys_are_applied() {
    let broker = TestBroker::start();
    let report = broker.reload_config(
        "[listeners]\ntcp = [\"127.0.0.1:1\"]\n[runtime]\nshards = 3\n\
         [limits]\nmax_publish_rate = 1000\n[ip]\nmax_connections = 50\n",
    );
    assert_eq!(report.restart_required, ["listeners.tcp", "runtime.shards"]);
    assert_eq!(
        report.applied,
        ["ip.max_connections", "limits.max_publish_rate"]
    );
    assert!(
        report.refused.is_none() && report.errors.is_empty(),
        "{report:?}"
    );
    // Still on its old address; a key waiting for a restart is reported again.
    broker.assert_serving();
    let again = broker.reload_config("[listeners]\ntcp = [\"127.0.0.1:1\"]\n");
    assert_eq!(again.restart_required, ["listeners.tcp"]);
    assert_eq!(
        again.applied,
        ["ip.max_connections", "limits.max_publish_rate"],
        "back to the defaults"
    );
}

#[test]
fn a_broken_config_file_is_refused_whole_and_the_old_config_stays() {
    let broker = TestBroker::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ringmq.toml");
    let mut file = std::fs::File::create(&path).unwrap();
    // Valid keys that would lock this client out, and one bad value.
    writeln!(
        file,
        "{}[ip]\ndeny = [\"127.0.0.1\"]\n[limits]\nreceive_maximum = 0",
        crate::harness::BASE
    )
    .unwrap();
    let args = [
        std::ffi::OsString::from("ringmq"),
        "--config".into(),
        path.into_os_string(),
    ];
    let cli = <ringmq::cli::Cli as clap::Parser>::parse_from(args);
    let error = cli.config().expect_err("the file does not validate");
    let report = broker.reload_refused(&error);
    let refused = report.refused.as_deref().unwrap_or_default();
    assert!(refused.contains("limits.receive_maximum"), "{report:?}");
    assert!(report.applied.is_empty() && report.restart_required.is_empty());
    broker.assert_serving();
}

#[test]
fn a_log_level_change_takes_effect() {
    let broker = TestBroker::start();
    broker.set_log_control(LogControl::detached(tracing::Level::INFO));
    let report = broker.reload_config("[log]\nlevel = \"debug\"\n");
    assert_eq!(report.applied, ["log.level"], "{report:?}");
    assert!(report.is_complete(), "{report:?}");
    assert_eq!(
        broker.log_filter().as_deref(),
        Some("async_nats=info,debug"),
        "the NATS client stays at info: its debug lines name the servers with credentials"
    );
    let report = broker.reload_config("[log]\nlevel = \"warn\"\nmax_lifecycle_per_sec = 7\n");
    assert_eq!(report.applied, ["log.max_lifecycle_per_sec", "log.level"]);
    assert_eq!(broker.log_filter().as_deref(), Some("warn"));
}

#[test]
fn a_log_level_change_without_a_control_is_reported_as_failed() {
    let broker = TestBroker::start();
    let report = broker.reload_config("[log]\nlevel = \"debug\"\n");
    assert!(!report.applied.contains(&"log.level"), "{report:?}");
    assert!(
        report.errors.iter().any(|e| e.starts_with("log.level")),
        "{report:?}"
    );
    // Not applied, so reported again.
    let again = broker.reload_config("[log]\nlevel = \"debug\"\n");
    assert_eq!(again.errors, report.errors);
}

/// A config for the binary: plain TCP on `port`, a TLS listener with `pki`'s certificate,
/// nothing stored, plus `extra`.
fn tls_binary_config(port: u16, pki: &TestPki, extra: &str) -> String {
    format!(
        "[listeners]\ntcp = [\"127.0.0.1:{port}\"]\n[[listeners.tls]]\nbind = \"127.0.0.1:0\"\n{}\
         [persistence]\nengine = \"none\"\n{extra}",
        pki.listener_keys()
    )
}

/// Writes `config`, sends SIGHUP and returns what the binary logged since, once it holds
/// `last` (the reload's last line).
fn sighup_with(broker: &BrokerProcess, file: &Path, config: &str, last: &str) -> String {
    std::fs::write(file, config).expect("write the config file");
    let since = broker.log().len();
    broker.sighup();
    wait_until(&format!("{last:?} in the reload's log"), || {
        let log = broker.log();
        let reload = &log[since..];
        reload.contains(last).then(|| reload.to_owned())
    })
}

/// The lines of `log` that say something was applied.
fn applied_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|line| line.contains("applied"))
        .collect()
}

/// SIGHUP with a key file that no longer loads, then with a config that does not validate:
/// each reload's log is its failure only, no line about settings applied (issue 47, defect
/// 11). A reload that puts a live key in force while a file fails says which key, and that
/// only part of it applied.
#[test]
fn a_failed_sighup_reload_logs_the_failure_and_nothing_applied() {
    let pki = TestPki::new();
    let file = pki.dir.path().join("ringmq.toml");
    let port = crate::ports::free_port();
    std::fs::write(&file, tls_binary_config(port, &pki, "")).unwrap();
    let broker = BrokerProcess::start(&file);

    std::fs::write(&pki.server.key, "not a key\n").unwrap();
    let failed_key = "reload failed; the old one stays in use";
    let log = sighup_with(
        &broker,
        &file,
        &tls_binary_config(port, &pki, ""),
        failed_key,
    );
    assert!(log.contains("private key"), "{log}");
    assert_eq!(applied_lines(&log), Vec::<&str>::new(), "{log}");
    assert!(!log.contains("read again"), "a file failed: {log}");

    let broken = tls_binary_config(port, &pki, "[limits]\nreceive_maximum = 0\n");
    let log = sighup_with(&broker, &file, &broken, failed_key);
    assert!(
        log.contains("the new configuration is refused") && log.contains("receive_maximum"),
        "{log}"
    );
    assert_eq!(applied_lines(&log), Vec::<&str>::new(), "{log}");

    let live_change = tls_binary_config(port, &pki, "[ip]\nmax_connections = 50\n");
    let log = sighup_with(&broker, &file, &live_change, failed_key);
    let applied = applied_lines(&log);
    assert!(
        applied.len() == 1
            && applied[0].contains("partly")
            && applied[0].contains("[\"ip.max_connections\"]"),
        "{log}"
    );
}
