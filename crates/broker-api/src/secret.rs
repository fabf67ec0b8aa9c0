//! [`Secret`]: a password or token from the configuration, never printed by `Debug`.

use std::fmt;

/// A password kept out of `Debug` output (`--check-config` prints the config).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"***\"")
    }
}
