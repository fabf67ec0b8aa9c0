//! An HTTP/1.1 response and its serialisation.

use std::io::{self, Write};

/// `text/plain` for the health endpoints and errors.
pub const TEXT: &str = "text/plain; charset=utf-8";
/// The Prometheus text exposition format, version 0.0.4.
pub const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The admin API's answers.
pub const JSON: &str = "application/json";

/// Headers on every answer of the listener: the dashboard's files run no inline script, load
/// nothing from elsewhere and are never framed; no answer is sniffed as another type (the
/// API's and `/metrics` carry them too: they cost nothing).
pub const SECURITY_HEADERS: [(&str, &str); 4] = [
    (
        "Content-Security-Policy",
        "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    ),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
];

/// One response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The `Content-Type`.
    pub content_type: &'static str,
    /// Extra header fields (e.g. `Allow`, `WWW-Authenticate`).
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// A plain-text response.
    pub fn text(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            content_type: TEXT,
            headers: Vec::new(),
            body: body.into().into_bytes(),
        }
    }

    /// A plain-text error response whose body is the status's reason phrase.
    pub fn error(status: u16) -> Self {
        Self::text(status, format!("{}\n", reason(status)))
    }

    /// 405 with the methods the path allows.
    pub fn method_not_allowed(allow: &'static str) -> Self {
        Self::error(405).with_header("Allow", allow.to_owned())
    }

    /// Adds a header field.
    pub fn with_header(mut self, name: &'static str, value: String) -> Self {
        self.headers.push((name, value));
        self
    }

    /// Writes the status line, headers and (unless `head_only`, for HEAD) the body; `close`
    /// announces that the connection closes after it.
    pub fn write_to(&self, out: &mut impl Write, close: bool, head_only: bool) -> io::Result<()> {
        let mut head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        );
        for (name, value) in SECURITY_HEADERS {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if close {
            head.push_str("Connection: close\r\n");
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        if !head_only {
            bytes.extend_from_slice(&self.body);
        }
        out.write_all(&bytes)?;
        out.flush()
    }
}

/// The reason phrase of the statuses this server sends.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        421 => "Misdirected Request",
        422 => "Unprocessable Content",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_status_headers_and_body() {
        let mut out = Vec::new();
        Response::method_not_allowed("GET, HEAD")
            .write_to(&mut out, true, false)
            .expect("writes");
        let text = String::from_utf8(out).expect("UTF-8");
        assert!(
            text.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
            "{text}"
        );
        assert!(text.contains("\r\nAllow: GET, HEAD\r\n"));
        assert!(text.contains("\r\nConnection: close\r\n"));
        assert!(text.contains("\r\nX-Frame-Options: DENY\r\n"));
        assert!(text.contains("\r\nX-Content-Type-Options: nosniff\r\n"));
        assert!(text.contains("\r\nContent-Security-Policy: default-src 'self'; "));
        assert!(text.ends_with("\r\n\r\nMethod Not Allowed\n"));
    }

    #[test]
    fn head_only_keeps_the_length_but_not_the_body() {
        let mut out = Vec::new();
        Response::text(200, "ok\n")
            .write_to(&mut out, false, true)
            .expect("writes");
        let text = String::from_utf8(out).expect("UTF-8");
        assert!(text.contains("Content-Length: 3\r\n"));
        assert!(text.ends_with("\r\n\r\n"));
    }
}
