//! The texts the model reads for status, list, search and instructions, and error results with their category
//! (a human sentence first, the category on the last line and in `_meta["pimcp/category"]`). Pure functions
//! over plain structs; the runtime fills them in.

use std::fmt;
use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
use serde_json::Value;

use crate::error::Error;
use crate::search::{MatchKind, SearchPage, SearchQuery, ToolDoc};
use crate::shapes::DEFAULT_SHAPE_CHARS;

/// `_meta` key carrying an error result's category.
pub const CATEGORY_META_KEY: &str = "pimcp/category";
/// Characters of server instructions shown in a list.
pub const INSTRUCTIONS_PREVIEW_CHARS: usize = 300;
/// Characters of a tool description in list lines.
pub const LIST_DESCRIPTION_CHARS: usize = 80;
/// Characters of a tool description in search results.
pub const SEARCH_DESCRIPTION_CHARS: usize = 160;

/// Error categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Category {
    NeedsAuth,
    Timeout,
    /// Transient transport error, server down or in backoff.
    Connection,
    UnknownTool,
    /// Arguments or parameters do not match.
    Validation,
    Approval,
    Config,
    Untrusted,
    InputRequired,
    /// The tool itself returned `isError`.
    ToolError,
    Other,
}

impl Category {
    pub const ALL: [Category; 11] = [
        Category::NeedsAuth,
        Category::Timeout,
        Category::Connection,
        Category::UnknownTool,
        Category::Validation,
        Category::Approval,
        Category::Config,
        Category::Untrusted,
        Category::InputRequired,
        Category::ToolError,
        Category::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Category::NeedsAuth => "needs-auth",
            Category::Timeout => "timeout",
            Category::Connection => "connection",
            Category::UnknownTool => "unknown-tool",
            Category::Validation => "validation",
            Category::Approval => "approval",
            Category::Config => "config",
            Category::Untrusted => "untrusted",
            Category::InputRequired => "input-required",
            Category::ToolError => "tool-error",
            Category::Other => "other",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Marks `result` as an error of `category` in its `_meta` (other `_meta` keys are kept).
pub fn with_category(mut result: CallToolResult, category: Category) -> CallToolResult {
    let mut meta = result.meta.take().map(|m| m.0).unwrap_or_default();
    meta.insert(
        CATEGORY_META_KEY.to_string(),
        Value::String(category.as_str().to_string()),
    );
    result.meta = Some(MetaObject(meta));
    result.is_error = Some(true);
    result
}

/// A plain text success result.
pub fn text_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// An error the proxy returns as a tool result: the message, optional hint lines, then `category: <category>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyError {
    pub category: Category,
    pub message: String,
    pub hints: Vec<String>,
}

impl ProxyError {
    pub fn new(category: Category, message: impl Into<String>) -> Self {
        ProxyError {
            category,
            message: message.into(),
            hints: Vec::new(),
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hints.push(hint.into());
        self
    }

    /// The text block: the sentence first (capitalized), hints, the category last.
    pub fn text(&self) -> String {
        let mut out = capitalize(&self.message);
        for hint in &self.hints {
            out.push('\n');
            out.push_str(hint);
        }
        out.push_str(&format!("\ncategory: {}", self.category));
        out
    }

    pub fn into_call_result(self) -> CallToolResult {
        with_category(
            CallToolResult::error(vec![ContentBlock::text(self.text())]),
            self.category,
        )
    }
}

impl From<&Error> for ProxyError {
    fn from(e: &Error) -> Self {
        let category = match e {
            Error::Spill { .. } | Error::SpillBudget { .. } | Error::Serve { .. } | Error::Runtime(_) => {
                Category::Other
            }
            _ => Category::Validation,
        };
        ProxyError::new(category, e.to_string())
    }
}

impl From<Error> for ProxyError {
    fn from(e: Error) -> Self {
        ProxyError::from(&e)
    }
}

/// A server's state as the status and search texts show it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerState {
    Ready,
    Connecting,
    /// Metadata from the cache, not connected.
    Cached,
    /// Configured, never connected, nothing cached.
    NotStarted,
    NeedsAuth,
    Failed {
        ago: Duration,
    },
    Backoff {
        retry_in: Duration,
    },
    Disabled,
    Untrusted,
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
    pub name: String,
    pub state: ServerState,
    /// Tools known (live or cached); `None` when nothing is known.
    pub n_tools: Option<usize>,
    /// The last error or the state's cause, shown after the state.
    pub reason: Option<String>,
    /// The server's `description`, shortened ([`crate::tool_def::short_description`]).
    pub description: Option<String>,
}

/// How many configuration problems a model-facing text lists; the rest are counted.
pub const MAX_LISTED_CONFIG_PROBLEMS: usize = 5;
/// The longest configuration problem line a model-facing text shows (longer ones end with `…`).
const MAX_CONFIG_PROBLEM_CHARS: usize = 300;

/// What the model should tell its user about a configuration that did not load in full: each skipped file or entry
/// (the file, position, server and field; never a value), at most [`MAX_LISTED_CONFIG_PROBLEMS`] of them. `None`
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

/// Appended to a search hit's name when `approveTools` gates the tool: the user is asked before each call.
pub const APPROVAL_MARK: &str = " [needs approval]";

/// A server a search did not cover, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedServer {
    pub name: String,
    pub state: ServerState,
}

