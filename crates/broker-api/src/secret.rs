//! Credentials kept out of what the broker prints (logs, errors, `--check-config`, the admin
//! API's configuration view): [`Secret`], a password or token held apart, and [`redact_url`],
//! a URL with the credentials in its userinfo replaced by [`REDACTED`].

use std::borrow::Cow;
use std::fmt;

/// A password kept out of `Debug` output (`--check-config` prints the config).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"***\"")
    }
}

/// What stands for a credential in a printed URL or configuration.
pub const REDACTED: &str = "<redacted>";

/// `url` with the credentials in its userinfo replaced by [`REDACTED`]; borrowed as it is when
/// there are none.
///
/// The authority (RFC 3986 `[userinfo@]host[:port]`) follows `scheme://` (or starts the text
/// when there is no scheme: the NATS client reads `token@host:4222` as a `nats://` URL) and
/// ends at the first `/`, `?` or `#`; its userinfo ends at the **last** `@` in it, so a
/// password may contain `@` (and `:`), while an `@` in the path, query or fragment is not
/// taken for one. Then:
///
/// - `user:password@` becomes `user:<redacted>@` (the user name stays, it helps to tell
///   servers apart and is no secret);
/// - a userinfo without `:` becomes `<redacted>@`, whatever the scheme: NATS reads it as a
///   token (`nats://TOKEN@host`), `https://TOKEN@host` is a common way to pass one, and a user
///   name cannot be told from a token;
/// - an empty userinfo (`nats://@host`) and a URL without one are returned as they are.
///
/// A `/`, `?` or `#` inside a password must be percent-encoded (as RFC 3986 and the clients
/// require): unencoded, it ends the authority, and what follows is not recognised as a secret.
pub fn redact_url(url: &str) -> Cow<'_, str> {
    let start = authority_start(url);
    let rest = &url[start..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let Some(at) = authority.rfind('@') else {
        return Cow::Borrowed(url);
    };
    let userinfo = &authority[..at];
    if userinfo.is_empty() {
        return Cow::Borrowed(url);
    }
    let user = userinfo
        .split_once(':')
        .map_or(String::new(), |(user, _)| format!("{user}:"));
    Cow::Owned(format!("{}{user}{REDACTED}{}", &url[..start], &rest[at..]))
}

/// Where the authority begins: after `scheme://` when the text starts with a scheme (a letter,
/// then letters, digits, `+`, `-` or `.`), else at the start.
fn authority_start(url: &str) -> usize {
    let Some(end) = url.find("://") else {
        return 0;
    };
    let scheme = &url[..end];
    let valid = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if valid { end + 3 } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn redacts(url: &str, shown: &str) {
        assert_eq!(redact_url(url), shown, "{url}");
    }

    #[test]
    fn a_token_is_hidden_whole() {
        redacts("nats://s3cr3t@host:4222", "nats://<redacted>@host:4222");
        redacts(
            "tls://s3cr3t@10.0.0.1:4222",
            "tls://<redacted>@10.0.0.1:4222",
        );
        redacts("s3cr3t@host:4222", "<redacted>@host:4222");
        redacts(
            "https://ghp_s3cr3t@example.com/login",
            "https://<redacted>@example.com/login",
        );
    }

    #[test]
    fn a_password_is_hidden_and_the_user_kept() {
        redacts(
            "nats://ringmq:pw@host:4222",
            "nats://ringmq:<redacted>@host:4222",
        );
        redacts(
            "redis://:pa55@127.0.0.1:6379/0",
            "redis://:<redacted>@127.0.0.1:6379/0",
        );
        redacts(
            "http://broker:pw@auth.local:8080/login?x=1",
            "http://broker:<redacted>@auth.local:8080/login?x=1",
        );
        redacts("redis://user:@host", "redis://user:<redacted>@host");
    }

    #[test]
    fn a_password_with_at_and_colon_signs_is_hidden_whole() {
        redacts(
            "redis://user:pa@ss-secret@host:6379",
            "redis://user:<redacted>@host:6379",
        );
        redacts("nats://u:a:b@c@host", "nats://u:<redacted>@host");
        redacts("tok@en@host:4222", "<redacted>@host:4222");
    }

    #[test]
    fn an_ipv6_host_is_kept() {
        redacts("nats://u:p@ss@[::1]:4222", "nats://u:<redacted>@[::1]:4222");
        redacts(
            "nats://tok@[fe80::1%25eth0]:4222",
            "nats://<redacted>@[fe80::1%25eth0]:4222",
        );
        redacts("nats://[::1]:4222", "nats://[::1]:4222");
    }

    #[test]
    fn a_url_without_userinfo_is_unchanged() {
        for url in [
            "nats://127.0.0.1:4222",
            "redis://127.0.0.1:6379/0",
            "https://auth.example.com/login",
            "host:4222",
            "nats://@host:4222",
            "",
            "not a url",
        ] {
            assert!(
                matches!(redact_url(url), Cow::Borrowed(u) if u == url),
                "{url}"
            );
        }
    }

    #[test]
    fn an_at_sign_in_the_path_query_or_fragment_is_no_userinfo() {
        for url in [
            "http://auth.local/login/user@example.com",
            "http://auth.local/login?email=a@b.c",
            "http://auth.local?email=a@b.c",
            "http://auth.local#me@there",
            "auth.local/x@y",
            "host/path?next=http://u:p@other",
        ] {
            redacts(url, url);
        }
        redacts(
            "http://u:pw@auth.local/a@b?c=d@e",
            "http://u:<redacted>@auth.local/a@b?c=d@e",
        );
    }

    #[test]
    fn the_secret_never_survives() {
        for (url, secret) in [
            ("nats://TOKEN@host:4222", "TOKEN"),
            ("redis://user:pa@ss-secret@host:6379", "ss-secret"),
            ("redis://user:pa@ss-secret@host:6379", "pa@"),
            ("http://user:hunter2@host/login", "hunter2"),
            ("nats://user:p:w@[::1]:4222", "p:w"),
        ] {
            assert!(!redact_url(url).contains(secret), "{url}");
        }
    }

    #[test]
    fn a_secret_is_kept_out_of_debug() {
        assert_eq!(format!("{:?}", Secret("pw".into())), "\"***\"");
    }
}
