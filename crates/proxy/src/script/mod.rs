//! `mcpScript`: a sandboxed JavaScript function body that chains many tool calls in one model turn and returns only
//! what the model needs. The tool definition ([`script_tool`]), the façade entry points ([`Proxy::script`]) and the
//! bridge that runs the script's `tools.call` / `tools.search` / `tools.describe` exactly as the `mcp` tool's
//! `tool`, `search` and `describe` modes (resolution, validation, approval, timeouts, output guard, categories).
//! The sandbox itself is `engine.rs`.

mod engine;

use std::sync::Arc;
use std::time::Duration;

use pimcp_config::ScriptLimits;
use pimcp_surface::{Category, ProxyError, SearchQuery};
use rmcp::model::{JsonObject, Tool};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::facade::{CallContext, Proxy, ProxyResponse};

/// The script tool's name.
pub const SCRIPT_TOOL_NAME: &str = "mcpScript";
/// Characters of a parameter shape in `tools.search` hits.
const SEARCH_SHAPE_CHARS: usize = 300;
/// The most hits one `tools.search` returns.
const MAX_SEARCH_LIMIT: usize = 50;

/// The `mcpScript` tool as `tools/list` sends it: a pure function of the limits, so byte-stable.
pub fn script_tool(limits: &ScriptLimits) -> Tool {
    let description = format!(
        "Run JavaScript that chains MCP tools in one turn; returns its return value (JSON) and console.log lines. \
         code is an async function body:\n\
         await tools.call(name, args) -> structuredContent, else text\n\
         await tools.search(query, {{limit, server}}) -> [{{tool, server, description, params}}]\n\
         await tools.describe(name) -> {{tool, description, params, inputSchema}}\n\
         Promise.all runs calls in parallel ({} at once, {} per script). A failed call throws ToolError (.category). \
         No files, network or imports; await sleep(ms). Limits: {} s, {} MiB.",
        limits.max_in_flight,
        limits.max_calls,
        limits.timeout.as_secs(),
        limits.memory_bytes >> 20,
    );
    let schema = json!({
        "type": "object",
        "properties": {"code": {"type": "string", "description": "async function body"}},
        "required": ["code"]
    });
    let schema: JsonObject = match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    Tool::new(SCRIPT_TOOL_NAME, description, Arc::new(schema))
}

/// How a script ended: its value, its `console` lines and the tool calls it made.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ScriptOutcome {
    /// The returned value as JSON (`null` for none), or why there is none.
    pub value: Result<Value, ScriptError>,
    /// `console.log` (and `info`, `warn`, `error`, `debug`) lines, in order.
    pub logs: Vec<String>,
    /// Lines beyond the 256 KiB kept, counted.
    pub dropped_logs: usize,
    /// Each `tools.call`, in the order they ended.
    pub calls: Vec<ScriptCall>,
}

/// One `tools.call` of a script (what the trace and the spans record: never arguments or results).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScriptCall {
    /// The exposed tool name.
    pub tool: String,
    /// The error category; `None` when the call succeeded.
    pub category: Option<String>,
    /// How long the call took.
    pub elapsed: Duration,
}

/// Why a script returned no value.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ScriptError {
    /// It ran past its wall time (`scriptMode.timeoutMs`).
    Timeout(Duration),
    /// Its heap reached `scriptMode.memoryMb`.
    Memory(usize),
    /// Its stack overflowed (a recursion too deep).
    Stack,
    /// The host cancelled the call.
    Cancelled,
    /// It threw and did not catch; `category` is set for a failed `tools.*` request (`ToolError`).
    Thrown {
        /// The thrown error's `name` (`Error`, `TypeError`, `ToolError`, …).
        name: String,
        /// Its `message`.
        message: String,
        /// The error category of a failed `tools.*` request.
        category: Option<String>,
    },
    /// `code` was missing or not a string.
    Input(String),
    /// The engine failed (a bug, not the script's doing).
    Engine(String),
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScriptError::Timeout(after) => write!(
                f,
                "the script ran past its time limit of {} s (settings.scriptMode.timeoutMs) and was stopped",
                after.as_secs_f64()
            ),
            ScriptError::Memory(bytes) => write!(
                f,
                "the script used more than its {} MiB of memory (settings.scriptMode.memoryMb) and was stopped",
                bytes >> 20
            ),
            ScriptError::Stack => f.write_str("the script recursed too deep: its stack overflowed"),
            ScriptError::Cancelled => f.write_str("the script was cancelled"),
            ScriptError::Thrown {
                name,
                message,
                category: Some(category),
            } => write!(f, "uncaught {name} ({category}): {message}"),
            ScriptError::Thrown { name, message, .. } => write!(f, "uncaught {name}: {message}"),
            ScriptError::Input(message) => f.write_str(message),
            ScriptError::Engine(message) => write!(f, "the script engine failed: {message}"),
        }
    }
}