/// The search text: ranked hits with parameter shapes, a `next: offset N` footer when more remain, and the servers
/// that were not searched. An empty result explains itself.
pub fn search_text(query: &SearchQuery, page: &SearchPage<'_>, skipped: &[SkippedServer]) -> String {
    let what = describe_query(query, page);
    let mut out = String::new();
    if page.hits.is_empty() {
        if page.total > 0 {
            out.push_str(&format!(
                "No results at offset {}: {} {what}; use an offset below {}.",
                page.offset,
                plural(page.total, "tool", "tools"),
                page.total
            ));
        } else {
            out.push_str(&format!("No tools {what}."));
            if skipped.is_empty() {
                out.push_str(if query.regex {
                    "\nTry a looser pattern, or search without regex."
                } else {
                    "\nTry other or fewer words, or regex: true for a pattern."
                });
            }
        }
    } else {
        let first = page.offset + 1;
        let last = page.offset + page.hits.len();
        out.push_str(&format!("{} {what}", plural(page.total, "tool", "tools")));
        if page.total > page.hits.len() {
            out.push_str(&format!(" (showing {first}–{last})"));
        }
        out.push_str(":\n");
        for hit in &page.hits {
            out.push_str(&format!("\n{}", hit.doc.name));
            if hit.doc.needs_approval {
                out.push_str(APPROVAL_MARK);
            }
            let description = one_line(&hit.doc.description, SEARCH_DESCRIPTION_CHARS);
            if !description.is_empty() {
                out.push_str(&format!(" — {description}"));
            }
            out.push_str(&format!("\n  {}\n", hit.doc.input_shape_within(DEFAULT_SHAPE_CHARS)));
        }
        if let Some(next) = page.next_offset {
            out.push_str(&format!("\nnext: offset {next}"));
        }
    }
    if !skipped.is_empty() {
        out.push_str(&format!("\nNot searched: {}.", skipped_list(skipped)));
        if skipped.iter().any(|s| s.state == ServerState::Connecting) {
            out.push_str(" Servers still connecting may have matches; retry in a moment.");
        }
        if skipped.iter().any(|s| s.state == ServerState::NotStarted) {
            out.push_str(" mcp({connect: \"name\"}) loads a server's tools.");
        }
    }
    out.trim_end().to_string()
}

/// Up to this many servers a search names each one it did not search, with its reason; beyond, it groups them by
/// reason and names at most this many per reason.
pub const MAX_LISTED_SKIPPED: usize = 20;

