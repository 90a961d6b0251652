//! `pimcp-run status --watch [--connect] [--json]`: follows the state of every server in an in-process runtime as it
//! changes (eager and keep-alive servers connect by themselves, `--connect` connects the others, health checks,
//! backoff and reconnects show up live). On a terminal the status table is redrawn on every runtime event (and each
//! second, for uptimes and countdowns); otherwise one line is printed per change, or with `--json` one JSON object
//! per line (the `pimcp/status/v1` snapshot first, then the runtime's events). Ends on Ctrl-C (exit 130, like every
//! runtime command, with every server stopped) or when stdout is closed.

use std::io::{IsTerminal as _, Write as _};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pimcp_actors::{RuntimeEvent, RuntimeHandle, ServerState, StatusSnapshot};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use super::Ctx;
use super::session::{SessionOptions, block_on, with_session};
use super::status::{StatusArgs, render};
use crate::EXIT_OK;
use crate::output::{Colour, Style, one_line};

/// How often the terminal view is redrawn without events (uptimes and backoff countdowns move).
const REDRAW_EVERY: Duration = Duration::from_secs(1);

/// How changes are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum View {
    /// Redraw the table in place (stdout is a terminal).
    Screen,
    /// One line per change (a pipe or a file).
    Lines,
    /// One JSON object per line.
    Json,
}

pub(crate) fn run(ctx: &Ctx, args: StatusArgs) -> anyhow::Result<u8> {
    let view = if args.json {
        View::Json
    } else if std::io::stdout().is_terminal() {
        View::Screen
    } else {
        View::Lines
    };
    block_on(with_session(ctx, SessionOptions { progress: false }, async |session| {
        let handle = session.handle();
        // Subscribed before anything is connected: no change is missed between the first view and the events.
        let events = handle.events();
        let connect = async {
            if args.connect {
                session.connect_all().await;
            }
            std::future::pending::<()>().await
        };
        tokio::select! {
            shown = watch(&handle, events, view) => shown,
            () = connect => Ok(EXIT_OK),
        }
    }))
}

/// Shows the current state, then every change, until stdout goes away (a closed pipe ends the watch quietly).
async fn watch(
    handle: &RuntimeHandle,
    mut events: broadcast::Receiver<RuntimeEvent>,
    view: View,
) -> anyhow::Result<u8> {
    let style = Style::stdout();
    let mut out = std::io::stdout();
    let first = match view {
        View::Screen => screen(&handle.status(), style, SystemTime::now()),
        View::Lines => server_lines(&handle.status(), SystemTime::now()),
        View::Json => format!("{}\n", serde_json::to_string(&handle.status())?),
    };
    if emit(&mut out, &first).is_err() {
        return Ok(EXIT_OK);
    }
    loop {
        let text = match view {
            View::Screen => {
                tokio::select! {
                    received = events.recv() => if matches!(received, Err(RecvError::Closed)) { return Ok(EXIT_OK) },
                    () = tokio::time::sleep(REDRAW_EVERY) => {}
                }
                // A burst (a server connecting publishes state and catalog at once) is one redraw.
                while events.try_recv().is_ok() {}
                screen(&handle.status(), style, SystemTime::now())
            }
            View::Lines | View::Json => match events.recv().await {
                Ok(event) => describe(&event, &handle.status(), view, SystemTime::now())?,
                Err(RecvError::Lagged(missed)) => resync(&handle.status(), missed, view, SystemTime::now())?,
                Err(RecvError::Closed) => return Ok(EXIT_OK),
            },
        };
        if emit(&mut out, &text).is_err() {
            return Ok(EXIT_OK);
        }
    }
}

pub(super) fn emit(out: &mut std::io::Stdout, text: &str) -> std::io::Result<()> {
    let mut lock = out.lock();
    lock.write_all(text.as_bytes())?;
    lock.flush()
}

/// One terminal frame: clear, a header, the status table.
fn screen(snapshot: &StatusSnapshot, style: Style, now: SystemTime) -> String {
    let header = format!("pimcp-run status --watch · {} UTC · Ctrl-C to stop", clock(now));
    format!(
        "\x1b[H\x1b[2J{}\n\n{}",
        style.paint(&header, Some(Colour::Dim)),
        render(snapshot, style, now)
    )
}

/// One line per server: the starting point of the line view, and the resync after missed events.
fn server_lines(snapshot: &StatusSnapshot, now: SystemTime) -> String {
    if snapshot.servers.is_empty() {
        return format!("{} no servers configured\n", timestamp(now));
    }
    snapshot
        .servers
        .iter()
        .map(|s| state_line(now, &s.name, &s.state, s.reason.as_deref(), Some(s.tool_count)))
        .collect()
}

