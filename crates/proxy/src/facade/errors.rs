//! Model-facing errors: runtime errors mapped to categories, unknown servers and tools (with suggestions), and
//! the configuration's problems as hints.

use pimcp_actors::{Error as RuntimeError, ErrorCategory};
use pimcp_surface::{
    Category, DEFAULT_SUGGESTIONS, Lookup, ProxyError, ToolDoc, config_problems_text, tool_ambiguous, tool_not_found,
};

use super::{MAX_LISTED_TOOLS, Proxy};

impl Proxy {
    /// The skipped files and entries of the configuration in use, for the model to pass on (see
    /// [`config_problems_text`]).
    pub(super) fn config_problems_text(&self) -> Option<String> {
        config_problems_text(&self.inner.runtime.config_problems())
    }

    pub(super) fn unknown_server(&self, server: &str) -> ProxyError {
        let catalog = self.inner.runtime.catalog();
        let names: Vec<&str> = catalog.servers().map(|s| s.server.as_str()).collect();
        let error = ProxyError::new(Category::Config, format!("unknown server {server:?}."));
        let error = if names.is_empty() {
            error.with_hint("No servers are configured.")
        } else {
            let shown: Vec<&str> = names.iter().take(pimcp_surface::MAX_STATUS_LINES).copied().collect();
            if names.len() > shown.len() {
                error.with_hint(format!(
                    "Configured servers ({}): {}, … (mcp({{search: \"words\"}}) finds tools on any).",
                    names.len(),
                    shown.join(", ")
                ))
            } else {
                error.with_hint(format!("Configured servers: {}.", shown.join(", ")))
            }
        };
        self.with_config_problems(error)
    }

    /// `error` with the configuration's skipped files and entries as a hint: the tool or server the model asked
    /// for may be in one of them.
    fn with_config_problems(&self, error: ProxyError) -> ProxyError {
        match self.config_problems_text() {
            Some(problems) => error.with_hint(problems),
            None => error,
        }
    }

    /// Turns a runtime error into the model-facing error, with suggestions for unknown tools. `scope` is the server
    /// the caller named, if any.
    pub(crate) fn runtime_error(&self, e: RuntimeError, scope: Option<&str>) -> ProxyError {
        match &e {
            RuntimeError::UnknownTool { name: wanted, .. } => {
                let indexed = self.indexed();
                let suggestions = indexed.index.suggest(wanted, DEFAULT_SUGGESTIONS);
                // The server the name points at: the one named, else the longest prefix the name starts with.
                let server = scope
                    .map(str::to_owned)
                    .or_else(|| indexed.catalog.implied_servers(wanted).into_iter().next());
                let available: Vec<String> = server
                    .as_deref()
                    .and_then(|s| indexed.catalog.server(s))
                    .map(|sc| sc.tools.iter().map(|t| t.name.clone()).collect())
                    .unwrap_or_default();
                let mut error = tool_not_found(wanted, server.as_deref(), &suggestions);
                if let Some(server) = &server
                    && !available.is_empty()
                {
                    let mut shown: Vec<&str> = available.iter().take(MAX_LISTED_TOOLS).map(String::as_str).collect();
                    if available.len() > MAX_LISTED_TOOLS {
                        shown.push("…");
                    }
                    error = error.with_hint(format!("Server {server:?} has: {}.", shown.join(", ")));
                }
                self.with_config_problems(error)
            }
            RuntimeError::AmbiguousTool {
                name: wanted,
                candidates,
            } => {
                let indexed = self.indexed();
                let docs: Vec<&ToolDoc> = candidates
                    .iter()
                    .filter_map(|c| match indexed.index.find(c, None) {
                        Lookup::Found(d) => Some(d),
                        _ => None,
                    })
                    .collect();
                if docs.len() == candidates.len() {
                    tool_ambiguous(wanted, &docs)
                } else {
                    ProxyError::new(Category::Validation, e.to_string())
                        .with_hint("Pass `server`, or use the full tool name.")
                }
            }
            RuntimeError::UnknownServer { server } => self.unknown_server(server),
            RuntimeError::NeedsAuth { server, .. } => ProxyError::new(Category::NeedsAuth, e.to_string())
                .with_hint(format!("After logging in, mcp({{connect: {server:?}}}) connects it.")),
            RuntimeError::TaskPending {
                server, tool, task_id, ..
            } => {
                let exposed = self
                    .inner
                    .runtime
                    .catalog()
                    .tools()
                    .find(|t| t.server == *server && t.original == *tool)
                    .map_or_else(|| tool.clone(), |t| t.name.clone());
                ProxyError::new(Category::Timeout, e.to_string()).with_hint(format!(
                    "It goes on running. Get its result later with mcp({{task: \"{exposed}:{task_id}\"}})."
                ))
            }
            _ => ProxyError::new(category_of(e.category()), e.to_string()),
        }
    }
}

/// The runtime's category as the proxy texts spell it (the two enums mirror each other).
pub fn category_of(c: ErrorCategory) -> Category {
    match c {
        ErrorCategory::NeedsAuth => Category::NeedsAuth,
        ErrorCategory::Timeout => Category::Timeout,
        ErrorCategory::Connection => Category::Connection,
        ErrorCategory::UnknownTool => Category::UnknownTool,
        ErrorCategory::Validation => Category::Validation,
        ErrorCategory::Approval => Category::Approval,
        ErrorCategory::Config => Category::Config,
        ErrorCategory::Untrusted => Category::Untrusted,
        ErrorCategory::InputRequired => Category::InputRequired,
        ErrorCategory::ToolError => Category::ToolError,
        ErrorCategory::Other => Category::Other,
    }
}
