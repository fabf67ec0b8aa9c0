//! A request target split into its percent-decoded path and query pairs.

/// The path and the query pairs of a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The path, percent-decoded.
    pub path: String,
    /// `key=value` pairs of the query, percent-decoded (`+` is a space), in order; a pair
    /// without `=` has an empty value.
    pub query: Vec<(String, String)>,
}

/// Why a target could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// A `%` not followed by two hexadecimal digits.
    #[error("bad percent-encoding")]
    BadEscape,
    /// The decoded bytes are not UTF-8.
    #[error("percent-decoded text is not UTF-8")]
    NotUtf8,
}

impl Target {
    /// Splits and decodes `target` (`/path?query`, a `#fragment` ignored).
    pub fn parse(target: &str) -> Result<Self, TargetError> {
        let target = target.split_once('#').map_or(target, |(t, _)| t);
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let query = query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                Ok((decode(key, true)?, decode(value, true)?))
            })
            .collect::<Result<_, TargetError>>()?;
        Ok(Self {
            path: decode(path, false)?,
            query,
        })
    }
}

/// Percent-decodes `text`; in a query (`plus_is_space`) `+` stands for a space.
pub fn decode(text: &str, plus_is_space: bool) -> Result<String, TargetError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).ok_or(TargetError::BadEscape)?;
                let high = hex_value(hex[0]).ok_or(TargetError::BadEscape)?;
                let low = hex_value(hex[1]).ok_or(TargetError::BadEscape)?;
                out.push((high << 4) | low);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            other => {
                out.push(other);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| TargetError::NotUtf8)
}

fn hex_value(digit: u8) -> Option<u8> {
    char::from(digit).to_digit(16).map(|v| v as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_and_decodes_path_and_query() {
        let target =
            Target::parse("/api/v1/clients/a%2Fb?topic=a%2F%2B&x=1+2&flag#frag").expect("decodes");
        assert_eq!(target.path, "/api/v1/clients/a/b");
        let pairs = [("topic", "a/+"), ("x", "1 2"), ("flag", "")];
        let expected: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        assert_eq!(target.query, expected);
    }

    #[test]
    fn plus_is_literal_in_the_path() {
        assert_eq!(Target::parse("/a+b").expect("decodes").path, "/a+b");
    }

    #[test]
    fn bad_escapes_and_bytes_are_refused() {
        assert_eq!(Target::parse("/a%2"), Err(TargetError::BadEscape));
        assert_eq!(Target::parse("/a%zz"), Err(TargetError::BadEscape));
        assert_eq!(Target::parse("/?k=%ff"), Err(TargetError::NotUtf8));
    }
}
