//! The `mcpScript` sandbox: one QuickJS runtime (through `rquickjs`) per script, on a thread of its own, whose only
//! way out is the `tools` bridge.
//!
//! The context has the language and its standard objects (`JSON`, `Promise`, `Math`, `Date`, …) and nothing of an
//! OS: no `require`, `process`, `fetch`, timers or `std`/`os` modules, and no module loader (an `import` fails). The
//! prelude ([`PRELUDE`]) defines `tools`, `console`, `sleep` and `ToolError` over five host functions and then
//! removes those functions from the global object. Limits are the engine's own: a memory limit on the runtime's
//! allocator, a bounded stack, and an interrupt handler that stops any JavaScript (a loop, a chain of promises) once
//! the wall time is over or the caller cancelled; an `await` on a tool call is bounded by the same deadline outside
//! the engine. A script that hits a limit ends with its error; the process, and every other call, go on.
//!
//! Tool calls leave the sandbox as [`HostOp`]s, run by the caller's [`Host`] on the caller's tokio runtime (where the
//! runtime and its servers live); at most `max_in_flight` at once and `max_calls` per script.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use pimcp_config::ScriptLimits;
use rquickjs::prelude::Async;
use rquickjs::{AsyncContext, AsyncRuntime, CatchResultExt, CaughtError, Ctx, Function, Promise};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::{ScriptCall, ScriptError, ScriptOutcome};

/// The host side of `tools`: defines `tools`, `console`, `sleep` and `ToolError`, then deletes the raw host functions
/// from the global object so that scripts reach the host only through these.
const PRELUDE: &str = include_str!("prelude.js");

/// How much `console` output one script keeps; lines beyond it are counted, not kept.
const MAX_LOG_BYTES: usize = 256 * 1024;
/// The JavaScript stack (deep recursion ends in a `RangeError`, not in a crash).
const MAX_STACK_BYTES: usize = 1024 * 1024;

/// One request a script makes of the host.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum HostOp {
    /// `tools.call(tool, args)`.
    Call { tool: String, args: Map<String, Value> },
    /// `tools.search(query, {limit, server})`.
    Search {
        query: String,
        limit: Option<usize>,
        server: Option<String>,
    },
    /// `tools.describe(tool)`.
    Describe { tool: String },
}

/// Why a host request failed: thrown in the script as a `ToolError` with this category.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostError {
    pub category: String,
    pub message: String,
}

/// Runs host requests on the caller's runtime; the token is cancelled when the script ends.
pub(crate) type Host =
    Arc<dyn Fn(HostOp, CancellationToken) -> BoxFuture<'static, Result<Value, HostError>> + Send + Sync>;

/// Runs `code` (the body of an async function) to its end on the current thread, which it blocks: call it from a
/// blocking context (`spawn_blocking`, a thread of its own). `host` requests run on `main`.
pub(crate) fn run_blocking(
    code: &str,
    limits: ScriptLimits,
    host: Host,
    main: tokio::runtime::Handle,
    cancel: CancellationToken,
) -> ScriptOutcome {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_time().build() {
        Ok(runtime) => runtime,
        Err(e) => return ScriptOutcome::failed(ScriptError::Engine(format!("cannot start the script's runtime: {e}"))),
    };
    runtime.block_on(run(code, limits, host, main, cancel))
}

/// What the host functions of one script share (the engine thread only).
struct Shared {
    limits: ScriptLimits,
    deadline: Instant,
    host: Host,
    main: tokio::runtime::Handle,
    /// Cancelled when the script ends: its calls still in flight are abandoned.
    calls_done: CancellationToken,
    in_flight: tokio::sync::Semaphore,
    started_calls: Cell<u32>,
    calls: RefCell<Vec<ScriptCall>>,
    logs: RefCell<Vec<String>>,
    log_bytes: Cell<usize>,
    dropped_logs: Cell<usize>,
}

