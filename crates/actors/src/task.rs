//! Following a task (the 2026-07-28 tasks extension, `io.modelcontextprotocol/tasks`): a `tools/call` a server
//! answered with a task handle is polled with `tasks/get` at the server's suggested interval until it ends. Its
//! status messages reach the call's progress handler, its input requests are answered like a call's
//! `input_required` rounds (`tasks/update`), cancelling the call cancels the task (`tasks/cancel`), and the task's
//! result is the call's. A task still running when the call's time is up is left running and reported as
//! [`Error::TaskPending`], so the caller can follow it later ([`crate::RuntimeHandle::follow_task`]).

use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    CallToolResult, CancelTaskParams, CancelTaskRequest, ClientRequest, GetTaskParams, GetTaskRequest, ServerResult,
    Task, TaskPayload, UpdateTaskParams, UpdateTaskRequest,
};
use rmcp::service::Peer;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::call::{CallGuards, InputContext, fulfil, into_output};
use crate::catalog::CatalogTool;
use crate::error::{Error, Result};
use crate::job::ToolOutput;
use crate::progress::CallProgress;

/// Bounds of the polling interval, whatever the server suggests (default 1 s).
const POLL_MIN: Duration = Duration::from_millis(50);
const POLL_MAX: Duration = Duration::from_secs(5);
const POLL_DEFAULT: Duration = Duration::from_secs(1);
/// How long one `tasks/get`, `tasks/update` or `tasks/cancel` may take.
const TASK_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How many input rounds one task may ask for.
const MAX_TASK_INPUT_ROUNDS: usize = 8;

/// What a followed task watches besides its own state.
pub(crate) struct Follow<'a> {
    pub peer: &'a Peer<RoleClient>,
    pub tool: &'a CatalogTool,
    pub guards: &'a CallGuards,
    pub input: &'a InputContext,
    /// When the call's time is up (the task is then left running).
    pub deadline: Instant,
    pub cancel: Option<&'a CancellationToken>,
    pub progress: Option<&'a tokio::sync::mpsc::UnboundedSender<CallProgress>>,
}