/// The text for one runtime event.
fn describe(event: &RuntimeEvent, snapshot: &StatusSnapshot, view: View, now: SystemTime) -> anyhow::Result<String> {
    if view == View::Json {
        let mut value = serde_json::to_value(event)?;
        value["atMs"] = serde_json::json!(epoch_ms(now));
        return Ok(format!("{value}\n"));
    }
    Ok(match event {
        RuntimeEvent::State { server, state, reason } => {
            let tools = snapshot.server(server).map(|s| s.tool_count);
            state_line(now, server, state, reason.as_deref(), tools)
        }
        RuntimeEvent::CatalogChanged { servers, .. } => {
            let counts: Vec<String> = servers
                .iter()
                .filter_map(|name| snapshot.server(name))
                .map(|s| {
                    format!(
                        "{} {} tool{}",
                        s.name,
                        s.tool_count,
                        if s.tool_count == 1 { "" } else { "s" }
                    )
                })
                .collect();
            if counts.is_empty() {
                return Ok(String::new());
            }
            format!("{} catalog: {}\n", timestamp(now), counts.join(", "))
        }
        // `RuntimeEvent` is `#[non_exhaustive]`; events added later are in the JSON view only.
        _ => String::new(),
    })
}

/// After missed events: say so, then show where every server is now.
fn resync(snapshot: &StatusSnapshot, missed: u64, view: View, now: SystemTime) -> anyhow::Result<String> {
    if view == View::Json {
        let lagged = serde_json::json!({ "event": "lagged", "missed": missed, "atMs": epoch_ms(now) });
        return Ok(format!("{lagged}\n{}\n", serde_json::to_string(snapshot)?));
    }
    Ok(format!(
        "{} ({missed} changes missed; current state follows)\n{}",
        timestamp(now),
        server_lines(snapshot, now)
    ))
}

/// `<time> <server> <state>[ (details)][ — reason]`.
pub(super) fn state_line(
    now: SystemTime,
    server: &str,
    state: &ServerState,
    reason: Option<&str>,
    tools: Option<usize>,
) -> String {
    let mut line = format!("{} {server} {}", timestamp(now), state.name());
    match state {
        ServerState::Backoff { until, attempt } => {
            let wait = until.duration_since(now).unwrap_or_default();
            line.push_str(&format!(
                " (attempt {attempt}, next try in {})",
                pimcp_proxy::human_duration(wait)
            ));
        }
        ServerState::Ready => {
            if let Some(n) = tools {
                line.push_str(&format!(" ({n} tool{})", if n == 1 { "" } else { "s" }));
            }
        }
        _ => {}
    }
    if let Some(reason) = reason.filter(|r| !r.is_empty()) {
        line.push_str(" — ");
        line.push_str(&one_line(reason, 200));
    }
    line.push('\n');
    line
}

pub(super) fn epoch_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// `HH:MM:SS` (UTC).
pub(super) fn clock(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() % 86_400;
    format!("{:02}:{:02}:{:02}", secs / 3600, (secs % 3600) / 60, secs % 60)
}

/// `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub(super) fn timestamp(t: SystemTime) -> String {
    let days = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() / 86_400;
    let (y, m, d) = civil_from_days(i64::try_from(days).unwrap_or(0));
    format!("{y:04}-{m:02}-{d:02}T{}Z", clock(t))
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn timestamps_are_utc() {
        assert_eq!(timestamp(at(0)), "1970-01-01T00:00:00Z");
        assert_eq!(timestamp(at(951_827_696)), "2000-02-29T12:34:56Z");
        assert_eq!(clock(at(86_399)), "23:59:59");
    }

    #[test]
    fn state_lines_say_what_changed() {
        let now = at(1_000);
        let backoff = ServerState::Backoff {
            until: at(1_004),
            attempt: 2,
        };
        assert_eq!(
            state_line(now, "fx", &backoff, Some("exited with code 2\nat start"), None),
            "1970-01-01T00:16:40Z fx backoff (attempt 2, next try in 4s) — exited with code 2 at start\n"
        );
        assert_eq!(
            state_line(now, "fx", &ServerState::Ready, None, Some(1)),
            "1970-01-01T00:16:40Z fx ready (1 tool)\n"
        );
    }

    #[test]
    fn json_events_carry_their_time() {
        let snapshot = StatusSnapshot::new(0, vec![]);
        let event = RuntimeEvent::State {
            server: "fx".into(),
            state: ServerState::Ready,
            reason: None,
        };
        let text = describe(&event, &snapshot, View::Json, at(2)).unwrap();
        let value: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(value["event"], "state");
        assert_eq!(value["state"]["state"], "ready");
        assert_eq!(value["atMs"], 2000);
        let lagged = resync(&snapshot, 3, View::Json, at(2)).unwrap();
        let first: serde_json::Value = serde_json::from_str(lagged.lines().next().unwrap()).unwrap();
        assert_eq!(
            (first["event"].as_str(), first["missed"].as_u64()),
            (Some("lagged"), Some(3))
        );
        assert!(lagged.contains("pimcp/status/v1"));
    }

    #[test]
    fn a_screen_frame_clears_and_draws_the_table() {
        let snapshot = StatusSnapshot::new(0, vec![]);
        let frame = screen(&snapshot, Style { colour: false }, at(3_600));
        assert!(
            frame.starts_with("\x1b[H\x1b[2Jpimcp-run status --watch · 01:00:00 UTC"),
            "{frame:?}"
        );
        assert!(frame.contains("No servers configured"));
    }
}
