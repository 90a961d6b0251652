//! Logging and tracing of `pimcp-run`: human logs on stderr (`PIMCP_LOG`, else `RUST_LOG`, else `warn`),
//! and, only when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set, an OpenTelemetry
//! exporter that sends pimcp's spans over OTLP/HTTP (protobuf) from a batch processor thread. Without an endpoint no
//! exporter, thread or connection exists. [`shutdown`] flushes; it runs when the [`Telemetry`] guard drops. Exits
//! that bypass the guard (`std::process::exit`: the end of `--attach`, the second SIGINT/SIGTERM) call
//! [`shutdown_within`] first, which waits at most [`EXIT_FLUSH_BOUND`].
//!
//! Only pimcp's own spans are exported ([`EXPORTED_TARGETS`]): they carry metadata (server, tool, method, outcome,
//! durations), never arguments, results, headers or tokens. Third-party spans are not: process-wrap's spawn span
//! records the child's whole environment and rmcp logs whole messages at debug level. For the same reason the log
//! filter always caps those crates ([`LOG_CAP`]), whatever `PIMCP_LOG` asks for, and every log line passes
//! through [`pimcp_config::redact_text`] on its way to stderr ([`RedactedStderr`]): an HTTP error quoting a URL
//! with `?api_key=`, or an upstream's `WWW-Authenticate` echoing the token it was sent, is logged redacted.

use std::sync::Mutex;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::filter::{EnvFilter, FilterExt as _, LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{Layer as _, Registry};

/// The variables that turn the exporter on (the first one set and non-empty wins, as the OTLP spec says).
pub(crate) const ENDPOINT_VARS: [&str; 2] = ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"];
/// `service.name` unless `OTEL_SERVICE_NAME` says otherwise.
pub(crate) const SERVICE_NAME: &str = "pimcp-run";
/// Instrumentation scope of the tracer.
const TRACER_NAME: &str = "pimcp";
/// Crates whose spans (at `info` and above) are exported.
pub(crate) const EXPORTED_TARGETS: [&str; 5] = ["pimcp_actors", "pimcp_proxy", "pimcp_auth", "pimcp_cli", "pimcp_run"];
/// The most verbose level logged from third-party crates whatever the user's filter says: it keeps the secrets
/// and payloads they put into their own spans and events (process-wrap: the child's environment; rmcp at debug:
/// whole messages; HTTP stacks at trace: headers) out of the log.
pub(crate) const LOG_CAP: [(&str, LevelFilter); 6] = [
    ("process_wrap", LevelFilter::OFF),
    ("rmcp", LevelFilter::INFO),
    ("hyper", LevelFilter::INFO),
    ("hyper_util", LevelFilter::INFO),
    ("h2", LevelFilter::INFO),
    ("reqwest", LevelFilter::INFO),
];

/// How long an exit that cannot wait for the OTLP timeout (the end of `--attach`, a second signal) waits for the
/// spans to be flushed.
pub(crate) const EXIT_FLUSH_BOUND: Duration = Duration::from_secs(2);

/// The tracer provider, kept for [`shutdown`].
static PROVIDER: Mutex<Option<SdkTracerProvider>> = Mutex::new(None);

/// Flushes and shuts the exporter down when dropped (see [`shutdown`]).
#[derive(Debug)]
#[must_use = "dropping the guard flushes the exporter"]
pub(crate) struct Telemetry;

impl Drop for Telemetry {
    fn drop(&mut self) {
        shutdown();
    }
}

/// Installs the global subscriber: stderr logs, plus the OTLP exporter when an endpoint is configured. An exporter
/// that cannot be built is reported on stderr and left out; logging still works.
pub(crate) fn init() -> Telemetry {
    let env = |k: &str| std::env::var(k).ok();
    let otel = if exporter_wanted(env) {
        match otel_layer(service_name(env)) {
            Ok((layer, provider)) => {
                set_provider(Some(provider));
                pimcp_actors::trace_context::set_propagator(W3cPropagator);
                Some(layer)
            }
            Err(e) => {
                errln!("pimcp-run: OpenTelemetry export disabled: {e}");
                None
            }
        }
    } else {
        None
    };
    let ansi = crate::output::colour_allowed(
        std::io::IsTerminal::is_terminal(&std::io::stderr()),
        std::env::var("NO_COLOR").ok().as_deref(),
        std::env::var("TERM").ok().as_deref(),
    );
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(RedactedStderr)
        .with_target(false)
        .with_filter(log_filter(env("PIMCP_LOG").or_else(|| env("RUST_LOG")).as_deref()).and(log_cap()));
    // The OTel layer sits directly on the registry (its type says so); each layer has its own filter, so the
    // exporter sees pimcp's spans even when logs show only warnings.
    let _ = tracing_subscriber::registry().with(otel).with(fmt).try_init();
    Telemetry
}

/// The stderr log writer: each event is formatted into a buffer, redacted (secret values resolved in this process,
/// URL query values and passwords, `Bearer`/`Basic` credentials) and written in one piece.
struct RedactedStderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for RedactedStderr {
    type Writer = RedactedEvent;

    fn make_writer(&'a self) -> RedactedEvent {
        RedactedEvent(Vec::new())
    }
}

/// One event's formatted text, written to stderr when dropped.
struct RedactedEvent(Vec<u8>);

impl std::io::Write for RedactedEvent {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for RedactedEvent {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            let text = String::from_utf8_lossy(&self.0);
            // A closed stderr loses the line, never the process (see `output::write_stderr`).
            let _ = std::io::Write::write_all(
                &mut std::io::stderr().lock(),
                pimcp_config::redact_text(&text).as_bytes(),
            );
        }
    }
}

