//! Host callbacks: roots, elicitation and approval, with their fail-closed defaults.
#![allow(deprecated)] // roots are SEP-2577-deprecated but still requested by servers

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use pimcp_actors::{
    ApprovalDecision, ApprovalHandler, ApprovalRequest, CallOptions, ElicitationHandler, ErrorCategory, Handlers,
    RootsProvider, Runtime, RuntimeOptions,
};
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, Root};
use serde_json::json;

use super::support::*;

struct FixedRoots;

#[async_trait]
impl RootsProvider for FixedRoots {
    async fn roots(&self, _server: &str) -> Vec<Root> {
        vec![Root::new("file:///work/project")]
    }
}

struct Accept;

#[async_trait]
impl ElicitationHandler for Accept {
    async fn elicit(&self, _server: &str, _request: ElicitRequestParams) -> ElicitResult {
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"name": "Ada"}))
    }
}

/// Denies `a_*` tools, allows the rest for the session; counts how often it is asked.
struct Gate(Arc<AtomicUsize>);

#[async_trait]
impl ApprovalHandler for Gate {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalDecision {
        self.0.fetch_add(1, Ordering::SeqCst);
        if request.original == "add" {
            ApprovalDecision::Deny
        } else {
            ApprovalDecision::AllowForSession
        }
    }
}

async fn start_with_handlers(dir: &std::path::Path, config: serde_json::Value, handlers: Handlers) -> Runtime {
    let cfg = load(&config, dir);
    let mut opts = RuntimeOptions::new(cfg, dir.join("agent"), dir.join("data"));
    opts.tuning = tuning();
    opts.handlers = handlers;
    Runtime::start(opts).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_handlers_input_is_required_and_roots_are_empty() {
    let h = start(json!({"mcpServers": {"fx": stdio(&[])}})).await;
    let e =
        h.rt.call("fx_elicit", args(json!({"message": "name?"})), CallOptions::default())
            .await
            .unwrap_err();
    assert!(
        matches!(e.category(), ErrorCategory::InputRequired | ErrorCategory::ToolError),
        "{e:?}"
    );
    h.rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_and_elicitation_go_through_the_host_callbacks() {
    let dir = tempfile::tempdir().unwrap();
    let handlers = Handlers {
        roots: Some(Arc::new(FixedRoots)),
        elicitation: Some(Arc::new(Accept)),
        ..Handlers::default()
    };
    let rt = start_with_handlers(dir.path(), json!({"mcpServers": {"fx": stdio(&[])}}), handlers).await;
    let out = rt.call("fx_roots", None, CallOptions::default()).await.unwrap();
    assert!(out.text().contains("file:///work/project"), "{}", out.text());
    let out = rt
        .call("fx_elicit", args(json!({"message": "name?"})), CallOptions::default())
        .await
        .unwrap();
    assert!(out.text().contains("Ada"), "{}", out.text());
    rt.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_gates_calls_and_fails_closed() {
    let config = json!({"settings": {"approveTools": ["*echo", "*add"]}, "mcpServers": {"fx": stdio(&[])}});
    // No handler: there is nobody to ask, so the call fails closed.
    let h = start(config.clone()).await;
    let e =
        h.rt.call("fx_echo", args(json!({"text": "x"})), CallOptions::default())
            .await
            .unwrap_err();
    assert_eq!(e.category(), ErrorCategory::Approval, "{e}");
    // Ungated tools run.
    assert!(h.rt.call("fx_whoami", None, CallOptions::default()).await.is_ok());
    h.rt.shutdown(Duration::from_secs(10)).await;

    let dir = tempfile::tempdir().unwrap();
    let asked = Arc::new(AtomicUsize::new(0));
    let handlers = Handlers {
        approval: Some(Arc::new(Gate(asked.clone()))),
        ..Handlers::default()
    };
    let rt = start_with_handlers(dir.path(), config, handlers).await;
    let e = rt
        .call("fx_add", args(json!({"a": 1, "b": 2})), CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(e.category(), ErrorCategory::Approval);
    assert!(e.to_string().contains("declined"), "{e}");
    for _ in 0..3 {
        assert_eq!(
            rt.call("fx_echo", args(json!({"text": "ok"})), CallOptions::default())
                .await
                .unwrap()
                .text(),
            "ok"
        );
    }
    // Denied once + allowed for the session once.
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    rt.shutdown(Duration::from_secs(10)).await;
}
