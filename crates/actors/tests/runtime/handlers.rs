//! Host callbacks: roots, elicitation, sampling and approval (of calls, and of sampling unless
//! `samplingAutoApprove`), with their fail-closed defaults.
#![allow(deprecated)] // roots are SEP-2577-deprecated but still requested by servers

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use pimcp_actors::{
    ApprovalDecision, ApprovalHandler, ApprovalKind, ApprovalRequest, CallOptions, ElicitationHandler, ErrorCategory,
    Handlers, RootsProvider, Runtime, RuntimeOptions, SamplingHandler,
};
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationAction, Root,
    SamplingMessage,
};
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

/// Never answers.
struct Silent;

#[async_trait]
impl ApprovalHandler for Silent {
    async fn approve(&self, _request: &ApprovalRequest) -> ApprovalDecision {
        std::future::pending().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_that_never_comes_refuses_the_call_after_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    let config = load(
        &json!({"settings": {"approveTools": ["*echo"]}, "mcpServers": {"fx": stdio(&[])}}),
        dir.path(),
    );
    let mut opts = RuntimeOptions::new(config, dir.path().join("agent"), dir.path().join("data"));
    opts.tuning = tuning();
    opts.tuning.approval_wait = Duration::from_millis(300);
    opts.handlers = Handlers {
        approval: Some(Arc::new(Silent)),
        ..Handlers::default()
    };
    let rt = Runtime::start(opts).await.unwrap();
    let e = rt
        .call("fx_echo", args(json!({"text": "x"})), CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(e.category(), ErrorCategory::Approval, "{e}");
    assert!(e.to_string().contains("no answer to the approval request"), "{e}");
    // The server keeps working for tools that need no approval.
    assert!(rt.call("fx_whoami", None, CallOptions::default()).await.is_ok());
    rt.shutdown(Duration::from_secs(10)).await;
}

struct Model;

#[async_trait]
impl SamplingHandler for Model {
    async fn create_message(
        &self,
        _server: &str,
        _params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, String> {
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text("four"),
            "host-model".to_owned(),
        ))
    }
}

/// Answers sampling approvals with `decision` and counts them; tool-call approvals are not expected.
struct SamplingGate(ApprovalDecision, Arc<AtomicUsize>);

#[async_trait]
impl ApprovalHandler for SamplingGate {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalDecision {
        assert_eq!(request.kind, ApprovalKind::Sampling, "{request:?}");
        assert_eq!(request.server, "fx");
        self.1.fetch_add(1, Ordering::SeqCst);
        self.0
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_is_approved_first_unless_sampling_auto_approve() {
    for protocol in ["legacy", "auto"] {
        for (decision, auto, works, asked) in [
            (ApprovalDecision::AllowOnce, false, true, 1),
            (ApprovalDecision::Deny, false, false, 1),
            // Nobody to ask (headless): refused, unless samplingAutoApprove, which never asks.
            (ApprovalDecision::InputRequired, false, false, 1),
            (ApprovalDecision::InputRequired, true, true, 0),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let count = Arc::new(AtomicUsize::new(0));
            let handlers = Handlers {
                sampling: Some(Arc::new(Model)),
                approval: Some(Arc::new(SamplingGate(decision, count.clone()))),
                ..Handlers::default()
            };
            let mut fx = stdio(&[]);
            fx["protocol"] = json!(protocol);
            let config = json!({"settings": {"samplingAutoApprove": auto}, "mcpServers": {"fx": fx}});
            let rt = start_with_handlers(dir.path(), config, handlers).await;
            let out = rt
                .call("fx_sample", args(json!({"prompt": "2+2?"})), CallOptions::default())
                .await;
            let case = format!("{protocol}, {decision:?}, samplingAutoApprove {auto}");
            match (&out, works) {
                (Ok(o), true) => assert!(o.text().contains("four"), "{case}: {}", o.text()),
                (Ok(o), false) => assert!(o.is_error || !o.text().contains("four"), "{case}: {}", o.text()),
                (Err(e), false) => {
                    let text = e.to_string();
                    if decision == ApprovalDecision::InputRequired {
                        assert!(text.contains("samplingAutoApprove"), "{case}: {text}");
                    }
                }
                (Err(e), true) => panic!("{case}: {e}"),
            }
            assert_eq!(count.load(Ordering::SeqCst), asked, "{case}");
            rt.shutdown(Duration::from_secs(10)).await;
        }
    }
}