/// Flushes pending spans and stops the exporter (blocking, bounded by the OTLP timeout). Idempotent; a no-op
/// without an exporter. Call it outside async code.
pub(crate) fn shutdown() {
    let provider = match PROVIDER.lock() {
        Ok(mut g) => g.take(),
        Err(p) => p.into_inner().take(),
    };
    if let Some(provider) = provider
        && let Err(e) = provider.shutdown()
    {
        errln!("pimcp-run: flushing OpenTelemetry spans failed: {e}");
    }
}

/// [`shutdown`], waiting at most `bound` for it (the OTLP timeout may be longer; a collector that does not answer
/// must not hold up an exit). Returns whether the flush finished in time; call it right before
/// `std::process::exit`. Safe on a tokio worker thread: the flush runs on a thread of its own.
pub(crate) fn shutdown_within(bound: Duration) -> bool {
    let has_provider = match PROVIDER.lock() {
        Ok(g) => g.is_some(),
        Err(p) => p.into_inner().is_some(),
    };
    if !has_provider {
        return true;
    }
    let (done, finished) = std::sync::mpsc::channel();
    let flush = std::thread::Builder::new()
        .name("pimcp-otel-flush".into())
        .spawn(move || {
            shutdown();
            let _ = done.send(());
        });
    match flush {
        Ok(_) => finished.recv_timeout(bound).is_ok(),
        Err(e) => {
            errln!("pimcp-run: cannot start the OpenTelemetry flush: {e}");
            false
        }
    }
}

fn set_provider(provider: Option<SdkTracerProvider>) {
    match PROVIDER.lock() {
        Ok(mut g) => *g = provider,
        Err(p) => *p.into_inner() = provider,
    }
}

/// An OTLP endpoint is configured and the SDK is not disabled (`OTEL_SDK_DISABLED=true`).
pub(crate) fn exporter_wanted(env: impl Fn(&str) -> Option<String>) -> bool {
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    !disabled
        && ENDPOINT_VARS
            .iter()
            .any(|k| env(k).is_some_and(|v| !v.trim().is_empty()))
}

fn service_name(env: impl Fn(&str) -> Option<String>) -> Option<String> {
    // OTEL_SERVICE_NAME is read by the SDK's resource detector; only fill in ours when it is absent.
    env("OTEL_SERVICE_NAME")
        .filter(|v| !v.trim().is_empty())
        .map_or_else(|| Some(SERVICE_NAME.to_owned()), |_| None)
}

/// The filter of exported spans: pimcp's crates at `info`.
pub(crate) fn exported_targets() -> Targets {
    EXPORTED_TARGETS
        .iter()
        .fold(Targets::new(), |t, target| t.with_target(*target, LevelFilter::INFO))
}

/// The user's log filter (`PIMCP_LOG` / `RUST_LOG` syntax), or `warn` when unset or unparsable.
pub(crate) fn log_filter(spec: Option<&str>) -> EnvFilter {
    spec.map(str::trim)
        .filter(|s| !s.is_empty())
        .and_then(|s| EnvFilter::try_new(s).ok())
        .unwrap_or_else(|| EnvFilter::new("warn"))
}

/// [`LOG_CAP`] as a filter that must also pass (everything else is left to [`log_filter`]).
pub(crate) fn log_cap() -> Targets {
    LOG_CAP
        .iter()
        .fold(Targets::new().with_default(LevelFilter::TRACE), |t, (target, level)| {
            t.with_target(*target, *level)
        })
}

type OtelLayer = tracing_subscriber::filter::Filtered<
    tracing_opentelemetry::OpenTelemetryLayer<Registry, opentelemetry_sdk::trace::Tracer>,
    Targets,
    Registry,
>;

