//! What a web browser could make of the listener, refused before any route or credential check:
//!
//! - **DNS rebinding.** A page on `attacker.example` whose name is made to resolve to 127.0.0.1
//!   can read the listener's answers as its own. Its requests carry `Host: attacker.example`, so
//!   a `Host` that names neither the listener's own address (the one the client connected to),
//!   nor loopback (`localhost`, `127.0.0.1`, `[::1]`), nor an `http.allowed_hosts` entry is
//!   answered 421. Any port is accepted (a port forward changes it).
//! - **Cross-site requests.** A page anywhere can send a "simple" POST (`text/plain`, no
//!   preflight) to the listener; it cannot read the answer, but the POST takes effect. A request
//!   other than GET/HEAD whose `Origin` is not the listener's own (scheme, host and port of its
//!   `Host`), or whose `Sec-Fetch-Site` is not `same-origin` or `none`, is answered 403. Browsers
//!   send `Origin` with every such request; tools (curl, Prometheus) send neither header.
//!
//! Both apply with credentials too: a browser replays cached basic credentials by itself.

use std::net::SocketAddr;

use super::request::Request;
use super::response::Response;
use crate::settings::{AllowedHosts, HostName, HttpSettings};

/// The `Host` and origin checks of one listener.
#[derive(Debug, Clone)]
pub struct Guard {
    allowed: AllowedHosts,
    /// `https` on a TLS listener, else `http`: an origin of the other scheme is another origin.
    scheme: &'static str,
}

impl Guard {
    /// The checks for `settings`' listener, serving HTTPS when `tls`.
    pub fn new(settings: &HttpSettings, tls: bool) -> Self {
        Self {
            allowed: settings.allowed_hosts.clone(),
            scheme: if tls { "https" } else { "http" },
        }
    }

    /// The refusal of `request`, which arrived on a connection to `local`; `None`: let it
    /// through.
    pub fn refuse(&self, request: &Request, local: SocketAddr) -> Option<Response> {
        // An HTTP/1.0 request may come without Host; browsers always send one.
        if let Some(host) = request.header("host")
            && !self.host_allowed(host, local)
        {
            return Some(Response::text(
                421,
                "unknown Host: add it to http.allowed_hosts to serve it\n",
            ));
        }
        if matches!(request.method.as_str(), "GET" | "HEAD") {
            return None;
        }
        let fetch_site = request.header("sec-fetch-site");
        if fetch_site.is_some_and(|site| !matches!(site, "same-origin" | "none")) {
            return Some(Response::text(403, "cross-site request refused\n"));
        }
        if let Some(origin) = request.header("origin")
            && !self.same_origin(origin, request.header("host"))
        {
            return Some(Response::text(403, "cross-origin request refused\n"));
        }
        None
    }

    /// Whether `host` (a `Host` value) names this listener.
    fn host_allowed(&self, host: &str, local: SocketAddr) -> bool {
        if self.allowed.any {
            return true;
        }
        let Some((name, _port)) = HostName::parse_authority(host) else {
            return false;
        };
        let own = match &name {
            HostName::Ip(ip) => ip.is_loopback() || ip.to_canonical() == local.ip().to_canonical(),
            HostName::Name(name) => name == "localhost",
        };
        own || self.allowed.hosts.contains(&name)
    }

