//! The Prometheus text exposition format, version 0.0.4: one `# HELP` and one `# TYPE` line per
//! metric family, then its samples; histograms as cumulative `_bucket{le=...}` samples ending at
//! `+Inf`, with `_sum` and `_count`.

use std::fmt::Write;

use std::time::Duration;

/// A metric family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (names end in `_total`).
    Counter,
    /// Goes up and down.
    Gauge,
    /// Bucketed observations.
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Counter => "counter",
            Self::Gauge => "gauge",
            Self::Histogram => "histogram",
        }
    }
}

/// Label pairs of one sample.
pub type Labels<'a> = &'a [(&'a str, &'a str)];

/// A document being written.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// Starts a family: its `# HELP` and `# TYPE` lines.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {}", kind.name());
    }

    /// One sample of the current family.
    pub fn sample(&mut self, name: &str, labels: Labels<'_>, value: impl std::fmt::Display) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (label, text)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{label}=\"{}\"", escape_label(text));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    /// A family of one unlabelled sample.
    pub fn single(&mut self, name: &str, kind: Kind, help: &str, value: impl std::fmt::Display) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }

    /// The samples of one histogram of the current family (`name` without suffix): its
    /// buckets made cumulative, in seconds.
    pub fn histogram(&mut self, name: &str, labels: Labels<'_>, buckets: Buckets<'_>) {
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0;
        for (bound, count) in buckets.bounds.iter().zip(buckets.counts) {
            cumulative += count;
            let le = bound.as_secs_f64().to_string();
            self.sample(&bucket, &with(labels, ("le", &le)), cumulative);
        }
        let above: u64 = buckets.counts.iter().skip(buckets.bounds.len()).sum();
        cumulative += above;
        self.sample(&bucket, &with(labels, ("le", "+Inf")), cumulative);
        self.sample(&format!("{name}_sum"), labels, buckets.sum.as_secs_f64());
        self.sample(&format!("{name}_count"), labels, cumulative);
    }

    /// The document.
    pub fn finish(self) -> String {
        self.out
    }
}

/// One histogram's observations: per bucket (not cumulative) under each upper bound, then
/// above every bound (`counts` has one more entry than `bounds`), and their sum.
#[derive(Debug, Clone, Copy)]
pub struct Buckets<'a> {
    pub bounds: &'a [Duration],
    pub counts: &'a [u64],
    pub sum: Duration,
}

/// `labels` followed by `extra`.
fn with<'a>(labels: Labels<'a>, extra: (&'a str, &'a str)) -> Vec<(&'a str, &'a str)> {
    let mut all = labels.to_vec();
    all.push(extra);
    all
}

fn escape_label(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
#[path = "exposition_tests.rs"]
mod tests;
