//! A strict reader of the exposition format this crate writes, for tests and tools: checks
//! that every sample belongs to a family announced by `# HELP` and `# TYPE`, that a family's
//! samples are contiguous, that counters end in `_total`, and that every histogram's buckets
//! are cumulative and end at `+Inf` equal to its `_count`.

use std::collections::{HashMap, HashSet};

/// A sample's labels.
type LabelSet = Vec<(String, String)>;

/// One sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The sample's name (with `_bucket`, `_sum` or `_count` for a histogram).
    pub name: String,
    /// Its labels, in order.
    pub labels: Vec<(String, String)>,
    /// Its value.
    pub value: f64,
}

/// A parsed, checked document.
#[derive(Debug, Clone, Default)]
pub struct Scrape {
    /// Every sample, in document order.
    pub samples: Vec<Sample>,
    /// Family name -> type.
    pub types: HashMap<String, String>,
}

impl Scrape {
    /// Parses and checks `text`; the first problem found, with its line.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut scrape = Self::default();
        let mut helped = HashSet::new();
        let mut finished = HashSet::new();
        let mut current: Option<String> = None;
        for (number, line) in text.lines().enumerate() {
            let fail = |why: &str| format!("line {}: {why}: {line}", number + 1);
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap_or_default().to_owned();
                if let Some(previous) = current.take() {
                    finished.insert(previous);
                }
                if finished.contains(&name) || !helped.insert(name) {
                    return Err(fail("family announced twice"));
                }
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').ok_or_else(|| fail("bad TYPE"))?;
                if !helped.contains(name) || scrape.types.contains_key(name) {
                    return Err(fail("TYPE without HELP just before, or twice"));
                }
                if kind == "counter" && !name.ends_with("_total") {
                    return Err(fail("counter name without _total"));
                }
                scrape.types.insert(name.to_owned(), kind.to_owned());
                current = Some(name.to_owned());
            } else if !line.is_empty() && !line.starts_with('#') {
                let sample = parse_sample(line).map_err(fail)?;
                let family = family_of(&sample.name, &scrape.types);
                if current.as_deref() != Some(family) {
                    return Err(fail("sample outside its family's HELP/TYPE block"));
                }
                scrape.samples.push(sample);
            }
        }
        scrape.check_histograms()?;
        Ok(scrape)
    }

    /// The value of the sample named `name` with exactly `labels`.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| {
                s.name == name
                    && s.labels.len() == labels.len()
                    && s.labels
                        .iter()
                        .zip(labels)
                        .all(|((k, v), (lk, lv))| k == lk && v == lv)
            })
            .map(|s| s.value)
    }

    /// The sum of every sample named `name`, whatever its labels.
    pub fn sum(&self, name: &str) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.name == name)
            .map(|s| s.value)
            .sum()
    }

    fn check_histograms(&self) -> Result<(), String> {
        let histograms = self.types.iter().filter(|(_, kind)| *kind == "histogram");
        for (name, _) in histograms {
            let bucket = format!("{name}_bucket");
            let mut series: HashMap<LabelSet, Vec<(String, f64)>> = HashMap::new();
            for sample in self.samples.iter().filter(|s| s.name == bucket) {
                let (le, rest): (Vec<_>, Vec<_>) =
                    sample.labels.iter().cloned().partition(|(k, _)| k == "le");
                let le = le
                    .first()
                    .map(|(_, v)| v.clone())
                    .ok_or("bucket without le")?;
                series.entry(rest).or_default().push((le, sample.value));
            }
            for (labels, buckets) in series {
                check_buckets(name, &buckets)?;
                let plain: Vec<(&str, &str)> = labels
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                let count = self.value(&format!("{name}_count"), &plain);
                let infinite = buckets.last().map(|(_, v)| *v);
                if count != infinite || self.value(&format!("{name}_sum"), &plain).is_none() {
                    return Err(format!(
                        "{name}{labels:?}: +Inf bucket != _count, or no _sum"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Buckets in increasing `le` with non-decreasing counts, the last one `+Inf`.
fn check_buckets(name: &str, buckets: &[(String, f64)]) -> Result<(), String> {
    let mut previous = (f64::NEG_INFINITY, 0.0);
    for (le, count) in buckets {
        let bound: f64 = le.parse().map_err(|_| format!("{name}: bad le {le}"))?;
        if bound <= previous.0 || *count < previous.1 {
            return Err(format!("{name}: buckets not increasing or not cumulative"));
        }
        previous = (bound, *count);
    }
    if buckets.last().map(|(le, _)| le.as_str()) != Some("+Inf") {
        return Err(format!("{name}: last bucket is not +Inf"));
    }
    Ok(())
}

/// The family a sample belongs to: a histogram's samples carry a suffix.
fn family_of<'a>(name: &'a str, types: &HashMap<String, String>) -> &'a str {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix)
            && types.get(base).is_some_and(|kind| kind == "histogram")
        {
            return base;
        }
    }
    name
}

fn parse_sample(line: &str) -> Result<Sample, &'static str> {
    let (series, value) = line.rsplit_once(' ').ok_or("sample without a value")?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        other => other.parse().map_err(|_| "value is not a number")?,
    };
    let (name, labels) = match series.split_once('{') {
        None => (series, Vec::new()),
        Some((name, rest)) => {
            let body = rest.strip_suffix('}').ok_or("labels not closed")?;
            (name, parse_labels(body)?)
        }
    };
    let valid_name = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
    if !valid_name {
        return Err("bad metric name");
    }
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// `k="v",k2="v2"` (values escaped with `\\`, `\"`, `\n`).
fn parse_labels(body: &str) -> Result<Vec<(String, String)>, &'static str> {
    let mut labels = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"").ok_or("label without =\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next().ok_or("label value not closed")? {
                (i, '"') => break i,
                (_, '\\') => match chars.next().ok_or("bad escape")?.1 {
                    'n' => value.push('\n'),
                    c @ ('\\' | '"') => value.push(c),
                    _ => return Err("bad escape"),
                },
                (_, c) => value.push(c),
            }
        };
        labels.push((key.to_owned(), value));
        rest = after[end + 1..]
            .strip_prefix(',')
            .unwrap_or(&after[end + 1..]);
    }
    Ok(labels)
}