    /// Whether `origin` is the origin of this listener as `host` names it.
    fn same_origin(&self, origin: &str, host: Option<&str>) -> bool {
        let Some((scheme, authority)) = origin.split_once("://") else {
            return false; // "null", or garbage
        };
        if !scheme.eq_ignore_ascii_case(self.scheme) {
            return false;
        }
        let default_port = if self.scheme == "https" { 443 } else { 80 };
        let parse = |authority: &str| {
            HostName::parse_authority(authority)
                .map(|(name, port)| (name, port.unwrap_or(default_port)))
        };
        match (parse(authority), host.and_then(parse)) {
            (Some(origin), Some(host)) => origin == host,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A guard allowing `hosts` (each a host name or address, or "*").
    fn guard(hosts: &[&str], tls: bool) -> Guard {
        let mut settings = HttpSettings::for_tests();
        settings.allowed_hosts = AllowedHosts {
            any: hosts.contains(&"*"),
            hosts: hosts.iter().filter_map(|h| HostName::parse(h)).collect(),
        };
        Guard::new(&settings, tls)
    }

    fn request(method: &str, headers: &[(&str, &str)]) -> Request {
        Request {
            method: method.to_owned(),
            target: "/api/v1/reload".to_owned(),
            headers: headers
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
            body: Vec::new(),
            close: true,
        }
    }

    fn status(guard: &Guard, local: &str, method: &str, headers: &[(&str, &str)]) -> u16 {
        let local = local.parse().expect("an address");
        guard
            .refuse(&request(method, headers), local)
            .map_or(200, |refused| refused.status)
    }

    #[test]
    fn hosts_naming_the_listener_or_allowed_pass_and_others_get_421() {
        let g = guard(&["broker.example", "10.1.1.1"], false);
        let local = "192.0.2.7:18083";
        for host in [
            "localhost",
            "LOCALHOST:18083",
            "127.0.0.1:18083",
            "127.0.0.1",
            "[::1]:9",
            "192.0.2.7:18083",
            "broker.example:18083",
            "Broker.Example.",
            "10.1.1.1",
        ] {
            assert_eq!(status(&g, local, "GET", &[("host", host)]), 200, "{host}");
        }
        for host in [
            "attacker.example",
            "localhost.attacker.example",
            "192.0.2.8:18083",
            "",
            "bad host",
            "[::1",
        ] {
            assert_eq!(status(&g, local, "GET", &[("host", host)]), 421, "{host}");
        }
        assert_eq!(status(&g, local, "GET", &[]), 200, "HTTP/1.0 without Host");
        let any = guard(&["*"], false);
        assert_eq!(
            status(&any, local, "GET", &[("host", "attacker.example")]),
            200
        );
    }

    #[test]
    fn cross_origin_state_changes_get_403() {
        let g = guard(&[], false);
        let local = "127.0.0.1:18083";
        let host = ("host", "127.0.0.1:18083");
        let post = |headers: &[(&str, &str)]| status(&g, local, "POST", headers);
        assert_eq!(post(&[host]), 200, "no Origin: not a browser");
        assert_eq!(post(&[host, ("origin", "http://127.0.0.1:18083")]), 200);
        assert_eq!(post(&[host, ("sec-fetch-site", "same-origin")]), 200);
        assert_eq!(post(&[host, ("sec-fetch-site", "none")]), 200);
        for origin in [
            "http://evil.example",
            "http://127.0.0.1:18084",
            "http://localhost:18083",
            "https://127.0.0.1:18083",
            "null",
            "",
        ] {
            assert_eq!(post(&[host, ("origin", origin)]), 403, "{origin}");
            let get = status(&g, local, "GET", &[host, ("origin", origin)]);
            assert_eq!(get, 200, "GET {origin}");
        }
        for site in ["cross-site", "same-site"] {
            assert_eq!(post(&[host, ("sec-fetch-site", site)]), 403, "{site}");
        }
        assert_eq!(
            post(&[("origin", "http://127.0.0.1:18083")]),
            403,
            "no Host"
        );
        let delete = status(
            &g,
            local,
            "DELETE",
            &[host, ("origin", "http://evil.example")],
        );
        assert_eq!(delete, 403);
        let default_port = [("host", "localhost"), ("origin", "http://localhost:80")];
        assert_eq!(post(&default_port), 200);
        let tls = guard(&[], true);
        let same = [
            ("host", "localhost:8443"),
            ("origin", "https://localhost:8443"),
        ];
        assert_eq!(status(&tls, local, "POST", &same), 200);
        let plain = [
            ("host", "localhost:8443"),
            ("origin", "http://localhost:8443"),
        ];
        assert_eq!(status(&tls, local, "POST", &plain), 403);
    }
}
