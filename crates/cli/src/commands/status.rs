//! `pimcp-run status [--connect] [--json]`: every configured server's state from a fresh in-process runtime (what
//! the metadata cache knows, or, with `--connect`, the outcome of connecting every available server now). The JSON
//! form is the runtime's versioned status snapshot (`pimcp/status/v1`). With `--attach URL` the status comes from a
//! running `pimcp-run serve --http` instance instead ([`super::remote`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use pimcp_actors::{ServerState, ServerStatus, StatusSnapshot};

use super::Ctx;
use super::session::{SessionOptions, block_on, with_session};
use crate::output::{Colour, Style, Table, cell, one_line, print_json};
use crate::{EXIT_FAILED, EXIT_OK};

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// Connect every available server first (live state and metadata); exit 1 if any could not connect.
    #[arg(long)]
    pub connect: bool,
    /// Machine-readable output (the `pimcp/status/v1` snapshot).
    #[arg(long)]
    pub json: bool,
    /// Keep running and show every change (redrawn on a terminal, one line per change otherwise, JSON lines with
    /// --json) until Ctrl-C.
    #[arg(long)]
    pub watch: bool,
    /// Read the status of a running `pimcp-run serve --http` instance at URL (its MCP URL or base URL) instead of
    /// starting servers here; with --watch, follow it (polled every second). Token from PIMCP_AUTH_TOKEN or
    /// --attach-token-file.
    #[arg(long, value_name = "URL", conflicts_with = "connect")]
    pub attach: Option<String>,
    /// With --attach: read the instance's bearer token from this file.
    #[arg(long, value_name = "PATH", requires = "attach")]
    pub attach_token_file: Option<std::path::PathBuf>,
}

/// The field of the notes `hostConfigDiscovery: "prompt"` leaves in the config's problems.
const HOST_DISCOVERY_FIELD: &str = "settings.hostConfigDiscovery";

pub(crate) fn run(ctx: &Ctx, args: StatusArgs) -> anyhow::Result<u8> {
    if let Some(url) = &args.attach {
        return super::remote::run(url, args.attach_token_file.as_deref(), args.json, args.watch);
    }
    if args.watch {
        return super::watch::run(ctx, args);
    }
    block_on(with_session(ctx, SessionOptions { progress: true }, async |session| {
        let failed = if args.connect {
            session
                .connect_all()
                .await
                .iter()
                .filter(|(_, outcome)| outcome.is_err())
                .count()
        } else {
            0
        };
        let snapshot = session.handle().status();
        session.progress.stop().await;
        if args.json {
            print_json(&snapshot)?;
        } else {
            out!("{}", render(&snapshot, Style::stdout(), SystemTime::now()));
            // `hostConfigDiscovery: "prompt"`: the hosts whose configs were found but not loaded.
            for problem in session.handle().config_problems().iter() {
                if problem.field.as_deref() == Some(HOST_DISCOVERY_FIELD) {
                    outln!("note: {}", problem.message);
                }
            }
        }
        Ok(if failed > 0 { EXIT_FAILED } else { EXIT_OK })
    }))
}

/// Glyph and colour of a state (the glyphs match the `mcp` tool's status text).
pub(crate) fn state_mark(state: &ServerState) -> (&'static str, Option<Colour>) {
    match state {
        ServerState::Ready => ("✓", Some(Colour::Green)),
        ServerState::Connecting => ("◌", Some(Colour::Yellow)),
        ServerState::Cached => ("○", None),
        ServerState::Draining => ("◐", Some(Colour::Yellow)),
        ServerState::Backoff { .. } => ("↻", Some(Colour::Yellow)),
        ServerState::NeedsAuth => ("⚠", Some(Colour::Yellow)),
        ServerState::Failed { .. } | ServerState::ConfigError => ("✗", Some(Colour::Red)),
        ServerState::Untrusted => ("⊗", Some(Colour::Yellow)),
        ServerState::Disabled => ("⊘", Some(Colour::Dim)),
        // `ServerState` is `#[non_exhaustive]`; a state added later shows as in progress.
        _ => ("◌", None),
    }
}

/// The human table plus a one-line summary.
pub(crate) fn render(snapshot: &StatusSnapshot, style: Style, now: SystemTime) -> String {
    if snapshot.servers.is_empty() {
        return "No servers configured. Add one with `pimcp-run add NAME -- COMMAND ARGS…` or `pimcp-run add NAME \
                --url URL`.\n"
            .into();
    }
    // Descriptions, when any server has one, in a last column cut to a line's worth.
    let described = snapshot.servers.iter().any(|s| s.description.is_some());
    let mut headers = vec!["SERVER", "STATE", "TOOLS", "LIFECYCLE", "PROTOCOL", "DETAIL"];
    if described {
        headers.push("DESCRIPTION");
    }
    let mut table = Table::new(&headers);
    for s in &snapshot.servers {
        let (glyph, colour) = state_mark(&s.state);
        let tools = if s.metadata.is_some() || s.tool_count > 0 {
            s.tool_count.to_string()
        } else {
            "-".into()
        };
        let mut row = vec![
            s.name.as_str().into(),
            cell(format!("{glyph} {}", s.state.name()), colour),
            tools.into(),
            s.lifecycle.as_str().into(),
            s.protocol_version.as_deref().unwrap_or("-").into(),
            cell(detail(s, now), None),
        ];
        if described {
            row.push(short(s.description.as_deref().unwrap_or("-"), MAX_DESCRIPTION_CHARS).into());
        }
        table.row(row);
    }
    let mut out = table.render(style);
    let n_ready = snapshot
        .servers
        .iter()
        .filter(|s| s.state == ServerState::Ready)
        .count();
    let n_tools: usize = snapshot.servers.iter().map(|s| s.tool_count).sum();
    out.push_str(&format!(
        "\n{} server{}, {n_ready} connected, {n_tools} tool{} known\n",
        snapshot.servers.len(),
        if snapshot.servers.len() == 1 { "" } else { "s" },
        if n_tools == 1 { "" } else { "s" },
    ));
    out
}

