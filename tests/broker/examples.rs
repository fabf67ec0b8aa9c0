//! `ringmq --check-config`: every example config in `configs/examples` passes it, what it
//! prints is the effective configuration as TOML (usable as a config file: read back alone, it
//! validates to the same configuration), a bad value fails naming the key, and no secret is
//! printed, on stdout or in an error.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ringmq::config::{Config, default_raw, parse_raw};

/// Runs the binary with `args`.
fn ringmq(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(args)
        .output()
        .expect("run the broker binary")
}

/// `ringmq --config path --check-config`, which must succeed; its stdout.
fn check(path: &Path) -> String {
    let output = ringmq(&[
        "--config".as_ref(),
        path.as_os_str(),
        "--check-config".as_ref(),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{}: {stderr}", path.display());
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

/// `path` overlaid on the embedded defaults, validated (what the broker would run with).
fn effective(path: &Path) -> Config {
    let text = std::fs::read_to_string(path).expect("read the example");
    let mut raw = default_raw().expect("the embedded defaults parse");
    raw.overlay(parse_raw("example", &text).expect("the example parses"));
    raw.validate().expect("the example validates")
}

/// The printed text read back alone, without the defaults under it.
fn reread(printed: &str) -> Config {
    let raw = parse_raw("printed", printed).expect("the printed text is TOML with known keys");
    raw.validate()
        .expect("the printed text is a complete config")
}

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/examples");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn every_example_config_passes_check_config_and_round_trips() {
    let paths = examples();
    assert!(paths.len() >= 3, "{paths:?}");
    for path in paths {
        let printed = check(&path);
        assert_eq!(
            format!("{:?}", reread(&printed)),
            format!("{:?}", effective(&path)),
            "{}:\n{printed}",
            path.display()
        );
    }
}

/// `ringmq --config FILE [flags] --check-config` with `text` as the file.
fn check_text(text: &str, flags: &[&str]) -> Output {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("ringmq.toml");
    std::fs::write(&path, text).expect("write the config file");
    let mut args = vec!["--config".as_ref(), path.as_os_str()];
    args.extend(flags.iter().map(std::ffi::OsStr::new));
    args.push("--check-config".as_ref());
    ringmq(&args)
}

#[test]
fn check_config_prints_file_and_flags_over_the_defaults() {
    let output = check_text(
        "[limits]\nreceive_maximum = 10\n",
        &["--listen", "127.0.0.1:1999"],
    );
    assert!(output.status.success());
    let printed = String::from_utf8(output.stdout).unwrap();
    assert!(printed.contains("tcp = [\"127.0.0.1:1999\"]"), "{printed}");
    assert!(printed.contains("receive_maximum = 10\n"), "{printed}");
    assert!(printed.contains("max_packet_size = 1048576\n"), "{printed}");
    let config = reread(&printed);
    assert_eq!(config.limits.receive_maximum, 10);
    assert_eq!(config.listeners.tcp, ["127.0.0.1:1999".parse().unwrap()]);
}

#[test]
fn check_config_refuses_a_bad_value_naming_the_key() {
    let output = check_text("[limits]\nreceive_maximum = 0\n", &[]);
    assert!(!output.status.success());
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("limits.receive_maximum"), "{stderr}");
}

const BRIDGE: &str = "[[bridges]]\nname = \"cloud\"\naddress = \"broker.example.com:8883\"\n\
                      client_id = \"edge-1\"\ntopics = [{ pattern = \"a/#\", direction = \"out\" }]\n";

/// Each secret-bearing key, alone in a config file: `--check-config` succeeds, prints
/// `<redacted>` (and says so in its header) and never the secret.
#[test]
fn check_config_prints_no_secret() {
    let cluster = "[cluster]\nnode_id = \"n1\"\n";
    let cases = [
        (
            "http.token",
            "[http]\nbind = \"127.0.0.1:0\"\ntoken = \"s3cret-token\"\n".to_owned(),
            "s3cret-token",
        ),
        (
            "http.password",
            "[http]\nbind = \"127.0.0.1:0\"\nusername = \"ops\"\npassword = \"s3cret-pw\"\n"
                .to_owned(),
            "s3cret-pw",
        ),
        (
            "bridges.password",
            format!("{BRIDGE}username = \"edge\"\npassword = \"s3cret-remote\"\n"),
            "s3cret-remote",
        ),
        (
            "bridges.local_password",
            format!("{BRIDGE}local_username = \"b\"\nlocal_password = \"s3cret-local\"\n"),
            "s3cret-local",
        ),
        (
            "cluster.nats (token)",
            format!("{cluster}nats = [\"nats://S3CRET-TOKEN@127.0.0.1:4222\"]\n"),
            "S3CRET-TOKEN",
        ),
        (
            "cluster.nats (password with @)",
            format!("{cluster}nats = [\"nats://node:pa@ss-s3cret@127.0.0.1:4222\"]\n"),
            "ss-s3cret",
        ),
        (
            "auth.redis.url",
            "[auth]\nbackends = [\"redis\"]\n\
             [auth.redis]\nurl = \"redis://user:pa@ss-s3cret@127.0.0.1:6379\"\n"
                .to_owned(),
            "ss-s3cret",
        ),
        (
            "auth.http.login_url",
            "[auth]\nbackends = [\"http\"]\n\
             [auth.http]\nlogin_url = \"http://broker:s3cret-login@auth.local/login\"\n"
                .to_owned(),
            "s3cret-login",
        ),
        (
            "auth.http.acl_url",
            "[auth]\nbackends = [\"http\"]\n[auth.http]\nlogin_url = \"http://auth.local/login\"\n\
             acl_url = \"http://s3cret-acl@auth.local/acl\"\n"
                .to_owned(),
            "s3cret-acl",
        ),
    ];
    for (key, text, secret) in cases {
        let output = check_text(&text, &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{key}: {stderr}");
        let printed = String::from_utf8(output.stdout).unwrap();
        assert!(
            !printed.contains(secret),
            "{key}: {secret} printed:\n{printed}"
        );
        assert!(
            !stderr.contains(secret),
            "{key}: {secret} on stderr: {stderr}"
        );
        assert!(printed.contains("<redacted>"), "{key}:\n{printed}");
        assert!(
            printed.contains("# secrets, shown as \"<redacted>\", are put back."),
            "{key}:\n{printed}"
        );
    }
}

/// A refused URL or address is named without the credentials in it.
#[test]
fn check_config_errors_show_no_secret() {
    let cases = [
        "[cluster]\nnode_id = \"n1\"\nnats = [\"nats://node:s3cret@127.0.0.1:notaport\"]\n",
        "[auth]\nbackends = [\"redis\"]\n[auth.redis]\nurl = \"rediss://:s3cret@h:6379\"\n",
        "[auth]\nbackends = [\"http\"]\n[auth.http]\nlogin_url = \"ftp://s3cret@h/login\"\n",
        &BRIDGE.replace(
            "broker.example.com:8883",
            "edge:s3cret@broker.example.com:8883",
        ),
    ];
    for text in cases {
        let output = check_text(text, &[]);
        assert!(!output.status.success(), "{text}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("<redacted>"), "{text}: {stderr}");
        assert!(!stderr.contains("s3cret"), "{text}: {stderr}");
    }
}