fn skipped_list(skipped: &[SkippedServer]) -> String {
    if skipped.len() <= MAX_LISTED_SKIPPED {
        let list: Vec<String> = skipped
            .iter()
            .map(|s| format!("{} ({})", s.name, s.state.skip_reason()))
            .collect();
        return list.join(", ");
    }
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for s in skipped {
        let reason = s.state.skip_reason();
        match groups.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, names)) => names.push(&s.name),
            None => groups.push((reason, vec![&s.name])),
        }
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(reason, names)| {
            let mut shown: Vec<&str> = names.iter().take(MAX_LISTED_SKIPPED).copied().collect();
            if names.len() > MAX_LISTED_SKIPPED {
                shown.push("…");
            }
            format!("{} {reason} ({})", names.len(), shown.join(", "))
        })
        .collect();
    format!("{} servers — {}", skipped.len(), parts.join("; "))
}

fn describe_query(query: &SearchQuery, page: &SearchPage<'_>) -> String {
    let listed = page.hits.first().is_some_and(|h| h.kind == MatchKind::Listed) || query.text.trim().is_empty();
    let mut what = if listed {
        "on".to_string()
    } else if query.regex {
        format!("match /{}/", query.text.trim())
    } else {
        format!("match {}", quoted(query.text.trim()))
    };
    if let Some(server) = &query.server {
        what.push_str(&format!("{}{}", if listed { " " } else { " on " }, server));
    }
    what
}

/// `1 tool`, `2 tools`.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

/// `4s`, `2m 5s`, `1h 3m`, `2d 4h`.
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h {}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d {}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// A JSON string literal, for texts that show calls like `mcp({connect: "x"})`.
pub(crate) fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// The first line of `text`, at most `max_chars` characters, cut at a word boundary with `…`.
pub(crate) fn one_line(text: &str, max_chars: usize) -> String {
    let first = text.trim().lines().next().unwrap_or_default().trim();
    truncate_at_word(first, max_chars)
}

