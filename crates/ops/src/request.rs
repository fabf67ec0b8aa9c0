//! Reading one HTTP/1.1 request: a bounded head (request line and headers, each line ended by CRLF
//! or a bare LF, RFC 9112 2.2), then a `Content-Length` body. No chunked bodies, no obsolete line folding, no absolute-form targets:
//! an operations endpoint needs none of them, and each is answered with a 4xx/5xx status.

use std::io::{self, BufRead};

/// The bounds a request must fit in.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest request line plus headers, terminator included.
    pub max_head: usize,
    /// Largest body.
    pub max_body: usize,
}

/// One request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The method, as sent (methods are case-sensitive).
    pub method: String,
    /// The request target (origin form: path and query, still percent-encoded).
    pub target: String,
    /// The header fields, names lower-cased, values trimmed.
    pub headers: Vec<(String, String)>,
    /// The body (`Content-Length` bytes).
    pub body: Vec<u8>,
    /// Whether the connection closes after the answer (`Connection: close`, or HTTP/1.0
    /// without `Connection: keep-alive`).
    pub close: bool,
}

impl Request {
    /// The value of header `name` (lower case), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why no request could be read.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The request breaks HTTP/1.1 syntax (400).
    #[error("malformed request: {0}")]
    Malformed(&'static str),
    /// The head is larger than the limit (431).
    #[error("request head over its limit")]
    HeadTooLarge,
    /// The body is larger than the limit (413).
    #[error("request body over its limit")]
    BodyTooLarge,
    /// A feature this server does not implement, e.g. a chunked body (501).
    #[error("not implemented: {0}")]
    Unsupported(&'static str),
    /// The HTTP version is not 1.0 or 1.1 (505).
    #[error("HTTP version not supported")]
    Version,
    /// The request stopped arriving part way: its head did not arrive within the head deadline,
    /// or its next bytes within the read timeout (408).
    #[error("request timed out part way")]
    Timeout,
    /// Reading failed (reset, or a timeout before any byte of a request): nothing to answer.
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl HttpError {
    /// The status to answer with; `None` when the connection is simply closed.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Malformed(_) => Some(400),
            Self::HeadTooLarge => Some(431),
            Self::BodyTooLarge => Some(413),
            Self::Unsupported(_) => Some(501),
            Self::Version => Some(505),
            Self::Timeout => Some(408),
            Self::Io(_) => None,
        }
    }
}

/// Reads the next request; `Ok(None)` when the peer closed the connection before sending any
/// byte of one (the end of a keep-alive connection). `head_read` is called once the head is in,
/// before the body is read.
pub fn read_request<R: BufRead>(
    reader: &mut R,
    limits: Limits,
    head_read: impl FnOnce(),
) -> Result<Option<Request>, HttpError> {
    let Some(head) = read_head(reader, limits.max_head)? else {
        return Ok(None);
    };
    head_read();
    let (mut request, length) = parse_head(&head, limits.max_body)?;
    if length > 0 {
        request.body = vec![0; length];
        reader
            .read_exact(&mut request.body)
            .map_err(|e| match e.kind() {
                io::ErrorKind::UnexpectedEof => {
                    HttpError::Malformed("body shorter than Content-Length")
                }
                _ if timed_out(&e) => HttpError::Timeout,
                _ => HttpError::Io(e),
            })?;
    }
    Ok(Some(request))
}

/// Whether `error` is a read timeout (`WouldBlock` is what a socket read timeout gives on Unix).
fn timed_out(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

/// The bytes up to and including the empty line that ends the head (empty lines before the
/// request line skipped); bytes after it stay in `reader`.
fn read_head<R: BufRead>(reader: &mut R, max: usize) -> Result<Option<Vec<u8>>, HttpError> {
    let mut head = Vec::new();
    loop {
        let before = head.len();
        let available = {
            let chunk = match reader.fill_buf() {
                Ok(chunk) => chunk,
                Err(error) if before > 0 && timed_out(&error) => return Err(HttpError::Timeout),
                Err(error) => return Err(error.into()),
            };
            if before == 0 {
                // RFC 9112 2.2: empty lines before the request line are ignored.
                let skip = leading_empty_lines(chunk);
                if skip > 0 {
                    reader.consume(skip);
                    continue;
                }
            }
            head.extend_from_slice(chunk);
            chunk.len()
        };
        if available == 0 {
            return match before {
                0 => Ok(None),
                _ => Err(HttpError::Malformed(
                    "connection closed inside the request head",
                )),
            };
        }
        // The end may straddle the previous fill: look again from up to 2 bytes before it, but
        // past the empty lines before the request line (a small fill may have split them).
        let from = before.saturating_sub(2).max(leading_empty_lines(&head));
        if let Some(end) = head_end(&head, from) {
            reader.consume(end - before);
            if end > max {
                return Err(HttpError::HeadTooLarge);
            }
            head.truncate(end);
            return Ok(Some(head));
        }
        reader.consume(available);
        if head.len() > max {
            return Err(HttpError::HeadTooLarge);
        }
    }
}

/// The length of the empty lines (CRLF or bare LF) `bytes` starts with.
fn leading_empty_lines(bytes: &[u8]) -> usize {
    let mut at = 0;
    loop {
        match &bytes[at..] {
            [b'\n', ..] => at += 1,
            [b'\r', b'\n', ..] => at += 2,
            _ => return at,
        }
    }
}

/// Just past the empty line that ends a head (a line end followed by CRLF or a bare LF), looking
/// from `from`.
fn head_end(head: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(offset) = head[at..].iter().position(|b| *b == b'\n') {
        let lf = at + offset;
        match &head[lf + 1..] {
            [b'\n', ..] => return Some(lf + 2),
            [b'\r', b'\n', ..] => return Some(lf + 3),
            _ => at = lf + 1,
        }
    }
    None
}

/// A complete head: the request (without its body) and the body's length.
fn parse_head(head: &[u8], max_body: usize) -> Result<(Request, usize), HttpError> {
    let text =
        std::str::from_utf8(head).map_err(|_| HttpError::Malformed("request head is not UTF-8"))?;
    // Each line ends with CRLF or a bare LF (RFC 9112 2.2); a CR elsewhere is refused below (a
    // control character in a header value, or in the request line).
    let text = &text[leading_empty_lines(text.as_bytes())..];
    let mut lines = text
        .split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line));
    let (method, target, version) = parse_request_line(lines.next().unwrap_or_default())?;
    let mut headers = Vec::new();
    for line in lines.take_while(|line| !line.is_empty()) {
        headers.push(parse_header(line)?);
    }
    let request = Request {
        close: wants_close(version, &headers),
        method: method.to_owned(),
        target: target.to_owned(),
        headers,
        body: Vec::new(),
    };
    if version == "HTTP/1.1" && request.header("host").is_none() {
        return Err(HttpError::Malformed("HTTP/1.1 request without Host"));
    }
    if request.headers.iter().filter(|(n, _)| n == "host").count() > 1 {
        return Err(HttpError::Malformed("more than one Host"));
    }
    if request.header("transfer-encoding").is_some() {
        return Err(HttpError::Unsupported(
            "Transfer-Encoding (send Content-Length)",
        ));
    }
    let length = content_length(&request.headers)?;
    if length > max_body {
        return Err(HttpError::BodyTooLarge);
    }
    Ok((request, length))
}