/// Characters of a description the status table shows.
const MAX_DESCRIPTION_CHARS: usize = 60;

/// `text` on one line, cut to `max` characters with `…`.
fn short(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max - 1).collect();
    cut.push('…');
    cut
}

/// The DETAIL column: the reason, plus what to do about it.
pub(crate) fn detail(s: &ServerStatus, now: SystemTime) -> String {
    let mut parts: Vec<String> = Vec::new();
    match &s.state {
        ServerState::Ready => {
            if let Some(pid) = s.pid {
                parts.push(format!("pid {pid}"));
            }
            if let Some(ms) = s.uptime_ms {
                parts.push(format!("up {}", pimcp_proxy::human_duration(Duration::from_millis(ms))));
            }
        }
        ServerState::Cached => parts.push(match s.metadata {
            Some(pimcp_actors::MetadataSource::StaleCache) => "stale metadata from the cache".into(),
            Some(_) => "metadata from the cache".into(),
            None => format!("nothing cached yet; `pimcp-run connect {}`", s.name),
        }),
        ServerState::Backoff { until, attempt } => {
            let wait = until.duration_since(now).unwrap_or_default();
            parts.push(format!(
                "attempt {attempt}, next try in {}",
                pimcp_proxy::human_duration(wait)
            ));
        }
        ServerState::NeedsAuth => parts.push(format!("run `pimcp-run auth login {}`", s.name)),
        ServerState::Failed { reason } => {
            let since = UNIX_EPOCH + Duration::from_millis(s.since_ms);
            let ago = now.duration_since(since).unwrap_or_default();
            parts.push(format!("failed {} ago: {reason}", pimcp_proxy::human_duration(ago)));
        }
        _ => {}
    }
    if let Some(reason) = &s.reason
        && !matches!(s.state, ServerState::Failed { .. })
        && !reason.is_empty()
    {
        parts.push(reason.clone());
    }
    if let Some(error) = &s.last_error
        && s.state != ServerState::Ready
        && !parts.iter().any(|p| p.contains(error.as_str()))
    {
        parts.push(format!("last error: {error}"));
    }
    one_line(&parts.join("; "), 160)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn status(name: &str, state: ServerState) -> ServerStatus {
        let json = serde_json::json!({
            "name": name, "state": "cached", "toolCount": 0, "resourceCount": 0, "promptCount": 0,
            "failures": 0, "sinceMs": 1_000, "inFlight": 0, "lifecycle": "lazy",
        });
        let mut s: ServerStatus = serde_json::from_value(json).unwrap();
        s.state = state;
        s
    }

    #[test]
    fn descriptions_get_a_column_of_their_own_cut_to_one_line() {
        let mut files = status("files", ServerState::Cached);
        files.description = Some(format!("Read and write files\nunder the project {}", "x".repeat(100)));
        let plain = status("plain", ServerState::Cached);
        let snapshot = StatusSnapshot::new(0, vec![files, plain]);
        let text = render(&snapshot, Style { colour: false }, UNIX_EPOCH);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].ends_with("DESCRIPTION"), "{text}");
        assert!(lines[1].contains("Read and write files under the project x"), "{text}");
        assert!(lines[1].ends_with('…'), "{text}");
        assert!(lines[2].ends_with(" -"), "{text}");
    }

    #[test]
    fn the_table_shows_state_tools_and_what_to_do() {
        let mut ready = status("fixture", ServerState::Ready);
        ready.tool_count = 14;
        ready.metadata = Some(pimcp_actors::MetadataSource::Live);
        ready.protocol_version = Some("2025-11-25".into());
        ready.pid = Some(42);
        let cached = status("github", ServerState::Cached);
        let failed = status(
            "broken",
            ServerState::Failed {
                reason: "exited with code 2 at start".into(),
            },
        );
        let snapshot = StatusSnapshot::new(0, vec![failed, ready, cached]);
        let now = UNIX_EPOCH + Duration::from_secs(13);
        let text = render(&snapshot, Style { colour: false }, now);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0], "SERVER   STATE     TOOLS  LIFECYCLE  PROTOCOL    DETAIL",
            "{text}"
        );
        assert!(
            lines[1].contains("✗ failed") && lines[1].contains("failed 12s ago: exited with code 2"),
            "{text}"
        );
        assert!(
            lines[2].contains("✓ ready") && lines[2].contains("14") && lines[2].contains("pid 42"),
            "{text}"
        );
        assert!(
            lines[3].contains("○ cached") && lines[3].contains("nothing cached yet; `pimcp-run connect github`"),
            "{text}"
        );
        assert!(text.ends_with("3 servers, 1 connected, 14 tools known\n"), "{text}");
        assert!(!text.contains('\x1b'));
        assert!(render(&snapshot, Style { colour: true }, now).contains("\x1b[31m✗ failed\x1b[0m"));
    }

    #[test]
    fn no_servers_says_how_to_add_one() {
        let snapshot = StatusSnapshot::new(0, vec![]);
        assert!(render(&snapshot, Style { colour: false }, SystemTime::now()).contains("pimcp-run add NAME"));
    }
}