async fn run(
    code: &str,
    limits: ScriptLimits,
    host: Host,
    main: tokio::runtime::Handle,
    cancel: CancellationToken,
) -> ScriptOutcome {
    let deadline = Instant::now() + limits.timeout;
    let engine = match AsyncRuntime::new() {
        Ok(engine) => engine,
        Err(e) => return ScriptOutcome::failed(ScriptError::Engine(e.to_string())),
    };
    engine.set_memory_limit(limits.memory_bytes).await;
    engine.set_max_stack_size(MAX_STACK_BYTES).await;
    let stop = cancel.clone();
    engine
        .set_interrupt_handler(Some(Box::new(move || {
            stop.is_cancelled() || Instant::now() >= deadline
        })))
        .await;
    let context = match AsyncContext::full(&engine).await {
        Ok(context) => context,
        Err(e) => return ScriptOutcome::failed(ScriptError::Engine(e.to_string())),
    };
    let shared = Rc::new(Shared {
        limits,
        deadline,
        host,
        main,
        calls_done: CancellationToken::new(),
        in_flight: tokio::sync::Semaphore::new(limits.max_in_flight.max(1)),
        started_calls: Cell::new(0),
        calls: RefCell::new(Vec::new()),
        logs: RefCell::new(Vec::new()),
        log_bytes: Cell::new(0),
        dropped_logs: Cell::new(0),
    });
    let source = format!(
        "(async () => {{{code}\n}})().then(v => {{ const s = JSON.stringify(v === undefined ? null : v); return s === undefined ? 'null' : s; }})"
    );
    let script = {
        let shared = shared.clone();
        context.async_with(async move |ctx| evaluate(&ctx, &shared, &source).await)
    };
    let value = tokio::select! {
        value = script => value,
        () = tokio::time::sleep_until(deadline.into()) => Err(ScriptError::Timeout(limits.timeout)),
        () = cancel.cancelled() => Err(ScriptError::Cancelled),
    };
    // An interrupt surfaces as an exception; name it by its cause.
    let value = match value {
        Err(ScriptError::Thrown { ref message, .. }) if message == "interrupted" => Err(if cancel.is_cancelled() {
            ScriptError::Cancelled
        } else {
            ScriptError::Timeout(limits.timeout)
        }),
        other => other,
    };
    shared.calls_done.cancel();
    ScriptOutcome {
        value,
        logs: shared.logs.take(),
        dropped_logs: shared.dropped_logs.get(),
        calls: shared.calls.take(),
    }
}

/// Installs the host functions and the prelude, runs the script and awaits its promise.
async fn evaluate<'js>(ctx: &Ctx<'js>, shared: &Rc<Shared>, source: &str) -> Result<Value, ScriptError> {
    install(ctx, shared).map_err(|e| ScriptError::Engine(format!("cannot install the tools bridge: {e}")))?;
    ctx.eval::<(), _>(PRELUDE)
        .catch(ctx)
        .map_err(|e| ScriptError::Engine(format!("the prelude failed: {e}")))?;
    let promise: Promise = ctx.eval(source).catch(ctx).map_err(|e| failure(e, shared.limits))?;
    let text: String = promise
        .into_future()
        .await
        .catch(ctx)
        .map_err(|e| failure(e, shared.limits))?;
    serde_json::from_str(&text).map_err(|e| ScriptError::Engine(format!("the result is not JSON: {e}")))
}

/// An uncaught exception as a [`ScriptError`], told apart by what the engine says.
fn failure(caught: CaughtError<'_>, limits: ScriptLimits) -> ScriptError {
    match caught {
        CaughtError::Exception(exception) => {
            let mut message = exception.message().unwrap_or_default();
            let name: String = exception.get("name").unwrap_or_else(|_| "Error".into());
            let category: Option<String> = exception.get("category").ok().flatten();
            if message == "out of memory" {
                ScriptError::Memory(limits.memory_bytes)
            } else if message.contains("call stack size exceeded") || message == "stack overflow" {
                ScriptError::Stack
            } else {
                // Where in the script: the first frame of the script's own source (its line 1 is the code's line 1).
                let stack: String = exception.get("stack").unwrap_or_default();
                if let Some(line) = script_line(&stack).filter(|_| message != "interrupted") {
                    message.push_str(&format!(" (line {line})"));
                }
                ScriptError::Thrown {
                    name,
                    message,
                    category,
                }
            }
        }
        CaughtError::Value(value) => ScriptError::Thrown {
            name: "a value".into(),
            message: value
                .as_string()
                .and_then(|s| s.to_string().ok())
                .unwrap_or_else(|| format!("{:?}", value.type_of())),
            category: None,
        },
        CaughtError::Error(rquickjs::Error::Allocation) => ScriptError::Memory(limits.memory_bytes),
        CaughtError::Error(e) => ScriptError::Engine(e.to_string()),
    }
}

