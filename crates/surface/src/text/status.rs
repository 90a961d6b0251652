//! Server states and the status, list and instructions texts, plus the configuration-problems text.

use std::time::Duration;

use super::{
    INSTRUCTIONS_PREVIEW_CHARS, LIST_DESCRIPTION_CHARS, human_duration, one_line, plural, quoted, truncate_at_word,
};
use crate::search::ToolDoc;

/// A server's state as the status and search texts show it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerState {
    /// Connected and answering.
    Ready,
    /// A connect is under way.
    Connecting,
    /// Metadata from the cache, not connected.
    Cached,
    /// Configured, never connected, nothing cached.
    NotStarted,
    /// Waits for an OAuth login.
    NeedsAuth,
    /// The last connect failed and nothing retries it by itself.
    Failed {
        /// How long ago it failed.
        ago: Duration,
    },
    /// In restart backoff.
    Backoff {
        /// How long until the next attempt.
        retry_in: Duration,
    },
    /// Disabled for this run.
    Disabled,
    /// Defined by a project that is not trusted.
    Untrusted,
    /// Closing its connection.
    Draining,
    /// A configuration error that bites at connect (missing variable, bad field); the reason names it.
    ConfigError,
}

impl ServerState {
    fn glyph(&self) -> &'static str {
        match self {
            ServerState::Ready => "✓",
            ServerState::Connecting => "◌",
            ServerState::Cached => "○",
            ServerState::NotStarted => "·",
            ServerState::NeedsAuth => "⚠",
            ServerState::Failed { .. } => "✗",
            ServerState::Backoff { .. } => "↻",
            ServerState::Disabled => "⊘",
            ServerState::Untrusted => "⊗",
            ServerState::Draining => "◐",
            ServerState::ConfigError => "✗",
        }
    }

    /// Why a server in this state was not searched, e.g. `needs auth`.
    pub fn skip_reason(&self) -> String {
        match self {
            ServerState::Ready => "ready".to_string(),
            ServerState::Connecting => "connecting".to_string(),
            ServerState::Cached => "cached".to_string(),
            ServerState::NotStarted => "not started, nothing cached yet".to_string(),
            ServerState::NeedsAuth => "needs auth".to_string(),
            ServerState::Failed { ago } => format!("failed {} ago", human_duration(*ago)),
            ServerState::Backoff { retry_in } => format!("backoff, next try in {}", human_duration(*retry_in)),
            ServerState::Disabled => "disabled".to_string(),
            ServerState::Untrusted => "untrusted".to_string(),
            ServerState::Draining => "closing".to_string(),
            ServerState::ConfigError => "configuration error".to_string(),
        }
    }
}

/// One server in the status text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLine {
    /// The server's name.
    pub name: String,
    /// Its state.
    pub state: ServerState,
    /// Tools known (live or cached); `None` when nothing is known.
    pub n_tools: Option<usize>,
    /// The last error or the state's cause, shown after the state.
    pub reason: Option<String>,
    /// The server's `description`, shortened ([`crate::tool_def::short_description`]).
    pub description: Option<String>,
}

/// How many configuration problems a model-facing text lists; the rest are counted.
pub(super) const MAX_LISTED_CONFIG_PROBLEMS: usize = 5;
/// The longest configuration problem line a model-facing text shows (longer ones end with `…`).
const MAX_CONFIG_PROBLEM_CHARS: usize = 300;

/// What the model should tell its user about a configuration that did not load in full: each skipped file or entry
/// (the file, position, server and field; never a value), at most five of them. `None`
/// when nothing was skipped (warnings about ignored fields are left to `pimcp-run config check`).
pub fn config_problems_text(problems: &[pimcp_config::ConfigProblem]) -> Option<String> {
    let errors: Vec<&pimcp_config::ConfigProblem> = problems.iter().filter(|p| p.is_error()).collect();
    if errors.is_empty() {
        return None;
    }
    let mut out = format!(
        "Configuration problems ({} skipped; tell the user, `pimcp-run config check` shows them all):",
        errors.len()
    );
    for problem in errors.iter().take(MAX_LISTED_CONFIG_PROBLEMS) {
        out.push_str("\n- ");
        out.push_str(&clip(&problem.to_string(), MAX_CONFIG_PROBLEM_CHARS));
    }
    if errors.len() > MAX_LISTED_CONFIG_PROBLEMS {
        out.push_str(&format!("\n- … and {} more", errors.len() - MAX_LISTED_CONFIG_PROBLEMS));
    }
    Some(out)
}

/// `text` cut to at most `max` characters, ending with `…` when cut.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max.saturating_sub(1)) {
        Some((cut, _)) if text.chars().count() > max => format!("{}…", &text[..cut]),
        _ => text.to_string(),
    }
}

/// The status text of `mcp({})`.
pub fn status_text(servers: &[ServerLine]) -> String {
    if servers.is_empty() {
        return "MCP: no servers configured. Add one with `pimcp-run add NAME -- COMMAND` or in the config file."
            .to_string();
    }
    let n_ready = servers.iter().filter(|s| s.state == ServerState::Ready).count();
    let n_tools: usize = servers.iter().filter_map(|s| s.n_tools).sum();
    let mut out = format!(
        "MCP: {n_ready} of {} servers ready, {}\n\n",
        servers.len(),
        plural(n_tools, "tool", "tools")
    );
    if servers.len() <= MAX_STATUS_LINES {
        for s in servers {
            match &s.description {
                Some(d) => out.push_str(&format!("{} {} ({d}): {}\n", s.state.glyph(), s.name, status_detail(s))),
                None => out.push_str(&format!("{} {}: {}\n", s.state.glyph(), s.name, status_detail(s))),
            }
        }
    } else {
        summarize_servers(&mut out, servers);
    }
    out.push_str("\nmcp({server: \"name\"}) lists tools · mcp({search: \"words\"}) finds tools");
    out
}

