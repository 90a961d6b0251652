//! The MCP `logging` capability of `pimcp-run` towards its hosts: `logging/setLevel` sets the minimum level of the
//! `notifications/message` one host session receives ([`HostLog::set_level`]), and [`HostLog::publish`] sends a
//! message to every session whose level lets it through. Sessions that never sent `logging/setLevel` get no
//! messages at all (the spec leaves the default to the server; pimcp keeps such hosts' streams exactly as they were
//! before logging was declared). What is published: pimcp's own notices about its upstream servers (each state
//! change: connected, backing off, failed, needs auth, …; logger `pimcp`), from the runtime's event stream, and the
//! upstream servers' own `notifications/message` (redacted by the runtime), under the logger `<server>` or
//! `<server>/<their logger>`.
#![allow(deprecated)] // logging is SEP-2577-deprecated but still on the wire for 2025-11-25 hosts

use std::sync::{Arc, Mutex, PoisonError};

use pimcp_actors::{RuntimeEvent, RuntimeHandle, ServerNotice, ServerState};
use rmcp::RoleServer;
use rmcp::model::{InitializeRequestParams, LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::Peer;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

/// Logger name of pimcp's own messages.
pub(crate) const LOGGER: &str = "pimcp";
/// Sessions remembered at once (closed ones are pruned first).
const MAX_SESSIONS: usize = 256;

/// Per-session log levels and the fan-out of `notifications/message`. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct HostLog {
    sessions: Arc<Mutex<Vec<Listener>>>,
}

/// One host session that asked for messages.
struct Listener {
    /// The session's identity: its initialize parameters, shared by every clone of its peer.
    info: Arc<InitializeRequestParams>,
    peer: Peer<RoleServer>,
    level: LoggingLevel,
}

impl HostLog {
    /// Starts relaying the runtime's state changes as messages until `stop` is cancelled.
    pub(crate) fn start(runtime: &RuntimeHandle, stop: CancellationToken) -> HostLog {
        let log = HostLog::default();
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return log;
        };
        let mut events = runtime.events();
        let relay = log.clone();
        let stop_events = stop.clone();
        handle.spawn(async move {
            let stop = stop_events;
            loop {
                let event = tokio::select! {
                    _ = stop.cancelled() => return,
                    event = events.recv() => event,
                };
                match event {
                    Ok(RuntimeEvent::State { server, state, reason }) => {
                        let (level, message) = state_notice(&server, &state, reason.as_deref());
                        relay.publish(level, message).await;
                    }
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return,
                }
            }
        });
        let mut notices = runtime.server_notices();
        let relay = log.clone();
        handle.spawn(async move {
            loop {
                let notice = tokio::select! {
                    _ = stop.cancelled() => return,
                    notice = notices.recv() => notice,
                };
                match notice {
                    Ok(ServerNotice::Log(m)) => {
                        let logger = match &m.logger {
                            Some(own) => format!("{}/{own}", m.server),
                            None => m.server.clone(),
                        };
                        relay.publish_as(&logger, m.level, m.data).await;
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(n)) => tracing::debug!(skipped = n, "host log: upstream messages skipped"),
                    Err(RecvError::Closed) => return,
                }
            }
        });
        log
    }

    /// `logging/setLevel` from `peer`: from now on it receives messages at `level` and above. A peer without a
    /// session identity (a stateless 2026-07-28 request) has nowhere to receive them; the request still succeeds.
    pub(crate) fn set_level(&self, peer: &Peer<RoleServer>, level: LoggingLevel) {
        let Some(info) = peer.peer_info() else {
            return;
        };
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.retain(|s| !s.peer.is_transport_closed());
        if let Some(s) = sessions.iter_mut().find(|s| Arc::ptr_eq(&s.info, &info)) {
            s.level = level;
            return;
        }
        if sessions.len() >= MAX_SESSIONS {
            sessions.remove(0);
        }
        sessions.push(Listener {
            info,
            peer: peer.clone(),
            level,
        });
    }

    /// Sends `message` (logger `pimcp`) to every session whose level is `level` or lower.
    pub(crate) async fn publish(&self, level: LoggingLevel, message: serde_json::Value) {
        self.publish_as(LOGGER, level, message).await;
    }

    /// Sends `message` under `logger` to every session whose level is `level` or lower.
    async fn publish_as(&self, logger: &str, level: LoggingLevel, message: serde_json::Value) {
        let peers: Vec<Peer<RoleServer>> = {
            let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
            sessions.retain(|s| !s.peer.is_transport_closed());
            sessions
                .iter()
                .filter(|s| passes(level, s.level))
                .map(|s| s.peer.clone())
                .collect()
        };
        for peer in peers {
            let param = LoggingMessageNotificationParam::new(level, message.clone()).with_logger(logger);
            if let Err(e) = peer.notify_logging_message(param).await {
                tracing::debug!(error = %e, "a host session did not take a log message");
            }
        }
    }
}

/// Severity rank (RFC 5424 order, `debug` lowest).
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// A message at `level` reaches a session that asked for `minimum` and above.
fn passes(level: LoggingLevel, minimum: LoggingLevel) -> bool {
    rank(level) >= rank(minimum)
}

/// The level and data of the notice for one server state change.
fn state_notice(server: &str, state: &ServerState, reason: Option<&str>) -> (LoggingLevel, serde_json::Value) {
    let level = match state {
        ServerState::Connecting | ServerState::Cached | ServerState::Draining => LoggingLevel::Debug,
        ServerState::Ready => LoggingLevel::Info,
        ServerState::Disabled => LoggingLevel::Notice,
        ServerState::Backoff { .. } | ServerState::NeedsAuth | ServerState::Untrusted => LoggingLevel::Warning,
        ServerState::Failed { .. } | ServerState::ConfigError => LoggingLevel::Error,
        // `ServerState` is `#[non_exhaustive]` for hosts; a state added later is told at info level.
        _ => LoggingLevel::Info,
    };
    let mut data = serde_json::json!({
        "event": "server-state",
        "server": server,
        "state": state.name(),
    });
    if let Some(reason) = reason.filter(|r| !r.is_empty()) {
        data["reason"] = serde_json::Value::from(reason);
    }
    (level, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_lets_through_itself_and_everything_more_severe() {
        assert!(passes(LoggingLevel::Info, LoggingLevel::Info));
        assert!(passes(LoggingLevel::Error, LoggingLevel::Warning));
        assert!(!passes(LoggingLevel::Info, LoggingLevel::Warning));
        assert!(!passes(LoggingLevel::Debug, LoggingLevel::Info));
        assert!(passes(LoggingLevel::Emergency, LoggingLevel::Debug));
    }

    #[test]
    fn state_notices_rank_failures_above_progress() {
        let (ready, data) = state_notice("fx", &ServerState::Ready, None);
        assert_eq!(ready, LoggingLevel::Info);
        assert_eq!(
            data,
            serde_json::json!({ "event": "server-state", "server": "fx", "state": "ready" })
        );
        let (failed, data) = state_notice(
            "fx",
            &ServerState::Failed {
                reason: "crash loop".into(),
            },
            Some("exited with code 2"),
        );
        assert_eq!(failed, LoggingLevel::Error);
        assert_eq!(data["reason"], "exited with code 2");
        assert_eq!(
            state_notice("fx", &ServerState::Connecting, None).0,
            LoggingLevel::Debug
        );
        assert_eq!(
            state_notice("fx", &ServerState::NeedsAuth, Some("")).1.get("reason"),
            None
        );
    }
}
