//! Opening the authorization URL in the user's browser: `$BROWSER` when set, else `xdg-open` (Linux and other
//! Unixes), `open` (macOS) or `cmd /C start` (Windows). Failing to open is not fatal: callers print the URL.

use std::process::{Command, Stdio};
use std::time::Duration;

/// How long to wait for the opener to report failure before assuming it handed the URL to a browser.
const OPENER_GRACE: Duration = Duration::from_secs(3);

/// Something that shows a URL to the user (a real browser, or a test double that follows the redirects).
pub trait BrowserOpener: Send + Sync {
    /// Open `url`; `Err` carries a short reason (no secret: the URL is not included).
    fn open(&self, url: &str) -> Result<(), String>;
}

/// The system browser.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemBrowser;

impl BrowserOpener for SystemBrowser {
    fn open(&self, url: &str) -> Result<(), String> {
        open_browser(url)
    }
}

/// Open `url` with the platform opener (blocking for at most a few seconds while the opener starts).
pub fn open_browser(url: &str) -> Result<(), String> {
    let mut command = opener_command();
    command
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let program = format!("{:?}", command.get_program());
    let mut child = command.spawn().map_err(|e| format!("cannot run {program}: {e}"))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    match rx.recv_timeout(OPENER_GRACE) {
        Ok(Ok(status)) if status.success() => Ok(()),
        Ok(Ok(status)) => Err(format!("{program} exited with {status}")),
        Ok(Err(e)) => Err(format!("{program} failed: {e}")),
        // Still running (some openers stay in the foreground): the browser is most likely up.
        Err(_) => Ok(()),
    }
}

fn opener_command() -> Command {
    if let Some(browser) = std::env::var_os("BROWSER").filter(|b| !b.is_empty()) {
        return Command::new(browser);
    }
    if cfg!(target_os = "macos") {
        Command::new("open")
    } else if cfg!(windows) {
        let mut command = Command::new("cmd");
        command.args(["/C", "start", ""]);
        command
    } else {
        Command::new("xdg-open")
    }
}