impl ScriptError {
    /// The category of the tool result that reports it.
    pub fn category(&self) -> Category {
        match self {
            ScriptError::Timeout(_) => Category::Timeout,
            ScriptError::Input(_) => Category::Validation,
            ScriptError::Engine(_) => Category::Other,
            _ => Category::Script,
        }
    }
}

impl ScriptOutcome {
    /// The text the model reads: the value (a string as it is, anything else as compact JSON) or the error, then
    /// the `console` lines.
    pub fn text(&self) -> String {
        let mut text = match &self.value {
            Ok(Value::String(s)) => s.clone(),
            Ok(value) => value.to_string(),
            Err(e) => e.to_string(),
        };
        if !self.logs.is_empty() || self.dropped_logs > 0 {
            text.push_str("\n--- console ---\n");
            text.push_str(&self.logs.join("\n"));
            if self.dropped_logs > 0 {
                text.push_str(&format!("\n[… {} more lines not kept]", self.dropped_logs));
            }
        }
        text
    }

    pub(crate) fn failed(error: ScriptError) -> ScriptOutcome {
        ScriptOutcome {
            value: Err(error),
            logs: Vec::new(),
            dropped_logs: 0,
            calls: Vec::new(),
        }
    }
}

impl Proxy {
    /// Runs a script with the configured limits (`settings.scriptMode`; the defaults when it is off).
    pub async fn script(&self, code: &str, ctx: &CallContext) -> ScriptOutcome {
        let limits = self.config().settings.script.unwrap_or(ScriptLimits::DEFAULT);
        self.script_with_limits(code, limits, ctx).await
    }

    /// Runs `code` (an async function body) in a fresh sandbox with `limits`. Its tool calls go through
    /// [`Proxy::call`] with `ctx`'s timeout, so approvals, validation, the output guard and a host bridge apply as
    /// for `mcp({tool})`; cancelling `ctx.cancel` ends the script and its calls in flight. One `script` span per
    /// script, one `script_call` span per tool call; neither records code, arguments or results.
    pub async fn script_with_limits(&self, code: &str, limits: ScriptLimits, ctx: &CallContext) -> ScriptOutcome {
        let span = tracing::info_span!(
            "script",
            calls = tracing::field::Empty,
            failed_calls = tracing::field::Empty,
            outcome = tracing::field::Empty
        );
        let cancel = ctx
            .cancel
            .as_ref()
            .map_or_else(CancellationToken::new, CancellationToken::child_token);
        let host = self.script_host(ctx.timeout, span.clone());
        let main = tokio::runtime::Handle::current();
        let started = std::time::Instant::now();
        let code = code.to_owned();
        let run = tokio::task::spawn_blocking(move || engine::run_blocking(&code, limits, host, main, cancel));
        let outcome = match run.instrument(span.clone()).await {
            Ok(outcome) => outcome,
            Err(e) => return ScriptOutcome::failed(ScriptError::Engine(format!("the script's thread failed: {e}"))),
        };
        if let Some(trace) = self.runtime().trace() {
            let calls = outcome
                .calls
                .iter()
                .map(|c| pimcp_actors::ScriptTraceCall {
                    tool: c.tool.clone(),
                    duration_ms: c.elapsed.as_secs_f64() * 1000.0,
                    error: c.category.clone(),
                })
                .collect();
            let ended = match &outcome.value {
                Ok(_) => "ok",
                Err(e) => e.category().as_str(),
            };
            trace.record_script(ended, started.elapsed(), calls);
        }
        span.record("calls", outcome.calls.len());
        span.record(
            "failed_calls",
            outcome.calls.iter().filter(|c| c.category.is_some()).count(),
        );
        span.record(
            "outcome",
            match &outcome.value {
                Ok(_) => "ok",
                Err(e) => e.category().as_str(),
            },
        );
        outcome
    }

    /// Answers an `mcpScript` tool call: `{code}` → the script's text as a tool result (an error result with a
    /// category when it failed), through the output guard.
    pub async fn handle_script_arguments(&self, arguments: Option<&Value>, ctx: &CallContext) -> ProxyResponse {
        let outcome = match arguments.and_then(|a| a.get("code")) {
            Some(Value::String(code)) => self.script(code, ctx).await,
            Some(_) => ScriptOutcome::failed(ScriptError::Input("`code` must be a string".into())),
            None => ScriptOutcome::failed(ScriptError::Input(
                "`code` is missing: pass the body of an async function, e.g. {\"code\": \"return await \
                 tools.search('issues')\"}"
                    .into(),
            )),
        };
        self.script_response(&outcome)
    }

