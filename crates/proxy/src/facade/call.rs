//! Tool calls: resolution, argument validation with the cached validators, the call itself, and rendering the
//! result through output-schema validation and the output guard.

use std::sync::Arc;

use pimcp_actors::{CallOptions, CatalogTool, Error as RuntimeError, Resolution, ToolOutput};
use pimcp_surface::{
    ArgsValidator, Category, OutputValidator, Piece, ProxyError, apply_guard, check_not_nested, render_call_result,
};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use serde_json::{Map, Value};

use super::{CallContext, MAX_VALIDATORS, Proxy, ProxyResponse};

impl Proxy {
    /// Calls a tool: resolve, validate the arguments against its input schema before sending, approval (by the
    /// runtime, per `approveTools`), call, render, output guard. Never fails: errors are results with a category.
    pub async fn call(
        &self,
        tool: &str,
        args: Map<String, Value>,
        server: Option<&str>,
        ctx: &CallContext,
    ) -> ProxyResponse {
        // A name the current catalog knows resolves here, as the router would in that same snapshot: no round trip
        // through the router's mailbox. Anything else (fuzzy, ambiguous, not yet discovered) goes to the router.
        let found = match self.inner.runtime.catalog().resolve(tool, server) {
            Resolution::Found(resolved) => Some(resolved),
            _ => None,
        };
        if let Some(resolved) = found {
            return self.call_resolved(&resolved, args, ctx).await;
        }
        match self.inner.runtime.resolve(tool, server).await {
            Ok(resolved) => self.call_resolved(&resolved, args, ctx).await,
            Err(e) => self.runtime_error(e, server).into(),
        }
    }

    /// Calls an already resolved tool (direct tools go straight here).
    pub async fn call_resolved(
        &self,
        tool: &CatalogTool,
        args: Map<String, Value>,
        ctx: &CallContext,
    ) -> ProxyResponse {
        let mut args = args;
        let checked = match tool.input_schema() {
            Ok(schema) => {
                let validator = match self.cached_validator(tool, &schema) {
                    Some(validator) => validator,
                    None => {
                        // The schema must be compiled (the first call of this tool, or new metadata): a lazy server
                        // not started yet is asked to start first, and the compile runs while it spawns and
                        // initializes (the yield lets the server's actor take the request and start the process).
                        // `warm` leaves a server that is running, refused or backing off as it is: the call itself
                        // then reports its state as before.
                        if self.inner.runtime.warm(&tool.server).is_ok() {
                            tokio::task::yield_now().await;
                        }
                        self.compile_validator(tool, &schema)
                    }
                };
                check_args_with(&validator, &schema, &mut args)
            }
            // An unusable cached schema never blocks the call: the server validates, and connecting refreshes it.
            Err(e) => {
                tracing::warn!(error = %e, "skipping argument validation");
                Ok(())
            }
        };
        if let Err(e) = checked {
            return e.into();
        }
        let bridge = self.inner.bridge.get();
        // Routes the upstream's requests during this call to the host session that made it.
        let _in_flight = bridge.and_then(|b| b.begin_call(&tool.server, &tool.name));
        let refusals_before = bridge.map(|b| b.refusals(&tool.server));
        let outcome = self
            .inner
            .runtime
            .call(&tool.name, Some(args), call_options(tool, ctx))
            .await;
        match outcome {
            Ok(output) => self.render(tool, output),
            Err(RuntimeError::ToolError { output, .. }) => {
                let refused = match (bridge, refusals_before) {
                    (Some(b), Some(before)) => b.refusals(&tool.server) > before,
                    _ => false,
                };
                if refused {
                    let text = output.text();
                    return ProxyError::new(
                        Category::InputRequired,
                        format!(
                            "tool {:?} on server {:?} asked the host for input (sampling, elicitation) that the host \
                             did not declare it can give.",
                            tool.original, tool.server
                        ),
                    )
                    .with_hint(format!("The tool said: {}", one_line(&text, 300)))
                    .into();
                }
                self.render(tool, *output)
            }
            Err(e) => self.runtime_error(e, Some(&tool.server)).into(),
        }
    }

    /// Follows a task a call left running (`handle` = `<tool>:<task id>`, from the call's answer) until it ends or
    /// the call's time is up again; rendered like the call's own result.
    pub async fn follow_task(&self, handle: &str, ctx: &CallContext) -> ProxyResponse {
        let Some((name, task_id)) = handle.split_once(':').filter(|(t, id)| !t.is_empty() && !id.is_empty()) else {
            return ProxyError::new(
                Category::Validation,
                format!(
                    "task {handle:?} is not a task handle: it is `<tool>:<task id>`, as a call still running gives it."
                ),
            )
            .into();
        };
        let tool = match self.inner.runtime.catalog().resolve(name, None) {
            Resolution::Found(tool) => tool,
            _ => {
                return self
                    .runtime_error(
                        RuntimeError::UnknownTool {
                            name: name.to_owned(),
                            server: None,
                            available: Vec::new(),
                            suggestions: Vec::new(),
                        },
                        None,
                    )
                    .into();
            }
        };
        // The task's input requests reach the host session that follows it.
        let _in_flight = self
            .inner
            .bridge
            .get()
            .and_then(|b| b.begin_call(&tool.server, &tool.name));
        let opts = call_options(&tool, ctx);
        match self.inner.runtime.follow_task(&tool.name, task_id, opts).await {
            Ok(output) => self.render(&tool, output),
            Err(RuntimeError::ToolError { output, .. }) => self.render(&tool, *output),
            Err(e) => self.runtime_error(e, Some(&tool.server)).into(),
        }
    }

