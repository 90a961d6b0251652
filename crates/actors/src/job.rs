//! A tool call as data: what a caller asks for ([`CallOptions`], the job the runtime routes), what it gets back
//! ([`ToolOutput`]) and what the ServerActor learns from it (`CallReport`). Running a call is `call.rs`.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ContentBlock, JsonObject, MetaObject};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::catalog::CatalogTool;
use crate::progress::CallProgress;

/// How long a call may run in total, as a multiple of its (progress-extended) timeout, unless
/// [`CallOptions::max_total`] says otherwise.
pub const DEFAULT_MAX_TOTAL_FACTOR: u32 = 10;

/// Per-call options.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// Resolve the tool name within this server only.
    pub server: Option<String>,
    /// Overrides the server's `timeouts.tool`. Each progress notification restarts it.
    pub timeout: Option<Duration>,
    /// Hard cap regardless of progress (default [`DEFAULT_MAX_TOTAL_FACTOR`] × timeout).
    pub max_total: Option<Duration>,
    /// Cancelling it abandons the call and sends `notifications/cancelled` to the server.
    pub cancel: Option<CancellationToken>,
    /// Receives the server's `notifications/progress` for this call (each also restarts its timeout).
    pub progress: Option<tokio::sync::mpsc::UnboundedSender<CallProgress>>,
}

/// What a call returned.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolOutput {
    /// The server's name.
    pub server: String,
    /// The exposed name.
    pub tool: String,
    /// The upstream name (or `read_<resource>`).
    pub original: String,
    /// The result's content blocks.
    pub content: Vec<ContentBlock>,
    /// The result's `structuredContent`, when the tool sent one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<serde_json::Value>,
    /// Whether the tool reported an error (`isError`).
    pub is_error: bool,
    /// The result's `_meta`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<MetaObject>,
}

impl ToolOutput {
    /// All text blocks joined by newlines.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|c| match c {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// What the ServerActor learns from a finished call.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CallReport {
    /// The server answered (a result or a JSON-RPC error): it is alive, even if busy.
    pub responded: bool,
    /// The transport died under the call.
    pub transport_dead: bool,
    /// The server refused the call's token (401/403) and the auth layer could not renew it.
    pub needs_auth: bool,
}

/// A call on its way to a connection: the tool, its arguments and options.
pub(crate) struct CallJob {
    pub tool: Arc<CatalogTool>,
    pub args: Option<JsonObject>,
    pub opts: CallOptions,
    /// The caller's span (a proxy request): parent of the `tool_call` span, also when the call waits for a connect.
    pub span: tracing::Span,
}