    /// The tool result of a script, its text cut by the output guard like pimcp's own texts.
    pub fn script_response(&self, outcome: &ScriptOutcome) -> ProxyResponse {
        let mut text = outcome.text();
        if let Some(limits) = self.config().settings.output_guard {
            text = pimcp_surface::guard_own_text(text, &limits, self.spill());
        }
        match &outcome.value {
            Ok(_) => ProxyResponse::text_ok(text),
            Err(e) => ProxyError::new(e.category(), text).into(),
        }
    }

    /// The bridge's host side: each request runs on this runtime as the matching `mcp` mode would, in a
    /// `script_call` span under the script's.
    fn script_host(&self, timeout: Option<Duration>, parent: tracing::Span) -> engine::Host {
        let proxy = self.clone();
        // The host session that called the script: its requests run on other tasks, in that session's scope, so
        // that approvals, sampling and elicitation reach the session that made the call.
        let caller = crate::forward::current_caller();
        Arc::new(move |op, cancel| {
            let proxy = proxy.clone();
            let parent = parent.clone();
            let caller = caller.clone();
            let request = async move {
                match op {
                    engine::HostOp::Call { tool, args } => {
                        let span = tracing::info_span!(parent: &parent, "script_call", tool = %tool, outcome = tracing::field::Empty);
                        let ctx = CallContext {
                            cancel: Some(cancel),
                            timeout,
                            progress: None,
                        };
                        let response = proxy.call(&tool, args, None, &ctx).instrument(span.clone()).await;
                        span.record("outcome", response.category.map_or("ok", Category::as_str));
                        call_value(response)
                    }
                    engine::HostOp::Search { query, limit, server } => {
                        let mut query = SearchQuery::new(query);
                        query.server = server;
                        if let Some(limit) = limit {
                            query.limit = limit.clamp(1, MAX_SEARCH_LIMIT);
                        }
                        match proxy.search_discovering(&query).await {
                            Ok(outcome) => Ok(Value::Array(
                                outcome
                                    .hits
                                    .iter()
                                    .map(|hit| {
                                        json!({
                                            "tool": hit.doc.name,
                                            "server": hit.doc.server,
                                            "description": hit.doc.description,
                                            "params": hit.doc.input_shape_within(SEARCH_SHAPE_CHARS),
                                        })
                                    })
                                    .collect(),
                            )),
                            Err(e) => Err(host_error(&e)),
                        }
                    }
                    engine::HostOp::Describe { tool } => match proxy.describe(&tool, None).await {
                        Ok(info) => {
                            let mut described = Map::new();
                            described.insert("tool".into(), Value::String(info.doc.name.clone()));
                            described.insert("server".into(), Value::String(info.doc.server.clone()));
                            described.insert("description".into(), Value::String(info.doc.description.clone()));
                            described.insert(
                                "params".into(),
                                Value::String(info.doc.input_shape_within(crate::DEFAULT_SHAPE_CHARS)),
                            );
                            described.insert("inputSchema".into(), info.doc.input_schema_value());
                            if let Some(output) = info.output_schema {
                                described.insert("outputSchema".into(), output);
                            }
                            Ok(Value::Object(described))
                        }
                        Err(e) => Err(host_error(&e)),
                    },
                }
            };
            match caller {
                Some(peer) => Box::pin(crate::forward::with_caller(peer, request)),
                None => Box::pin(request),
            }
        })
    }
}

/// A call's answer as the script sees it: `structuredContent` when present, else the text (images and other
/// binaries as the guard noted them); an error result throws.
fn call_value(response: ProxyResponse) -> Result<Value, engine::HostError> {
    if response.is_error() {
        let category = response.category.unwrap_or(Category::ToolError);
        let text = response.text();
        // The category is the error's own property; the text need not repeat it.
        let message = text
            .strip_suffix(&format!("\ncategory: {category}"))
            .unwrap_or(&text)
            .to_owned();
        return Err(engine::HostError {
            category: category.as_str().into(),
            message,
        });
    }
    Ok(match response.result.structured_content {
        Some(structured) => structured,
        None => Value::String(response.text()),
    })
}

fn host_error(e: &ProxyError) -> engine::HostError {
    let mut message = e.message.clone();
    for hint in &e.hints {
        message.push('\n');
        message.push_str(hint);
    }
    engine::HostError {
        category: e.category.as_str().into(),
        message,
    }
}