/// Up to this many servers, `mcp({})` has a line for each; beyond, it counts them by state and lists only those
/// that need attention (at most this many), so the text stays a few kilobytes at any number of servers.
pub const MAX_STATUS_LINES: usize = 40;

fn summarize_servers(out: &mut String, servers: &[ServerLine]) {
    let mut counts: Vec<(&'static str, usize)> = Vec::new();
    for s in servers {
        let label = state_label(&s.state);
        match counts.iter_mut().find(|(l, _)| *l == label) {
            Some((_, n)) => *n += 1,
            None => counts.push((label, 1)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let counted: Vec<String> = counts.iter().map(|(label, n)| format!("{n} {label}")).collect();
    out.push_str(&format!("By state: {}.\n", counted.join(", ")));
    let attention: Vec<&ServerLine> = servers.iter().filter(|s| needs_attention(&s.state)).collect();
    if !attention.is_empty() {
        out.push_str(&format!("\nNeeding attention ({}):\n", attention.len()));
        for s in attention.iter().take(MAX_STATUS_LINES) {
            match &s.description {
                Some(d) => out.push_str(&format!("{} {} ({d}): {}\n", s.state.glyph(), s.name, status_detail(s))),
                None => out.push_str(&format!("{} {}: {}\n", s.state.glyph(), s.name, status_detail(s))),
            }
        }
        if attention.len() > MAX_STATUS_LINES {
            out.push_str(&format!(
                "… and {} more (`pimcp-run status` lists every server)\n",
                attention.len() - MAX_STATUS_LINES
            ));
        }
    }
}

fn state_label(state: &ServerState) -> &'static str {
    match state {
        ServerState::Ready => "ready",
        ServerState::Connecting => "connecting",
        ServerState::Cached => "cached",
        ServerState::NotStarted => "not started",
        ServerState::NeedsAuth => "need auth",
        ServerState::Failed { .. } => "failed",
        ServerState::Backoff { .. } => "in backoff",
        ServerState::Disabled => "disabled",
        ServerState::Untrusted => "untrusted",
        ServerState::Draining => "closing",
        ServerState::ConfigError => "with a configuration error",
    }
}

fn needs_attention(state: &ServerState) -> bool {
    matches!(
        state,
        ServerState::NeedsAuth
            | ServerState::Failed { .. }
            | ServerState::Backoff { .. }
            | ServerState::Untrusted
            | ServerState::ConfigError
    )
}

fn status_detail(s: &ServerLine) -> String {
    let tools = s.n_tools.map(|n| plural(n, "tool", "tools"));
    let mut detail = match &s.state {
        ServerState::Ready => tools.unwrap_or_else(|| "ready".to_string()),
        ServerState::Cached => format!("{}, cached", tools.unwrap_or_else(|| "no tools".to_string())),
        ServerState::NeedsAuth => format!(
            "needs auth — mcp({{action: \"auth-start\", server: {}}})",
            quoted(&s.name)
        ),
        ServerState::Untrusted => "untrusted — project config is not trusted (`pimcp-run trust`)".to_string(),
        other => match tools {
            Some(t) if !matches!(other, ServerState::Disabled) => format!("{}, {t} cached", other.skip_reason()),
            _ => other.skip_reason(),
        },
    };
    if let Some(reason) = s.reason.as_deref().filter(|r| !r.is_empty()) {
        detail.push_str(": ");
        detail.push_str(&one_line(reason, 200));
    }
    detail
}

/// The list text of `mcp({server})`. Tools are shown in name order.
pub fn list_text(server: &str, state: &ServerState, tools: &[&ToolDoc], instructions: Option<&str>) -> String {
    let mut tools: Vec<&ToolDoc> = tools.to_vec();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    let state_note = match state {
        ServerState::Ready => String::new(),
        ServerState::Cached | ServerState::NotStarted => {
            format!(
                " (from cache, not connected; mcp({{connect: {}}}) connects)",
                quoted(server)
            )
        }
        ServerState::NeedsAuth => format!(
            " (needs auth: mcp({{action: \"auth-start\", server: {}}}))",
            quoted(server)
        ),
        other => format!(" ({})", other.skip_reason()),
    };
    let mut out = if tools.is_empty() {
        format!("{server}: no tools{state_note}\n")
    } else {
        format!("{server}: {}{state_note}\n\n", plural(tools.len(), "tool", "tools"))
    };
    for doc in &tools {
        out.push_str(&format!("- {}", doc.name));
        let description = one_line(&doc.description, LIST_DESCRIPTION_CHARS);
        if !description.is_empty() {
            out.push_str(&format!(" — {description}"));
        }
        out.push('\n');
    }
    if let Some(text) = instructions.map(str::trim).filter(|t| !t.is_empty()) {
        let preview = truncate_at_word(text, INSTRUCTIONS_PREVIEW_CHARS);
        out.push_str(&format!("\nInstructions: {preview}\n"));
        if preview.len() < text.len() {
            out.push_str(&format!(
                "mcp({{instructions: {}}}) shows them in full.\n",
                quoted(server)
            ));
        }
    }
    out.trim_end().to_string()
}

/// The text of `mcp({instructions: server})`.
pub fn instructions_text(server: &str, instructions: Option<&str>) -> String {
    match instructions.map(str::trim).filter(|t| !t.is_empty()) {
        Some(text) => format!("{server} instructions:\n\n{text}"),
        None => format!("{server} provides no instructions."),
    }
}