/// The line of the script a stack trace points at first (`eval_script:LINE:COLUMN`).
fn script_line(stack: &str) -> Option<u32> {
    let at = stack.find("eval_script:")? + "eval_script:".len();
    stack[at..].split(':').next()?.parse().ok()
}

/// The five raw host functions the prelude wraps (and then deletes).
fn install<'js>(ctx: &Ctx<'js>, shared: &Rc<Shared>) -> rquickjs::Result<()> {
    let globals = ctx.globals();
    let s = shared.clone();
    globals.set(
        "__host_call",
        Function::new(
            ctx.clone(),
            Async(move |tool: String, args: String| call(s.clone(), tool, args)),
        )?,
    )?;
    let s = shared.clone();
    globals.set(
        "__host_search",
        Function::new(
            ctx.clone(),
            Async(move |query: String, options: String| {
                let options: Map<String, Value> = serde_json::from_str(&options).unwrap_or_default();
                let op = HostOp::Search {
                    query,
                    limit: options.get("limit").and_then(Value::as_u64).map(|n| n as usize),
                    server: options.get("server").and_then(Value::as_str).map(str::to_owned),
                };
                request(s.clone(), op)
            }),
        )?,
    )?;
    let s = shared.clone();
    globals.set(
        "__host_describe",
        Function::new(
            ctx.clone(),
            Async(move |tool: String| request(s.clone(), HostOp::Describe { tool })),
        )?,
    )?;
    let s = shared.clone();
    globals.set(
        "__host_log",
        Function::new(ctx.clone(), move |line: String| {
            let used = s.log_bytes.get() + line.len() + 1;
            if used > MAX_LOG_BYTES {
                s.dropped_logs.set(s.dropped_logs.get() + 1);
            } else {
                s.log_bytes.set(used);
                s.logs.borrow_mut().push(line);
            }
        })?,
    )?;
    let s = shared.clone();
    globals.set(
        "__host_sleep",
        Function::new(
            ctx.clone(),
            Async(move |ms: f64| {
                // A sleep past the deadline is cut there by the script's own deadline (a timeout), never waited out.
                let wanted = Duration::from_millis(if ms.is_finite() && ms > 0.0 { ms as u64 } else { 0 });
                let until = (Instant::now() + wanted).min(s.deadline + Duration::from_secs(1));
                async move {
                    tokio::time::sleep_until(until.into()).await;
                    rquickjs::Result::Ok(())
                }
            }),
        )?,
    )?;
    Ok(())
}

/// `tools.call`: counted against `maxCalls`, bounded by `max_in_flight`, recorded for the trace.
async fn call(shared: Rc<Shared>, tool: String, args: String) -> rquickjs::Result<String> {
    let n = shared.started_calls.get() + 1;
    if n > shared.limits.max_calls {
        return Ok(error_answer(
            "script",
            &format!(
                "this script made {} tool calls already, its limit (settings.scriptMode.maxCalls); combine the work \
                 into fewer calls or split the script",
                shared.limits.max_calls
            ),
        ));
    }
    shared.started_calls.set(n);
    let args = match serde_json::from_str::<Value>(&args) {
        Ok(Value::Object(args)) => args,
        Ok(_) => {
            return Ok(error_answer(
                "validation",
                "tools.call(name, args): args must be an object",
            ));
        }
        Err(e) => {
            return Ok(error_answer(
                "validation",
                &format!("tools.call: the arguments are not JSON: {e}"),
            ));
        }
    };
    let Ok(_permit) = shared.in_flight.acquire().await else {
        return Ok(error_answer("script", "the script has ended"));
    };
    let started = Instant::now();
    let answer = dispatch(
        &shared,
        HostOp::Call {
            tool: tool.clone(),
            args,
        },
    )
    .await;
    shared.calls.borrow_mut().push(ScriptCall {
        tool,
        category: answer.as_ref().err().map(|e| e.category.clone()),
        elapsed: started.elapsed(),
    });
    Ok(encode(answer))
}

