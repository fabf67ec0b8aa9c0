//! `Broker::reload_config` (SIGHUP, the admin API): live keys are put in force, keys read only
//! at start are reported, a configuration that does not load is refused whole, and the log
//! level changes.

use std::io::Write;

use ringmq::logging::LogControl;

use crate::harness::TestBroker;

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