/// Follows `task` to its end (see the module docs).
pub(crate) async fn follow(f: Follow<'_>, task: Task) -> Result<ToolOutput> {
    let server = f.tool.server.clone();
    let task_id = task.task_id.clone();
    let mut interval = poll_interval(&task);
    let mut last_message = task.status_message.clone();
    let mut polls = 0u32;
    let mut rounds = 0usize;
    tracing::debug!(%server, tool = %f.tool.original, %task_id, "the server runs the call as a task");
    loop {
        let never = CancellationToken::new();
        let cancel = f.cancel.unwrap_or(&never);
        tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                cancel_task(f.peer, &task_id).await;
                return Err(Error::Connection {
                    server,
                    message: format!("call to `{}` cancelled by the caller (task `{task_id}` cancelled)", f.tool.original),
                    source: None,
                });
            }
            _ = f.guards.stop.cancelled() => {
                cancel_task(f.peer, &task_id).await;
                return Err(Error::ShuttingDown);
            }
            _ = f.guards.dead.cancelled() => {
                return Err(Error::Connection {
                    server,
                    message: format!("the connection broke while task `{task_id}` ran"),
                    source: None,
                });
            }
            () = tokio::time::sleep_until(f.deadline) => {
                return Err(Error::TaskPending {
                    server,
                    tool: f.tool.original.clone(),
                    task_id,
                    status: last_message.unwrap_or_else(|| "working".into()),
                });
            }
            () = tokio::time::sleep(interval) => {}
        }
        polls += 1;
        let got = request(
            f.peer,
            ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new(&task_id))),
        )
        .await
        .map_err(|message| Error::Connection {
            server: server.clone(),
            message: format!("tasks/get for task `{task_id}`: {message}"),
            source: None,
        })?;
        let ServerResult::GetTaskResult(got) = got else {
            return Err(protocol(&server, "tasks/get", "an answer that is no task"));
        };
        let detailed = got.task;
        interval = poll_interval(&detailed.task);
        if detailed.task.status_message != last_message {
            last_message.clone_from(&detailed.task.status_message);
            if let Some(progress) = f.progress {
                let _ = progress.send(CallProgress {
                    progress: f64::from(polls),
                    total: None,
                    message: last_message.clone(),
                });
            }
        }
        match detailed.payload {
            TaskPayload::Working => {}
            TaskPayload::InputRequired { input_requests } => {
                rounds += 1;
                if rounds > MAX_TASK_INPUT_ROUNDS {
                    cancel_task(f.peer, &task_id).await;
                    return Err(Error::InputRequired {
                        server,
                        tool: f.tool.original.clone(),
                        message: format!("task `{task_id}` kept asking for input ({rounds} rounds)"),
                    });
                }
                let responses = match Box::pin(fulfil(&server, &f.tool.original, f.input, input_requests)).await {
                    Ok(r) => r,
                    Err(e) => {
                        cancel_task(f.peer, &task_id).await;
                        return Err(e);
                    }
                };
                let update = UpdateTaskRequest::new(UpdateTaskParams::new(&task_id, responses));
                request(f.peer, ClientRequest::UpdateTaskRequest(update))
                    .await
                    .map_err(|message| Error::Connection {
                        server: server.clone(),
                        message: format!("tasks/update for task `{task_id}`: {message}"),
                        source: None,
                    })?;
            }
            TaskPayload::Completed { result } => {
                let result: CallToolResult =
                    serde_json::from_value(serde_json::Value::Object(result)).map_err(|e| {
                        protocol(
                            &server,
                            "tasks/get",
                            &format!("a task result that is no tool result: {e}"),
                        )
                    })?;
                return into_output(f.tool, ServerResult::CallToolResult(result));
            }
            TaskPayload::Failed { error } => {
                let code = error.get("code").and_then(serde_json::Value::as_i64).unwrap_or(0);
                let message = error
                    .get("message")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("the task failed")
                    .to_owned();
                return Err(Error::Protocol {
                    server,
                    operation: "tools/call (task)".into(),
                    code: i32::try_from(code).unwrap_or(0),
                    message,
                });
            }
            TaskPayload::Cancelled => {
                return Err(Error::Connection {
                    server,
                    message: format!("the server cancelled task `{task_id}`"),
                    source: None,
                });
            }
            // A status newer than this build: keep polling until it is one pimcp knows.
            _ => {}
        }
    }
}

fn poll_interval(task: &Task) -> Duration {
    task.poll_interval_ms
        .map_or(POLL_DEFAULT, Duration::from_millis)
        .clamp(POLL_MIN, POLL_MAX)
}

fn protocol(server: &str, operation: &str, message: &str) -> Error {
    Error::Protocol {
        server: server.to_owned(),
        operation: operation.to_owned(),
        code: 0,
        message: message.to_owned(),
    }
}

/// One task request, bounded; the error as text.
async fn request(peer: &Peer<RoleClient>, request: ClientRequest) -> std::result::Result<ServerResult, String> {
    match tokio::time::timeout(TASK_REQUEST_TIMEOUT, peer.send_request(request)).await {
        Ok(Ok(result)) => Ok(result),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {}s", TASK_REQUEST_TIMEOUT.as_secs())),
    }
}

/// Asks the server to cancel the task (best effort: a task that ended meanwhile, or a server that is gone, is fine).
async fn cancel_task(peer: &Peer<RoleClient>, task_id: &str) {
    let cancel = CancelTaskRequest::new(CancelTaskParams::new(task_id));
    if let Err(e) = request(peer, ClientRequest::CancelTaskRequest(cancel)).await {
        tracing::debug!(%task_id, error = %e, "tasks/cancel failed");
    }
}
