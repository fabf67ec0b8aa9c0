//! The dashboard (`GET /`): static files embedded in the binary (`crates/ops/dashboard/`: plain
//! HTML, CSS and small JavaScript modules, no framework, nothing fetched from elsewhere) that
//! read the admin API and `/metrics` from the page. Every answer of the listener carries
//! `response.rs`'s security headers: no inline script, no framing, no content sniffing.
//!
//! The files hold no data: with basic credentials configured they are served behind them (the
//! browser asks once and replays them to the API); with only a bearer token they are served
//! to anyone, and the page asks for the token and sends it with each API call.

use super::response::Response;

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";

/// One embedded file.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static str,
}

macro_rules! asset {
    ($path:literal, $file:literal, $type:expr) => {
        Asset {
            path: $path,
            content_type: $type,
            body: include_str!(concat!("../dashboard/", $file)),
        }
    };
}

const ASSETS: &[Asset] = &[
    asset!("/", "index.html", HTML),
    asset!("/dashboard/style.css", "style.css", CSS),
    asset!("/dashboard/js/main.js", "js/main.js", JS),
    asset!("/dashboard/js/api.js", "js/api.js", JS),
    asset!("/dashboard/js/dom.js", "js/dom.js", JS),
    asset!("/dashboard/js/chart.js", "js/chart.js", JS),
    asset!("/dashboard/js/overview.js", "js/overview.js", JS),
    asset!("/dashboard/js/clients.js", "js/clients.js", JS),
    asset!("/dashboard/js/topics.js", "js/topics.js", JS),
    asset!("/dashboard/js/retained.js", "js/retained.js", JS),
    asset!("/dashboard/js/slow.js", "js/slow.js", JS),
    asset!("/dashboard/js/traces.js", "js/traces.js", JS),
    asset!("/dashboard/js/system.js", "js/system.js", JS),
];

/// The file served at `path`, as a response; `None` when no file has that path.
pub fn file(path: &str) -> Option<Response> {
    let asset = ASSETS.iter().find(|asset| asset.path == path)?;
    Some(Response {
        status: 200,
        content_type: asset.content_type,
        headers: Vec::new(),
        body: asset.body.as_bytes().to_vec(),
    })
}

/// The total size of the embedded files, in bytes (the page's weight, uncompressed).
pub fn weight() -> usize {
    ASSETS.iter().map(|asset| asset.body.len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_is_served_with_its_type() {
        let page = file("/").expect("the page");
        assert_eq!(page.content_type, HTML);
        for asset in ASSETS {
            assert!(file(asset.path).is_some(), "{}", asset.path);
            assert!(!asset.body.is_empty(), "{}", asset.path);
        }
        assert!(file("/dashboard/../Cargo.toml").is_none());
        assert!(file("/dashboard/js/").is_none());
    }

    #[test]
    fn the_page_has_no_inline_script_and_loads_nothing_from_elsewhere() {
        for asset in ASSETS {
            let body = asset.body.replace("http://www.w3.org/2000/svg", "");
            assert!(!body.contains("http://"), "{}", asset.path);
            assert!(!body.contains("https://"), "{}", asset.path);
        }
        let html = file("/").expect("the page").body;
        let html = String::from_utf8(html).expect("UTF-8");
        assert!(!html.contains("<script>"), "inline script");
        assert!(!html.contains("style="), "inline style");
        assert!(!html.contains("onclick"), "inline handler");
    }
}