/// The exporter (endpoint, headers, timeout and compression from the `OTEL_EXPORTER_OTLP_*` variables; a base
/// endpoint gets `/v1/traces` appended) behind a batch processor, and the layer that feeds it.
fn otel_layer(service: Option<String>) -> anyhow::Result<(OtelLayer, SdkTracerProvider)> {
    if let Ok(protocol) =
        std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        && protocol.trim() != "http/protobuf"
    {
        errln!("pimcp-run: OTLP protocol {protocol:?} is not supported; exporting with http/protobuf");
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()?;
    let mut resource = Resource::builder().with_attribute(opentelemetry::KeyValue::new(
        "service.version",
        env!("CARGO_PKG_VERSION"),
    ));
    if let Some(name) = service {
        resource = resource.with_service_name(name);
    }
    // The batch processor exports from its own thread with the blocking reqwest client: safe under any runtime.
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer(TRACER_NAME))
        .with_filter(exported_targets());
    Ok((layer, provider))
}

/// W3C trace context through OpenTelemetry, for [`pimcp_actors::trace_context`]: installed with the exporter, so
/// that a host's `traceparent` parents pimcp's spans and each upstream request carries pimcp's.
struct W3cPropagator;

impl pimcp_actors::trace_context::Propagator for W3cPropagator {
    fn inject(&self, span: &tracing::Span) -> Option<pimcp_actors::trace_context::TraceContext> {
        use opentelemetry::propagation::TextMapPropagator as _;
        use opentelemetry::trace::TraceContextExt as _;
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        let context = span.context();
        if !context.span().span_context().is_valid() {
            return None;
        }
        let mut carrier = std::collections::HashMap::new();
        opentelemetry_sdk::propagation::TraceContextPropagator::new().inject_context(&context, &mut carrier);
        Some(pimcp_actors::trace_context::TraceContext {
            traceparent: carrier.remove("traceparent")?,
            tracestate: carrier.remove("tracestate").filter(|s| !s.is_empty()),
        })
    }

    fn extract(&self, span: &tracing::Span, context: &pimcp_actors::trace_context::TraceContext) {
        use opentelemetry::propagation::TextMapPropagator as _;
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        let mut carrier = std::collections::HashMap::new();
        carrier.insert("traceparent".to_owned(), context.traceparent.clone());
        if let Some(state) = &context.tracestate {
            carrier.insert("tracestate".to_owned(), state.clone());
        }
        let parent = opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
        if let Err(e) = span.set_parent(parent) {
            tracing::debug!(error = %e, "the host's trace context could not parent the span");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
        move |k| pairs.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn the_exporter_exists_only_with_an_endpoint() {
        assert!(!exporter_wanted(env_of(&[])));
        assert!(!exporter_wanted(env_of(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])));
        assert!(exporter_wanted(env_of(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://127.0.0.1:4318"
        )])));
        assert!(exporter_wanted(env_of(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://127.0.0.1:4318/v1/traces"
        )])));
        assert!(!exporter_wanted(env_of(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_SDK_DISABLED", "TRUE"),
        ])));
    }

    #[test]
    fn service_name_defers_to_otel_service_name() {
        assert_eq!(service_name(env_of(&[])).as_deref(), Some(SERVICE_NAME));
        assert_eq!(service_name(env_of(&[("OTEL_SERVICE_NAME", "gateway")])), None);
    }

    #[test]
    fn the_log_cap_keeps_third_party_payloads_out() {
        let cap = log_cap();
        assert!(!cap.would_enable("process_wrap::tokio::process_group", &tracing::Level::ERROR));
        assert!(!cap.would_enable("rmcp::service", &tracing::Level::DEBUG));
        assert!(cap.would_enable("rmcp::service", &tracing::Level::INFO));
        assert!(!cap.would_enable("h2::codec", &tracing::Level::TRACE));
        assert!(cap.would_enable("pimcp_actors::server", &tracing::Level::TRACE));
    }

    #[test]
    fn the_log_filter_defaults_to_warnings() {
        assert_eq!(log_filter(None).max_level_hint(), Some(LevelFilter::WARN));
        assert_eq!(log_filter(Some("")).max_level_hint(), Some(LevelFilter::WARN));
        assert_eq!(log_filter(Some("debug")).max_level_hint(), Some(LevelFilter::DEBUG));
        // An unparsable spec falls back to warnings rather than to nothing.
        assert_eq!(log_filter(Some("=[")).max_level_hint(), Some(LevelFilter::WARN));
    }

    #[test]
    fn only_pimcp_targets_are_exported() {
        let t = exported_targets();
        assert!(t.would_enable("pimcp_actors::server", &tracing::Level::INFO));
        assert!(!t.would_enable("pimcp_actors::server", &tracing::Level::DEBUG));
        assert!(!t.would_enable("process_wrap::tokio::process_group", &tracing::Level::INFO));
        assert!(!t.would_enable("rmcp::service", &tracing::Level::INFO));
        assert!(!t.would_enable("ractor::actor", &tracing::Level::INFO));
    }
}
