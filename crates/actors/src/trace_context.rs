//! W3C trace context across pimcp: each upstream request carries the `traceparent` / `tracestate` of pimcp's span in
//! its `_meta`, and a host request's `_meta.traceparent` becomes the parent of pimcp's span, so one trace runs from
//! the host through pimcp to the server.
//!
//! The library crates do not depend on OpenTelemetry: the program that exports spans installs a [`Propagator`]
//! once ([`set_propagator`]; `pimcp-run` does when its OTLP exporter is on). Without one nothing is injected or
//! read, and pimcp's spans stay what they are.

use std::sync::OnceLock;

use rmcp::model::{MetaObject, RequestMetaObject};

/// The W3C trace context of a span, as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// The `traceparent` header value.
    pub traceparent: String,
    /// The `tracestate` header value, when there is one.
    pub tracestate: Option<String>,
}

/// Moves trace context between `tracing` spans and its W3C text form.
pub trait Propagator: Send + Sync + 'static {
    /// The context of `span`, when it is part of a trace.
    fn inject(&self, span: &tracing::Span) -> Option<TraceContext>;
    /// Makes the remote context `context` the parent of `span` (a span not yet entered).
    fn extract(&self, span: &tracing::Span, context: &TraceContext);
}

static PROPAGATOR: OnceLock<Box<dyn Propagator>> = OnceLock::new();

/// Installs the process's propagator; the first one wins. Returns false when one was installed before.
pub fn set_propagator(propagator: impl Propagator) -> bool {
    PROPAGATOR.set(Box::new(propagator)).is_ok()
}

/// Writes `span`'s context into `meta` (nothing without a propagator or a trace).
pub fn inject_into(meta: &mut MetaObject, span: &tracing::Span) {
    let Some(context) = PROPAGATOR.get().and_then(|p| p.inject(span)) else {
        return;
    };
    meta.set_traceparent(context.traceparent);
    if let Some(state) = context.tracestate {
        meta.set_tracestate(state);
    }
}

/// Makes the context a host sent in `meta` the parent of `span` (nothing without a propagator, or when `meta` has
/// no string `traceparent`).
pub fn extract_from(meta: &MetaObject, span: &tracing::Span) {
    let Some(propagator) = PROPAGATOR.get() else {
        return;
    };
    let Some(traceparent) = meta.get_traceparent() else {
        return;
    };
    let context = TraceContext {
        traceparent: traceparent.to_owned(),
        tracestate: meta.get_tracestate().map(str::to_owned),
    };
    propagator.extract(span, &context);
}

/// A request's `_meta` carrying `span`'s context, or `None` when there is nothing to carry.
pub(crate) fn request_meta(span: &tracing::Span) -> Option<RequestMetaObject> {
    let mut meta = RequestMetaObject::default();
    inject_into(&mut meta.0, span);
    (!meta.0.0.is_empty()).then_some(meta)
}