/// `tools.search` and `tools.describe`: not counted as calls.
async fn request(shared: Rc<Shared>, op: HostOp) -> rquickjs::Result<String> {
    Ok(encode(dispatch(&shared, op).await))
}

/// Runs `op` on the caller's runtime and waits for it (the deadline and the caller's cancellation end the script
/// around this wait).
async fn dispatch(shared: &Shared, op: HostOp) -> Result<Value, HostError> {
    let task = shared.main.spawn((shared.host)(op, shared.calls_done.child_token()));
    match task.await {
        Ok(answer) => answer,
        Err(e) => Err(HostError {
            category: "other".into(),
            message: format!("the request failed inside pimcp: {e}"),
        }),
    }
}

/// The JSON text the prelude's `answer` reads: `{"ok": value}` or `{"error": {category, message}}`.
fn encode(answer: Result<Value, HostError>) -> String {
    match answer {
        Ok(value) => json!({ "ok": value }).to_string(),
        Err(e) => error_answer(&e.category, &e.message),
    }
}

fn error_answer(category: &str, message: &str) -> String {
    json!({ "error": { "category": category, "message": message } }).to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::*;

    fn limits() -> ScriptLimits {
        ScriptLimits::DEFAULT.with_max_in_flight(3)
    }

    async fn run_on_blocking(code: &'static str, host: Host, cancel: CancellationToken) -> ScriptOutcome {
        let main = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || run_blocking(code, limits(), host, main, cancel))
            .await
            .unwrap()
    }

    /// `Promise.all` over more calls than may run at once: they all run, never more than the bound together.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_in_flight_are_bounded() {
        let now = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let host: Host = {
            let (now, most) = (now.clone(), most.clone());
            Arc::new(move |_op, _cancel| {
                let (now, most) = (now.clone(), most.clone());
                Box::pin(async move {
                    let running = now.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(running, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                    Ok(json!(1))
                })
            })
        };
        let outcome = run_on_blocking(
            "const all = await Promise.all(Array.from({length: 12}, () => tools.call('t', {}))); \
             return all.reduce((a, b) => a + b, 0);",
            host,
            CancellationToken::new(),
        )
        .await;
        assert_eq!(outcome.value, Ok(json!(12)));
        assert_eq!(outcome.calls.len(), 12);
        assert_eq!(most.load(Ordering::SeqCst), 3, "never more than max_in_flight at once");
    }

    /// The caller's cancellation ends the script at once and abandons its call in flight.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancelling_ends_the_script_and_its_calls() {
        let started = Arc::new(tokio::sync::Notify::new());
        let abandoned = Arc::new(AtomicBool::new(false));
        let host: Host = {
            let (started, abandoned) = (started.clone(), abandoned.clone());
            Arc::new(move |_op, cancel: CancellationToken| {
                let (started, abandoned) = (started.clone(), abandoned.clone());
                Box::pin(async move {
                    started.notify_one();
                    cancel.cancelled().await;
                    abandoned.store(true, Ordering::SeqCst);
                    Ok(Value::Null)
                })
            })
        };
        let cancel = CancellationToken::new();
        let script = tokio::spawn(run_on_blocking("await tools.call('t', {});", host, cancel.clone()));
        started.notified().await;
        cancel.cancel();
        let outcome = script.await.unwrap();
        assert_eq!(outcome.value, Err(ScriptError::Cancelled));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !abandoned.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "the call in flight was not cancelled");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// `console` output past the cap is counted, not kept.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn console_output_is_capped() {
        let host: Host = Arc::new(|_op, _cancel| Box::pin(async { Ok(Value::Null) }));
        let outcome = run_on_blocking(
            "for (let i = 0; i < 100000; i++) console.log('x'.repeat(99)); return 1;",
            host,
            CancellationToken::new(),
        )
        .await;
        assert_eq!(outcome.value, Ok(json!(1)));
        assert_eq!(outcome.logs.len(), MAX_LOG_BYTES / 100);
        assert_eq!(outcome.logs.len() + outcome.dropped_logs, 100_000);
    }
}
