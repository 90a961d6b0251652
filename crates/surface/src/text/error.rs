//! Error categories and error results: [`Category`], [`with_category`], [`text_result`] and [`ProxyError`].

// Hosts read these types through `pimcp`: each public item says what it is.

use std::fmt;

use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
use serde_json::Value;

use super::{CATEGORY_META_KEY, capitalize};
use crate::error::Error;

/// Error categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Category {
    /// The server needs an OAuth login (`pimcp-run auth login NAME`), or its authorization failed.
    NeedsAuth,
    /// A call or request did not finish in time.
    Timeout,
    /// Transient transport error, server down or in backoff.
    Connection,
    /// No tool of that name (the text suggests close ones).
    UnknownTool,
    /// Arguments or parameters do not match.
    Validation,
    /// The host (or its user) declined the call, or could not be asked.
    Approval,
    /// Missing variable, bad field, unknown or disabled server.
    Config,
    /// The server comes from a project that is not trusted.
    Untrusted,
    /// The server asked for input the host cannot give.
    InputRequired,
    /// The tool itself returned `isError`.
    ToolError,
    /// An `mcpScript` threw or reached one of its limits.
    Script,
    /// Anything else (an internal failure).
    Other,
}

impl Category {
    /// Every category.
    pub const ALL: [Category; 12] = [
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
        Category::Script,
        Category::Other,
    ];

    /// The wire spelling in `_meta["pimcp/category"]` (`needs-auth`, `timeout`, …).
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
            Category::Script => "script",
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
#[non_exhaustive]
pub struct ProxyError {
    /// What kind of failure.
    pub category: Category,
    /// What went wrong, naming the server or tool.
    pub message: String,
    /// What the model can do next, one line each.
    pub hints: Vec<String>,
}

impl ProxyError {
    /// An error of `category` saying `message`, without hints.
    pub fn new(category: Category, message: impl Into<String>) -> Self {
        ProxyError {
            category,
            message: message.into(),
            hints: Vec::new(),
        }
    }

    /// This error with one more hint.
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

    /// The error as the `CallToolResult` a host receives (`isError`, the category in `_meta`).
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
            Error::Spill { .. } | Error::SpillBudget { .. } => Category::Other,
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