    /// The compiled validator of `tool` for this very schema, if there is one.
    fn cached_validator(
        &self,
        tool: &CatalogTool,
        input_schema: &Arc<rmcp::model::JsonObject>,
    ) -> Option<Arc<ArgsValidator>> {
        let cache = self
            .inner
            .validators
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cache
            .get(&tool.name)
            .filter(|(schema, _)| Arc::ptr_eq(schema, input_schema))
            .map(|(_, v)| v.clone())
    }

    /// Compiles (outside the cache's lock) and caches `tool`'s validator for `input_schema`.
    fn compile_validator(&self, tool: &CatalogTool, input_schema: &Arc<rmcp::model::JsonObject>) -> Arc<ArgsValidator> {
        let v = Arc::new(ArgsValidator::from_owned(
            &tool.name,
            Value::Object((**input_schema).clone()),
        ));
        let mut cache = self
            .inner
            .validators
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() >= MAX_VALIDATORS {
            cache.clear();
        }
        cache.insert(tool.name.clone(), (input_schema.clone(), v.clone()));
        v
    }

    /// `tool`'s compiled output schema, compiled on first use and again when the schema changes.
    fn output_validator(&self, tool: &CatalogTool, schema: &Arc<JsonObject>) -> Arc<OutputValidator> {
        let cached = self
            .inner
            .output_validators
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&tool.name)
            .filter(|(s, _)| Arc::ptr_eq(s, schema))
            .map(|(_, v)| v.clone());
        if let Some(v) = cached {
            return v;
        }
        let v = Arc::new(OutputValidator::new(Value::Object((**schema).clone())));
        let mut cache = self
            .inner
            .output_validators
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() >= MAX_VALIDATORS {
            cache.clear();
        }
        cache.insert(tool.name.clone(), (schema.clone(), v.clone()));
        v
    }

    fn render(&self, tool: &CatalogTool, output: ToolOutput) -> ProxyResponse {
        let is_error = output.is_error;
        let mut result = if is_error {
            CallToolResult::error(output.content)
        } else {
            CallToolResult::success(output.content)
        };
        result.structured_content = output.structured_content;
        let mut rendered = render_call_result(&result);
        let output_schema = if is_error {
            None
        } else {
            tool.output_schema().unwrap_or_else(|e| {
                tracing::warn!(error = %e, "skipping output validation");
                None
            })
        };
        if let Some(schema) = output_schema {
            let report = self
                .output_validator(tool, &schema)
                .report(result.structured_content.as_ref());
            if !report.valid {
                tracing::warn!(server = %tool.server, tool = %tool.original, "{}", report.summary());
                rendered
                    .pieces
                    .push(Piece::Text(format!("[note: {}]", report.summary())));
            }
        }
        let structured = result.structured_content.take();
        let guard = self.config().settings.output_guard;
        let guarded = apply_guard(rendered, guard.as_ref(), Some(&self.inner.spill));
        let report = guarded.report.clone();
        let mut result = guarded.into_call_result();
        // The upstream's structuredContent stays on the result (hosts and `pimcp-run call --json` read it) besides
        // its text copy, unless the guard cut the text: then the model's view is bounded and the full value is in
        // the spill file, so forwarding it whole would defeat the guard.
        if !report.truncated {
            result.structured_content = structured;
        }
        if is_error {
            // Like every proxy error: the category on the text's last line too (the guard never cuts it).
            let line = format!("category: {}", Category::ToolError);
            match result
                .content
                .iter_mut()
                .find_map(|c| c.as_text().is_some().then_some(c))
            {
                Some(block) => {
                    if let Some(text) = block.as_text() {
                        *block = ContentBlock::text(format!("{}\n{line}", text.text));
                    }
                }
                None => result.content.insert(0, ContentBlock::text(line)),
            }
        }
        ProxyResponse {
            category: is_error.then_some(Category::ToolError),
            result,
            guard: Some(report),
        }
    }
}

/// Checks a call's `args` with its tool's compiled validator (`schema` is what it was compiled from).
fn check_args_with(
    validator: &ArgsValidator,
    schema: &rmcp::model::JsonObject,
    args: &mut Map<String, Value>,
) -> std::result::Result<(), ProxyError> {
    // Only `tool`/`args` keys can be nested gateway parameters: the schema copy is skipped on ordinary calls.
    if args.contains_key("tool") || args.contains_key("args") {
        let schema_value = Value::Object(schema.clone());
        check_not_nested(args, &schema_value).map_err(ProxyError::from)?;
    }
    validator.check_in_place(args).map_err(ProxyError::from)
}

/// The first line of `text`, at most `max` characters.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut out: String = line.chars().take(max).collect();
    if line.chars().count() > max || text.lines().nth(1).is_some() {
        out.push('…');
    }
    out
}

/// The runtime's options for a call of `tool` made in `ctx`.
fn call_options(tool: &CatalogTool, ctx: &CallContext) -> CallOptions {
    CallOptions {
        server: Some(tool.server.clone()),
        timeout: ctx.timeout,
        cancel: ctx.cancel.clone(),
        progress: ctx.progress.clone(),
        ..CallOptions::default()
    }
}
