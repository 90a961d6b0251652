//! The MCP handshake shared by every transport: which rmcp lifecycle to run for a protocol mode, what was
//! negotiated, and the startup deadline / cancellation wrapper.

use std::future::Future;

use pimcp_config::ProtocolMode;
use rmcp::model::{ProtocolVersion, ServerCapabilities};
use rmcp::service::{ClientInitializeError, RunningService};
use rmcp::{ClientHandler, ClientLifecycleMode, RoleClient};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Era;

/// The rmcp lifecycle for a configured protocol mode and the remembered era.
/// `legacy` → `initialize`; `2026-07-28` → `server/discover` only; `auto` → the remembered era if any, else
/// `server/discover` falling back to `initialize`.
pub(crate) fn lifecycle(mode: ProtocolMode, hint: Option<Era>) -> ClientLifecycleMode {
    let discover = discover_only;
    match (mode, hint) {
        (ProtocolMode::Legacy, _) | (ProtocolMode::Auto, Some(Era::Legacy)) => ClientLifecycleMode::Initialize,
        (ProtocolMode::Stateless20260728, _) => discover(),
        // A remembered modern era still uses Auto: the discover probe is what a modern server answers first anyway,
        // and a server that was downgraded since then still connects.
        (ProtocolMode::Auto, Some(Era::Stateless) | None) => ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        },
    }
}

/// `server/discover` only, for a server known to speak 2026-07-28.
pub(crate) fn discover_only() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

/// The era of a negotiated protocol version.
pub(crate) fn era_of(version: &ProtocolVersion) -> Era {
    if version.has_initialize() {
        Era::Legacy
    } else {
        Era::Stateless
    }
}

/// What the handshake established.
pub(crate) struct Negotiated {
    pub era: Era,
    pub protocol_version: String,
    pub server_info: Option<rmcp::model::Implementation>,
    pub capabilities: ServerCapabilities,
    pub instructions: Option<String>,
}

pub(crate) fn negotiated<H: ClientHandler>(client: &RunningService<RoleClient, H>) -> Option<Negotiated> {
    let info = client.peer_info()?;
    Some(Negotiated {
        era: era_of(&info.protocol_version),
        protocol_version: info.protocol_version.as_str().to_owned(),
        server_info: info.server_info.clone(),
        capabilities: info.capabilities.clone(),
        instructions: info.instructions.clone(),
    })
}

/// Why a bounded step did not finish.
pub(crate) enum Abort {
    Timeout,
    Cancelled,
}

/// Runs `fut` until `deadline` or cancellation.
pub(crate) async fn bounded<F: Future>(
    deadline: Instant,
    cancel: &CancellationToken,
    fut: F,
) -> Result<F::Output, Abort> {
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(Abort::Cancelled),
        _ = tokio::time::sleep_until(deadline) => Err(Abort::Timeout),
        out = fut => Ok(out),
    }
}

/// A one-line description of a failed handshake, free of transport internals where possible.
pub(crate) fn describe(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::ConnectionClosed(_) => "the connection closed during the handshake".to_owned(),
        ClientInitializeError::JsonRpcError(data) => {
            format!(
                "the server rejected the handshake: {} (code {})",
                data.message, data.code.0
            )
        }
        ClientInitializeError::NoCompatibleProtocolVersion { server_supported, .. } => format!(
            "no common protocol version (the server supports {})",
            server_supported
                .iter()
                .map(ProtocolVersion::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => {
            format!("server/discover and initialize both failed: {}", describe(fallback))
        }
        ClientInitializeError::TransportError { context, .. } => format!("transport error ({context})"),
        ClientInitializeError::Cancelled => "the handshake was cancelled".to_owned(),
        other => format!("unexpected handshake response: {}", truncate(&other.to_string(), 300)),
    }
}

pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_follows_mode_and_hint() {
        assert_eq!(
            lifecycle(ProtocolMode::Legacy, Some(Era::Stateless)),
            ClientLifecycleMode::Initialize
        );
        assert_eq!(
            lifecycle(ProtocolMode::Auto, Some(Era::Legacy)),
            ClientLifecycleMode::Initialize
        );
        assert!(matches!(
            lifecycle(ProtocolMode::Auto, None),
            ClientLifecycleMode::Auto { .. }
        ));
        assert!(matches!(
            lifecycle(ProtocolMode::Stateless20260728, None),
            ClientLifecycleMode::Discover { .. }
        ));
        assert_eq!(era_of(&ProtocolVersion::V_2025_06_18), Era::Legacy);
        assert_eq!(era_of(&ProtocolVersion::V_2026_07_28), Era::Stateless);
    }
}
