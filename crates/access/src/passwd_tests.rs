//! Password file parsing and verification, on lines written by mosquitto_passwd 2.0.11.

use super::*;

/// `mosquitto_passwd -c -b FILE alice secret` (PBKDF2-SHA512, 101 iterations).
const ALICE_PBKDF2: &str = "alice:$7$101$7xoI5Cp/rgm7Jkhp$udS9SpFJd9v5FEeEG+9ZeKpxxTRA0cbpRKGJtyGujHcTwXJ/tNbyTaeT248GWxbRxsvOhjmv6obFmzP/NJEdsg==";
/// `mosquitto_passwd -H sha512 -c -b FILE bob hunter2`.
const BOB_SHA512: &str = "bob:$6$H5XUO1HoPNp2RmVV$WCYigDZ1CmQ0BG2QAY+Cc4jREp76DZX+OSZseqozLxPQlsgluitB6SiStxjVYoWdKM0d5+h98DaML6mfhnyOcQ==";

fn both_users() -> PasswordFile {
    PasswordFile::parse(&format!("{ALICE_PBKDF2}\n{BOB_SHA512}\n")).unwrap()
}

fn line_problem(text: &str) -> (usize, LineProblem) {
    match PasswordFile::parse(text) {
        Err(AccessFileError::Line { line, problem, .. }) => (line, problem),
        other => panic!("expected a line error, got {other:?}"),
    }
}

#[test]
fn pbkdf2_hash_accepts_the_right_password_only() {
    let file = both_users();
    assert!(file.verify("alice", b"secret"));
    assert!(!file.verify("alice", b"Secret"));
    assert!(!file.verify("alice", b"secret "));
    assert!(!file.verify("alice", b""));
}

#[test]
fn sha512_hash_accepts_the_right_password_only() {
    let file = both_users();
    assert!(file.verify("bob", b"hunter2"));
    assert!(!file.verify("bob", b"hunter3"));
    assert!(!file.verify("bob", b"secret"));
}

#[test]
fn unknown_users_and_other_users_passwords_are_refused() {
    let file = both_users();
    assert!(!file.verify("carol", b"secret"));
    assert!(!file.verify("alice", b"hunter2"));
    assert!(!file.verify("", b""));
    assert!(!PasswordFile::parse("").unwrap().verify("alice", b"secret"));
}

#[test]
fn comments_blank_lines_and_crlf_are_skipped() {
    let text = format!("# users\n\n{ALICE_PBKDF2}\r\n   \n# bob\n{BOB_SHA512}\r\n");
    let file = PasswordFile::parse(&text).unwrap();
    assert_eq!(file.len(), 2);
    assert!(file.verify("bob", b"hunter2"));
}

#[test]
fn duplicate_user_is_an_error_naming_the_line() {
    let text = format!("{ALICE_PBKDF2}\n\n{ALICE_PBKDF2}\n");
    assert_eq!(
        line_problem(&text),
        (3, LineProblem::DuplicateUser("alice".to_owned()))
    );
}

#[test]
fn unsupported_and_malformed_hashes_are_errors() {
    let (line, problem) = line_problem("# x\nalice:plaintext");
    assert_eq!(line, 2);
    assert!(matches!(problem, LineProblem::UnsupportedHashType(_)));
    assert_eq!(
        line_problem("alice:$5$abc$def").1,
        LineProblem::UnsupportedHashType("$5$".to_owned())
    );
    assert!(matches!(
        line_problem("alice:$7$101$onlysalt").1,
        LineProblem::MalformedHash { .. }
    ));
    assert!(matches!(
        line_problem("alice:$7$0$7xoI5Cp/rgm7Jkhp$x").1,
        LineProblem::InvalidIterations(_)
    ));
    assert_eq!(line_problem("no colon here").1, LineProblem::MissingColon);
    assert_eq!(line_problem(":$6$a$b").1, LineProblem::EmptyUsername);
}

#[test]
fn bad_base64_and_wrong_lengths_are_errors() {
    assert_eq!(
        line_problem("bob:$6$!!!!$abcd").1,
        LineProblem::InvalidBase64 { field: "salt" }
    );
    assert_eq!(
        line_problem("bob:$6$H5XUO1HoPNp2RmVV$abcd").1,
        LineProblem::WrongLength {
            field: "hash",
            actual: 3,
            expected: 64
        }
    );
}

#[test]
fn load_names_the_path_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.passwd");
    let error = PasswordFile::load(&missing).unwrap_err();
    assert!(error.to_string().contains("missing.passwd"), "{error}");

    let bad = dir.path().join("bad.passwd");
    std::fs::write(&bad, "alice:secret\n").unwrap();
    let error = PasswordFile::load(&bad).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("bad.passwd: line 1:"), "{message}");
}

#[test]
fn constant_time_eq_compares_whole_slices() {
    assert!(constant_time_eq(b"abc", b"abc"));
    assert!(!constant_time_eq(b"abc", b"abd"));
    assert!(!constant_time_eq(b"abc", b"ab"));
}
