//! The progress line on stderr: a spinner naming the servers that are connecting (or what the command is waiting
//! for), drawn only when stderr is a terminal, shown only once the wait is longer than a moment, and erased before
//! the command prints its result.

use std::io::{IsTerminal, Write as _};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pimcp_actors::{RuntimeHandle, ServerState};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Nothing is drawn for waits shorter than this.
pub(crate) const SHOW_AFTER: Duration = Duration::from_millis(250);
/// Redraw interval.
const TICK: Duration = Duration::from_millis(80);
/// Longest line drawn (a wider line would wrap and break the `\r` redraw).
const MAX_LINE_CHARS: usize = 72;
const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// A running progress line; [`Progress::stop`] erases it for good (call it before printing a result).
pub(crate) struct Progress {
    label: Arc<Mutex<String>>,
    running: Mutex<Option<(oneshot::Sender<()>, JoinHandle<()>)>>,
}

impl Progress {
    /// Starts the line when `enabled` and stderr is a terminal; otherwise a no-op.
    pub(crate) fn start(handle: RuntimeHandle, enabled: bool) -> Progress {
        let label = Arc::new(Mutex::new(String::new()));
        if !enabled || !std::io::stderr().is_terminal() {
            return Progress {
                label,
                running: Mutex::new(None),
            };
        }
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(draw(handle, label.clone(), stopped));
        Progress {
            label,
            running: Mutex::new(Some((stop, task))),
        }
    }

    /// What the command waits for when no server is connecting (`calling fixture_echo`); empty hides the line.
    pub(crate) fn set_label(&self, text: impl Into<String>) {
        if let Ok(mut label) = self.label.lock() {
            *label = text.into();
        }
    }

    /// Stops drawing and erases the line; later calls do nothing.
    pub(crate) async fn stop(&self) {
        let running = self.running.lock().ok().and_then(|mut r| r.take());
        if let Some((stop, task)) = running {
            let _ = stop.send(());
            let _ = task.await;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some((stop, _)) = self.running.get_mut().ok().and_then(Option::take) {
            let _ = stop.send(());
        }
    }
}

async fn draw(handle: RuntimeHandle, label: Arc<Mutex<String>>, mut stopped: oneshot::Receiver<()>) {
    let started = Instant::now();
    let mut ticker = tokio::time::interval(TICK);
    let mut frame = 0usize;
    let mut drawn = false;
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            _ = ticker.tick() => {}
        }
        if started.elapsed() < SHOW_AFTER {
            continue;
        }
        let connecting: Vec<String> = handle
            .status()
            .servers
            .into_iter()
            .filter(|s| s.state == ServerState::Connecting)
            .map(|s| s.name)
            .collect();
        let label = label.lock().map(|l| l.clone()).unwrap_or_default();
        let message = line_text(&connecting, &label, started.elapsed());
        let mut err = std::io::stderr().lock();
        match message {
            Some(text) => {
                let _ = write!(err, "\r\x1b[2K{} {text}", FRAMES[frame % FRAMES.len()]);
                frame += 1;
                drawn = true;
            }
            None if drawn => {
                let _ = write!(err, "\r\x1b[2K");
                drawn = false;
            }
            None => {}
        }
        let _ = err.flush();
    }
    if drawn {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
    }
}

/// The text after the spinner glyph, or `None` when there is nothing to wait for.
pub(crate) fn line_text(connecting: &[String], label: &str, elapsed: Duration) -> Option<String> {
    let what = if !connecting.is_empty() {
        format!("connecting {}", connecting.join(", "))
    } else if !label.is_empty() {
        label.to_owned()
    } else {
        return None;
    };
    let text = format!("{what}… {:.1}s", elapsed.as_secs_f64());
    Some(crate::output::one_line(&text, MAX_LINE_CHARS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_connecting_servers_first() {
        let servers = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(
            line_text(&servers, "calling x", Duration::from_millis(1250)).as_deref(),
            Some("connecting a, b… 1.2s")
        );
        assert_eq!(
            line_text(&[], "calling x", Duration::from_millis(300)).as_deref(),
            Some("calling x… 0.3s")
        );
        assert_eq!(line_text(&[], "", Duration::from_secs(1)), None);
        let many: Vec<String> = (0..40).map(|i| format!("server{i}")).collect();
        let long = line_text(&many, "", Duration::from_secs(1)).unwrap_or_default();
        assert_eq!(long.chars().count(), MAX_LINE_CHARS);
    }
}
