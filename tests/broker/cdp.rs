//! A headless Chromium driven over the DevTools protocol (JSON-RPC on a WebSocket, through
//! `tungstenite`): start it, open a page, evaluate script in it, capture screenshots. Every
//! wait is bounded (a hang guard): a read waits at most [`READ_GUARD`], a poll [`POLL_GUARD`].
//! Chromium is Debian's `chromium` (installed by scripts/test.d/00-tools.sh), or the program
//! named by `RINGMQ_CHROMIUM`; a test that needs it fails when it is missing.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};
use tungstenite::{Message, WebSocket};

/// The longest one DevTools answer may take.
const READ_GUARD: Duration = Duration::from_secs(20);
/// The longest a condition in the page may take to hold.
pub const POLL_GUARD: Duration = Duration::from_secs(15);

/// A running browser with one page attached.
pub struct Browser {
    child: Child,
    socket: WebSocket<TcpStream>,
    session: String,
    next_id: u64,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts headless Chromium with a fresh profile and opens a blank page of `width` x
    /// `height` CSS pixels.
    pub fn start(width: u32, height: u32) -> Self {
        let program = std::env::var("RINGMQ_CHROMIUM").unwrap_or_else(|_| "chromium".into());
        let profile = tempfile::tempdir().unwrap();
        let child = Command::new(&program)
            .args([
                "--headless=new",
                "--remote-debugging-port=0",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--hide-scrollbars",
                &format!("--window-size={width},{height}"),
                &format!("--user-data-dir={}", profile.path().display()),
                "about:blank",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start `{program}` ({e}): the dashboard test needs Debian's chromium \
                     (apt-get install chromium; scripts/test.d/00-tools.sh installs it) or \
                     RINGMQ_CHROMIUM naming a Chromium binary"
                )
            });
        let (port, path) = devtools_port(profile.path());
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_read_timeout(Some(READ_GUARD)).unwrap();
        let url = format!("ws://127.0.0.1:{port}{path}");
        let (socket, _) = tungstenite::client(url.as_str(), stream).unwrap();
        let mut browser = Self {
            child,
            socket,
            session: String::new(),
            next_id: 0,
            _profile: profile,
        };
        let target = browser.call("Target.createTarget", json!({"url": "about:blank"}));
        let target_id = target["targetId"].clone();
        let attached = browser.call(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
        );
        browser.session = attached["sessionId"].as_str().unwrap().to_owned();
        browser.call("Page.enable", json!({}));
        browser.call("Runtime.enable", json!({}));
        browser
    }

    /// Sends `method` (to the page once attached) and waits for its answer.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        self.socket
            .send(Message::text(message.to_string()))
            .unwrap();
        let deadline = Instant::now() + READ_GUARD;
        loop {
            assert!(Instant::now() < deadline, "no answer to {method}");
            let frame = self.socket.read().unwrap();
            let Message::Text(text) = frame else { continue };
            let answer: Value = serde_json::from_str(text.as_str()).unwrap();
            if answer["id"] != json!(id) {
                continue; // an event
            }
            if let Some(error) = answer.get("error") {
                panic!("{method}: {error}");
            }
            return answer["result"].clone();
        }
    }

    /// Loads `url` and waits for its document.
    pub fn navigate(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url}));
        self.wait_for("document.readyState === 'complete'", "the page loaded");
    }

    /// The value of `expression` (awaited when a promise); panics on a script error.
    pub fn eval(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "awaitPromise": true, "returnByValue": true}),
        );
        if let Some(exception) = result.get("exceptionDetails") {
            panic!("{expression}: {exception}");
        }
        result["result"]["value"].clone()
    }

    /// Polls `expression` until it is truthy (its value), within [`POLL_GUARD`].
    pub fn wait_for(&mut self, expression: &str, what: &str) -> Value {
        let deadline = Instant::now() + POLL_GUARD;
        loop {
            let value = self.eval(&format!(
                "(() => {{ try {{ return {expression}; }} catch (e) {{ return null; }} }})()"
            ));
            let truthy = !matches!(&value, Value::Null | Value::Bool(false))
                && value != json!("")
                && value != json!(0);
            if truthy {
                return value;
            }
            assert!(
                Instant::now() < deadline,
                "hang guard: {what} ({expression})"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Lets downloads go to `dir`.
    pub fn download_to(&mut self, dir: &Path) {
        self.call(
            "Browser.setDownloadBehavior",
            json!({"behavior": "allow", "downloadPath": dir.display().to_string()}),
        );
    }

    /// Writes a PNG of the whole page (not just the window) to `path`.
    pub fn screenshot(&mut self, path: &Path) {
        let height = self
            .eval("document.documentElement.scrollHeight")
            .as_f64()
            .unwrap();
        let width = self
            .eval("document.documentElement.clientWidth")
            .as_f64()
            .unwrap();
        let shot = self.call(
            "Page.captureScreenshot",
            json!({
                "format": "png",
                "captureBeyondViewport": true,
                "clip": {"x": 0, "y": 0, "width": width, "height": height.min(4000.0), "scale": 1},
            }),
        );
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The DevTools port and browser path Chromium writes to `DevToolsActivePort` in its profile.
fn devtools_port(profile: &Path) -> (u16, String) {
    let file = profile.join("DevToolsActivePort");
    crate::harness::wait_until_within(READ_GUARD, "chromium's DevToolsActivePort", || {
        let text = std::fs::read_to_string(&file).ok()?;
        let mut lines = text.lines();
        let port = lines.next()?.trim().parse().ok()?;
        let path = lines.next()?.trim().to_owned();
        Some((port, path))
    })
}

/// Where the dashboard test writes its screenshots: `dashboard-screenshots` under the cargo
/// target directory.
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        PathBuf::from,
    );
    let dir = target.join("dashboard-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
