//! `[log]` beyond the level: the output format and the bound on lifecycle lines.

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One human-readable line per event (coloured only when stderr is a terminal).
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

impl LogFormat {
    /// The name the config file uses.
    pub fn name(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Json => "json",
        }
    }
}

/// `[log]` beyond the level (which stays in the binary's `Config::log_level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogSettings {
    /// `log.format`; takes effect at start.
    pub format: LogFormat,
    /// `log.max_lifecycle_per_sec`: most `client connected` and most `client disconnected`
    /// lines per second (each kind counted on its own); 0 turns them off. Reloadable.
    pub max_lifecycle_per_sec: u32,
}