/// `text` in at most `max_chars` characters (plus `…` when cut), cut at the last space when one is near the end.
pub(crate) fn truncate_at_word(text: &str, max_chars: usize) -> String {
    let Some((cut, _)) = text.char_indices().nth(max_chars) else {
        return text.to_string();
    };
    let head = &text[..cut];
    let at_space = head.rfind(char::is_whitespace).filter(|&i| i * 3 >= cut * 2);
    let head = at_space.map_or(head, |i| &head[..i]).trim_end();
    format!("{head}…")
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;
    use crate::search::SearchIndex;

    fn tool(server: &str, name: &str, description: &str, schema: Value) -> ToolDoc {
        ToolDoc {
            name: format!("{server}_{name}"),
            original_name: name.to_string(),
            server: server.to_string(),
            description: description.to_string(),
            keywords: Vec::new(),
            input_schema: crate::search::doc_schema(schema),
            needs_approval: false,
        }
    }

    fn line(name: &str, state: ServerState, n_tools: Option<usize>, reason: Option<&str>) -> ServerLine {
        ServerLine {
            name: name.into(),
            state,
            n_tools,
            reason: reason.map(String::from),
            description: None,
        }
    }

    #[test]
    fn status_of_ten_thousand_servers_counts_them_and_lists_only_those_needing_attention() {
        let mut servers: Vec<ServerLine> = (0..10_000)
            .map(|i| line(&format!("server-{i:05}"), ServerState::Cached, Some(3), None))
            .collect();
        servers[7].state = ServerState::Ready;
        for s in servers.iter_mut().skip(100).take(50) {
            s.state = ServerState::NeedsAuth;
        }
        let text = status_text(&servers);
        assert!(text.len() < 6_000, "{} characters", text.len());
        assert!(
            text.starts_with("MCP: 1 of 10000 servers ready, 30000 tools\n"),
            "{text}"
        );
        assert!(
            text.contains("By state: 9949 cached, 50 need auth, 1 ready.\n"),
            "{text}"
        );
        assert!(
            text.contains("Needing attention (50):\n⚠ server-00100: needs auth"),
            "{text}"
        );
        assert!(
            text.contains("… and 10 more (`pimcp-run status` lists every server)"),
            "{text}"
        );
        assert!(!text.contains("server-00007"), "ready servers are counted, not listed");
        // Up to the line limit every server has its line.
        let few = &servers[..MAX_STATUS_LINES];
        assert_eq!(status_text(few).matches(" server-").count(), MAX_STATUS_LINES);
    }

    #[test]
    fn config_problems_name_the_skipped_files_and_entries_and_are_bounded() {
        let problem = |path: &str, server: Option<&str>, message: &str, severity| pimcp_config::ConfigProblem {
            path: Some(path.into()),
            position: None,
            server: server.map(String::from),
            field: None,
            message: message.into(),
            severity,
        };
        assert_eq!(config_problems_text(&[]), None);
        let warning = problem("/h/mcp.json", None, "unknown field", pimcp_config::Severity::Warning);
        assert_eq!(
            config_problems_text(std::slice::from_ref(&warning)),
            None,
            "warnings are for config check"
        );
        let mut problems = vec![
            warning,
            problem(
                "/h/mcp.json",
                None,
                "expected `,` or `}`",
                pimcp_config::Severity::Error,
            ),
            problem(
                "/p/.mcp.json",
                Some("db"),
                "`command` must be a string",
                pimcp_config::Severity::Error,
            ),
        ];
        insta::assert_snapshot!(config_problems_text(&problems).unwrap(), @r"
        Configuration problems (2 skipped; tell the user, `pimcp-run config check` shows them all):
        - /h/mcp.json: expected `,` or `}`
        - /p/.mcp.json: server `db`: `command` must be a string
        ");
        for i in 0..100 {
            problems.push(problem(
                "/h/x.json",
                None,
                &"long ".repeat(100 + i),
                pimcp_config::Severity::Error,
            ));
        }
        let text = config_problems_text(&problems).unwrap();
        assert!(text.len() < 2_500, "{} characters", text.len());
        assert!(text.ends_with("\n- … and 97 more"), "{text}");
    }

    #[test]
    fn a_search_miss_over_ten_thousand_servers_groups_those_not_searched() {
        let index = SearchIndex::build(vec![tool("a", "echo", "Echoes", json!({}))]);
        let q = SearchQuery::new("zzz");
        let page = index.search(&q).unwrap();
        let mut skipped: Vec<SkippedServer> = (0..10_000)
            .map(|i| SkippedServer {
                name: format!("s{i:05}"),
                state: ServerState::NotStarted,
            })
            .collect();
        skipped[5].state = ServerState::NeedsAuth;
        let text = search_text(&q, &page, &skipped);
        assert!(text.len() < 1_000, "{} characters: {text}", text.len());
        assert!(
            text.contains("Not searched: 10000 servers — 9999 not started, nothing cached yet (s00000, s00001,"),
            "{text}"
        );
        assert!(text.contains(", s00020, …); 1 needs auth (s00005)."), "{text}");
    }

    #[test]
    fn categories_are_kebab_case_and_distinct() {
        let names: Vec<&str> = Category::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(
            names,
            [
                "needs-auth",
                "timeout",
                "connection",
                "unknown-tool",
                "validation",
                "approval",
                "config",
                "untrusted",
                "input-required",
                "tool-error",
                "other"
            ]
        );
    }

    #[test]
    fn error_results_carry_text_first_and_category_in_meta() {
        let e = ProxyError::new(
            Category::Timeout,
            "tool `slow_op` on server `slow` did not answer within 60s",
        )
        .with_hint("The server is still running; try again or raise `timeout`.");
        let result = serde_json::to_value(e.clone().into_call_result()).unwrap();
        assert_eq!(
            result,
            json!({
                "content": [{"type": "text", "text": "Tool `slow_op` on server `slow` did not answer within 60s\nThe server is still running; try again or raise `timeout`.\ncategory: timeout"}],
                "isError": true,
                "_meta": {"pimcp/category": "timeout"},
                "resultType": "complete"
            })
        );
        let from_error = ProxyError::from(Error::EmptyQuery);
        assert_eq!(from_error.category, Category::Validation);
    }

    #[test]
    fn status_snapshot() {
        let servers = vec![
            line("everything", ServerState::Ready, Some(20), None),
            line("github", ServerState::Cached, Some(25), None),
            line("linear", ServerState::NeedsAuth, None, None),
            line(
                "broken",
                ServerState::Failed {
                    ago: Duration::from_secs(12),
                },
                Some(3),
                Some("connection refused\nmore"),
            ),
            line(
                "flaky",
                ServerState::Backoff {
                    retry_in: Duration::from_secs(4),
                },
                None,
                Some("exit status 1"),
            ),
            line("slow", ServerState::Connecting, None, None),
            line("old", ServerState::Disabled, Some(2), None),
            line("proj", ServerState::Untrusted, None, None),
            line("fresh", ServerState::NotStarted, None, None),
        ];
        insta::assert_snapshot!(status_text(&servers), @r#"
        MCP: 1 of 9 servers ready, 50 tools

        ✓ everything: 20 tools
        ○ github: 25 tools, cached
        ⚠ linear: needs auth — mcp({action: "auth-start", server: "linear"})
        ✗ broken: failed 12s ago, 3 tools cached: connection refused
        ↻ flaky: backoff, next try in 4s: exit status 1
        ◌ slow: connecting
        ⊘ old: disabled
        ⊗ proj: untrusted — project config is not trusted (`pimcp-run trust`)
        · fresh: not started, nothing cached yet

        mcp({server: "name"}) lists tools · mcp({search: "words"}) finds tools
        "#);
        assert!(status_text(&[]).starts_with("MCP: no servers configured."));
    }

    #[test]
    fn list_snapshot() {
        let echo = tool("everything", "echo", "Echoes back the input string", json!({}));
        let long = tool(
            "everything",
            "annotatedMessage",
            "Demonstrates how annotations can be used to provide metadata about content, with priorities and audiences\nSecond line",
            json!({}),
        );
        let instructions = "Use echo for testing. ".repeat(20);
        insta::assert_snapshot!(list_text("everything", &ServerState::Cached, &[&echo, &long], Some(&instructions)), @r#"
        everything: 2 tools (from cache, not connected; mcp({connect: "everything"}) connects)

        - everything_annotatedMessage — Demonstrates how annotations can be used to provide metadata about content,…
        - everything_echo — Echoes back the input string

        Instructions: Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for testing. Use echo for…
        mcp({instructions: "everything"}) shows them in full.
        "#);
        assert_eq!(list_text("empty", &ServerState::Ready, &[], None), "empty: no tools");
        assert_eq!(instructions_text("s", Some("  Do X.  ")), "s instructions:\n\nDo X.");
        assert_eq!(instructions_text("s", None), "s provides no instructions.");
    }

    fn catalog() -> SearchIndex {
        SearchIndex::build(vec![
            tool(
                "everything",
                "echo",
                "Echoes back the input string",
                json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
            ),
            tool(
                "everything",
                "echo_twice",
                "Echoes twice",
                json!({"type": "object", "properties": {"message": {"type": "string"}, "n": {"type": "integer"}}, "required": ["message"]}),
            ),
            tool("everything", "echo_loud", "Echoes in capitals", json!({})),
            tool(
                "everything",
                "add",
                "Adds two numbers",
                json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
            ),
        ])
    }

    #[test]
    fn search_snapshots() {
        let index = catalog();
        let q = SearchQuery::new("echo").with_limit(2);
        let page = index.search(&q).unwrap();
        let skipped = vec![SkippedServer {
            name: "linear".into(),
            state: ServerState::NeedsAuth,
        }];
        insta::assert_snapshot!(search_text(&q, &page, &skipped), @r#"
        3 tools match "echo" (showing 1–2):

        everything_echo — Echoes back the input string
          {message: string}

        everything_echo_loud — Echoes in capitals
          {}

        next: offset 2
        Not searched: linear (needs auth).
        "#);
        let q = q.with_offset(2);
        let page = index.search(&q).unwrap();
        insta::assert_snapshot!(search_text(&q, &page, &[]), @r#"
        3 tools match "echo" (showing 3–3):

        everything_echo_twice — Echoes twice
          {message: string, n?: number}
        "#);
        let q = q.with_offset(9);
        let page = index.search(&q).unwrap();
        insta::assert_snapshot!(search_text(&q, &page, &[]), @r#"No results at offset 9: 3 tools match "echo"; use an offset below 3."#);
        let q = SearchQuery::new("").with_server("everything").with_limit(1);
        let page = index.search(&q).unwrap();
        insta::assert_snapshot!(search_text(&q, &page, &[]), @r"
        4 tools on everything (showing 1–1):

        everything_add — Adds two numbers
          {a: number, b: number}

        next: offset 1
        ");
        let q = SearchQuery::new("^everything_a").with_regex(true);
        let page = index.search(&q).unwrap();
        assert!(search_text(&q, &page, &[]).starts_with("1 tool match /^everything_a/:\n"));
    }

    #[test]
    fn empty_search_explains_itself() {
        let index = catalog();
        let q = SearchQuery::new("calendar");
        let page = index.search(&q).unwrap();
        let skipped = vec![
            SkippedServer {
                name: "gcal".into(),
                state: ServerState::Connecting,
            },
            SkippedServer {
                name: "outlook".into(),
                state: ServerState::NeedsAuth,
            },
            SkippedServer {
                name: "caldav".into(),
                state: ServerState::Failed {
                    ago: Duration::from_secs(75),
                },
            },
            SkippedServer {
                name: "ical".into(),
                state: ServerState::Disabled,
            },
            SkippedServer {
                name: "proj".into(),
                state: ServerState::Untrusted,
            },
            SkippedServer {
                name: "new".into(),
                state: ServerState::NotStarted,
            },
        ];
        insta::assert_snapshot!(search_text(&q, &page, &skipped), @r#"
        No tools match "calendar".
        Not searched: gcal (connecting), outlook (needs auth), caldav (failed 1m 15s ago), ical (disabled), proj (untrusted), new (not started, nothing cached yet). Servers still connecting may have matches; retry in a moment. mcp({connect: "name"}) loads a server's tools.
        "#);
        insta::assert_snapshot!(search_text(&q, &page, &[]), @r#"
        No tools match "calendar".
        Try other or fewer words, or regex: true for a pattern.
        "#);
        let q = SearchQuery::new("calendar").with_server("everything");
        let page = index.search(&q).unwrap();
        assert_eq!(
            search_text(&q, &page, &[]).lines().next(),
            Some("No tools match \"calendar\" on everything.")
        );
    }

    #[test]
    fn helpers_table() {
        for (secs, want) in [
            (0, "0s"),
            (59, "59s"),
            (60, "1m 0s"),
            (3599, "59m 59s"),
            (3600, "1h 0m"),
            (90_000, "1d 1h"),
        ] {
            assert_eq!(human_duration(Duration::from_secs(secs)), want);
        }
        for (text, max, want) in [
            ("short", 10, "short"),
            ("hello wonderful world", 15, "hello wonderful…"),
            ("abcdefghij", 4, "abcd…"),
            ("漢字漢字漢字", 3, "漢字漢…"),
            ("one two", 5, "one t…"),
        ] {
            assert_eq!(truncate_at_word(text, max), want, "{text}/{max}");
        }
        assert_eq!(one_line("  first\nsecond", 80), "first");
        assert_eq!(quoted("a\"b"), "\"a\\\"b\"");
    }

    #[test]
    fn search_marks_tools_that_need_approval() {
        let mut gated = tool("everything", "delete_all", "Deletes everything", json!({}));
        gated.needs_approval = true;
        let index = SearchIndex::build(vec![
            gated,
            tool("everything", "delete_one", "Deletes one thing", json!({})),
        ]);
        let q = SearchQuery::new("delete");
        let page = index.search(&q).unwrap();
        insta::assert_snapshot!(search_text(&q, &page, &[]), @r#"
        2 tools match "delete":

        everything_delete_all [needs approval] — Deletes everything
          {}

        everything_delete_one — Deletes one thing
          {}
        "#);
    }
}