fn parse_request_line(line: &str) -> Result<(&str, &str, &str), HttpError> {
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HttpError::Malformed(
            "request line is not METHOD TARGET VERSION",
        ));
    };
    if method.is_empty() || !method.bytes().all(is_token_byte) {
        return Err(HttpError::Malformed("bad method"));
    }
    if !target.starts_with('/') || target.bytes().any(|b| b.is_ascii_control()) {
        return Err(HttpError::Malformed(
            "request target is not an origin-form path",
        ));
    }
    if !version.starts_with("HTTP/") {
        return Err(HttpError::Malformed("bad HTTP version"));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(HttpError::Version);
    }
    Ok((method, target, version))
}

fn parse_header(line: &str) -> Result<(String, String), HttpError> {
    if line.starts_with([' ', '\t']) {
        return Err(HttpError::Malformed("obsolete header line folding"));
    }
    let Some((name, value)) = line.split_once(':') else {
        return Err(HttpError::Malformed("header line without ':'"));
    };
    if name.is_empty() || !name.bytes().all(is_token_byte) {
        return Err(HttpError::Malformed("bad header name"));
    }
    let value = value.trim_matches([' ', '\t']);
    if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
        return Err(HttpError::Malformed("control character in a header value"));
    }
    Ok((name.to_ascii_lowercase(), value.to_owned()))
}

/// RFC 9110 `tchar`.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn wants_close(version: &str, headers: &[(String, String)]) -> bool {
    let has = |option: &str| {
        headers
            .iter()
            .filter(|(name, _)| name == "connection")
            .flat_map(|(_, value)| value.split(','))
            .any(|v| v.trim().eq_ignore_ascii_case(option))
    };
    match version {
        "HTTP/1.0" => !has("keep-alive"),
        _ => has("close"),
    }
}

/// The body length: 0 without `Content-Length`; several fields must agree (RFC 9112 6.3).
fn content_length(headers: &[(String, String)]) -> Result<usize, HttpError> {
    let mut length = None;
    for (_, value) in headers.iter().filter(|(n, _)| n == "content-length") {
        for item in value.split(',') {
            let item = item.trim();
            if item.is_empty() || !item.bytes().all(|b| b.is_ascii_digit()) {
                return Err(HttpError::Malformed("bad Content-Length"));
            }
            // Too many digits for usize: certainly over any body limit.
            let parsed = item.parse::<usize>().map_err(|_| HttpError::BodyTooLarge)?;
            if length.is_some_and(|l| l != parsed) {
                return Err(HttpError::Malformed("conflicting Content-Length values"));
            }
            length = Some(parsed);
        }
    }
    Ok(length.unwrap_or(0))
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
