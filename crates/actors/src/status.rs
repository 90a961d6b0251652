//! What hosts observe: per-server [`ServerState`], the versioned [`StatusSnapshot`], and [`RuntimeEvent`]s. Server
//! actors publish into a shared [`StatusBoard`] (a lock-free map plus a broadcast channel), so `status()` never waits
//! on an actor.

// Hosts read every one of these types: each public item says what it is.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use dashmap::DashMap;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::cache::epoch_ms;
use crate::error::ErrorCategory;

/// A server's lifecycle state. Transitions happen only inside its ServerActor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ServerState {
    /// `enabled: false` / `disabled: true`, or disabled at run time.
    Disabled,
    /// Not connected; metadata (if any) comes from the cache.
    Cached,
    /// Spawning or connecting, then the handshake and discovery.
    Connecting,
    /// Connected: calls run at once.
    Ready,
    /// Closing its connection (idle close, wedged, reconnect, shutdown).
    Draining,
    /// The last connect failed; the next attempt is not before `until`.
    Backoff {
        /// When the next attempt may start.
        #[serde(with = "epoch_millis", rename = "untilMs")]
        until: SystemTime,
        /// Failed attempts in a row, this one included.
        attempt: u32,
    },
    /// An OAuth server without a usable token: `pimcp-run auth login NAME`.
    NeedsAuth,
    /// The crash-loop breaker is open: stays here until `connect` or a config change.
    Failed {
        /// What the last failures said.
        reason: String,
    },
    /// Comes from a project file that is not trusted.
    Untrusted,
    /// A configuration error that bites at connect (missing variable, bad field).
    ConfigError,
}

impl ServerState {
    /// Short kebab-case name (`ready`, `backoff`, …).
    pub fn name(&self) -> &'static str {
        match self {
            ServerState::Disabled => "disabled",
            ServerState::Cached => "cached",
            ServerState::Connecting => "connecting",
            ServerState::Ready => "ready",
            ServerState::Draining => "draining",
            ServerState::Backoff { .. } => "backoff",
            ServerState::NeedsAuth => "needs-auth",
            ServerState::Failed { .. } => "failed",
            ServerState::Untrusted => "untrusted",
            ServerState::ConfigError => "config-error",
        }
    }
}

mod epoch_millis {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(super::epoch_ms(*t))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        let ms = u64::deserialize(d)?;
        Ok(UNIX_EPOCH + Duration::from_millis(ms))
    }
}

/// One server's line in the status snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ServerStatus {
    /// The configured server name.
    pub name: String,
    /// Where its lifecycle is.
    #[serde(flatten)]
    pub state: ServerState,
    /// Human reason for the state (`exited with code 3 at start`, `idle`, `needs auth`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Tools known (live or cached).
    pub tool_count: usize,
    /// Resources known (live or cached).
    pub resource_count: usize,
    /// Prompts known (live or cached).
    pub prompt_count: usize,
    /// `live`, `cache`, `stale-cache`, or absent when nothing is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<crate::catalog::MetadataSource>,
    /// The protocol version of the live (or last) connection, e.g. `2025-11-25`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// The category of the last error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error_category: Option<ErrorCategory>,
    /// The last error's message (no secret values).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Failures counted by the crash-loop breaker in its current window.
    pub failures: u32,
    /// Milliseconds connected (present while ready).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uptime_ms: Option<u64>,
    /// When the state was entered (epoch ms).
    pub since_ms: u64,
    /// Calls running now.
    pub in_flight: usize,
    /// The server process (stdio; it leads the server's process group).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// `lazy`, `eager`, `keep-alive` or `lazy-keep-alive`.
    pub lifecycle: String,
    /// The server's `description` from the config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// When the live connection came up (for `uptime_ms`).
    #[serde(skip)]
    pub(crate) connected_at: Option<std::time::Instant>,
}

impl ServerStatus {
    pub(crate) fn new(name: &str, state: ServerState, lifecycle: &str) -> ServerStatus {
        ServerStatus {
            name: name.to_owned(),
            state,
            reason: None,
            tool_count: 0,
            resource_count: 0,
            prompt_count: 0,
            metadata: None,
            protocol_version: None,
            last_error_category: None,
            last_error: None,
            failures: 0,
            uptime_ms: None,
            since_ms: epoch_ms(SystemTime::now()),
            in_flight: 0,
            pid: None,
            lifecycle: lifecycle.to_owned(),
            description: None,
            connected_at: None,
        }
    }
}

/// The versioned snapshot returned by `status()` and `pimcp-run status --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct StatusSnapshot {
    /// `pimcp/status/v1`.
    pub schema: String,
    /// When it was taken (epoch ms).
    pub taken_at_ms: u64,
    /// Sorted by name.
    pub servers: Vec<ServerStatus>,
}

impl StatusSnapshot {
    /// The schema this version of the snapshot carries.
    pub const SCHEMA: &'static str = "pimcp/status/v1";

    /// A snapshot taken at `taken_at_ms` (epoch ms) of `servers`, sorted here by name.
    pub fn new(taken_at_ms: u64, mut servers: Vec<ServerStatus>) -> StatusSnapshot {
        servers.sort_by(|a, b| a.name.cmp(&b.name));
        StatusSnapshot {
            schema: StatusSnapshot::SCHEMA.into(),
            taken_at_ms,
            servers,
        }
    }

    /// The line of server `name`, if it is configured.
    pub fn server(&self, name: &str) -> Option<&ServerStatus> {
        self.servers.iter().find(|s| s.name == name)
    }
}

/// Something a host may want to react to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum RuntimeEvent {
    /// A server changed state.
    State {
        /// The server.
        server: String,
        /// Its new state.
        state: ServerState,
        /// Why, in words (`idle`, `exited with code 3 at start`, …).
        reason: Option<String>,
    },
    /// The merged catalog changed (a server's tools/resources/prompts were (re)discovered or dropped).
    CatalogChanged {
        /// The catalog's version after the change (it only grows).
        version: u64,
        /// The servers whose part changed.
        servers: Vec<String>,
    },
}

/// A `notifications/message` an upstream server sent, its data redacted of every secret pimcp resolved
/// (`pimcp-run` relays them to hosts at their `logging/setLevel`).
#[derive(Debug, Clone, PartialEq)]
#[allow(deprecated)] // logging is SEP-2577-deprecated but still on the wire
pub struct ServerLogMessage {
    /// The server that sent it.
    pub server: String,
    /// Its severity.
    pub level: rmcp::model::LoggingLevel,
    /// The upstream's own logger name, if it gave one.
    pub logger: Option<String>,
    /// The message's data, redacted.
    pub data: serde_json::Value,
}

/// A notification from an upstream server that a host may want relayed ([`crate::RuntimeHandle::server_notices`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ServerNotice {
    /// `notifications/message`.
    Log(ServerLogMessage),
    /// `notifications/resources/updated`: a resource the runtime subscribed to changed.
    ResourceUpdated {
        /// The server whose resource changed.
        server: String,
        /// The resource.
        uri: String,
    },
}

/// Capacity of the server-notice channel, created on first subscription: a chatty server makes a slow receiver
/// lag (it skips notices) rather than block anything.
const SERVER_NOTICE_CAPACITY: usize = 64;

/// Shared per-server status plus the event fan-out.
#[derive(Debug, Clone)]
pub(crate) struct StatusBoard {
    servers: Arc<DashMap<String, ServerStatus>>,
    events: broadcast::Sender<RuntimeEvent>,
    /// Upstream notices; `None` until someone subscribes (nothing is buffered for nobody).
    notices: Arc<std::sync::OnceLock<broadcast::Sender<ServerNotice>>>,
}

/// Capacity of the event channel; slow receivers see `Lagged` rather than blocking actors.
///
/// The channel's buffer is allocated whole when the runtime starts: capacity × slot, where a slot is a mutex, two
/// words and an `Option<RuntimeEvent>` (104 bytes on 64-bit Linux), so 1024 cost 106,496 bytes and 256 cost 26,624.
/// What the subscribers need: a burst is a few events per server (cached → connecting → ready, a catalog change),
/// 256 hold a start-up or shutdown burst of 64 servers before a receiver that was not scheduled meanwhile lags
/// (`a_burst_of_sixty_four_servers_fits_the_event_channel`). Those that lag still cope: `pimcp-run watch` redraws
/// from `status()`, the host log skips missed notices, and `list_changed` bursts are debounced to far fewer events.
pub(crate) const EVENT_CAPACITY: usize = 256;

impl StatusBoard {
    pub(crate) fn new() -> StatusBoard {
        let (events, _) = broadcast::channel(EVENT_CAPACITY);
        StatusBoard {
            servers: Arc::new(DashMap::new()),
            events,
            notices: Arc::default(),
        }
    }

    pub(crate) fn subscribe_notices(&self) -> broadcast::Receiver<ServerNotice> {
        self.notices
            .get_or_init(|| broadcast::channel(SERVER_NOTICE_CAPACITY).0)
            .subscribe()
    }

    /// Whether anyone receives upstream notices (so a log message is worth redacting and sending).
    pub(crate) fn notices_wanted(&self) -> bool {
        self.notices.get().is_some_and(|n| n.receiver_count() > 0)
    }

    /// Publishes an upstream notice to the subscribers, if any.
    pub(crate) fn emit_notice(&self, notice: ServerNotice) {
        if let Some(notices) = self.notices.get() {
            let _ = notices.send(notice);
        }
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<RuntimeEvent> {
        self.events.subscribe()
    }

    pub(crate) fn emit(&self, event: RuntimeEvent) {
        let _ = self.events.send(event);
    }

    /// Applies `f` to the server's status; emits a `State` event when the state or reason changed.
    pub(crate) fn update(&self, name: &str, f: impl FnOnce(&mut ServerStatus)) {
        let mut event = None;
        if let Some(mut entry) = self.servers.get_mut(name) {
            let before = (entry.state.clone(), entry.reason.clone());
            f(&mut entry);
            if entry.state != before.0 {
                entry.since_ms = epoch_ms(SystemTime::now());
            }
            if (entry.state.clone(), entry.reason.clone()) != before {
                event = Some(RuntimeEvent::State {
                    server: name.to_owned(),
                    state: entry.state.clone(),
                    reason: entry.reason.clone(),
                });
            }
        }
        if let Some(e) = event {
            self.emit(e);
        }
    }

    pub(crate) fn insert(&self, status: ServerStatus) {
        self.servers.insert(status.name.clone(), status);
    }

    pub(crate) fn state_of(&self, name: &str) -> Option<ServerState> {
        self.servers.get(name).map(|s| s.state.clone())
    }

    pub(crate) fn remove(&self, name: &str) {
        self.servers.remove(name);
    }

    pub(crate) fn snapshot(&self) -> StatusSnapshot {
        let mut servers: Vec<ServerStatus> = self
            .servers
            .iter()
            .map(|e| {
                let mut s = e.value().clone();
                s.uptime_ms = s.connected_at.map(|t| millis(t.elapsed()));
                s
            })
            .collect();
        servers.sort_by(|a, b| a.name.cmp(&b.name));
        StatusSnapshot {
            schema: StatusSnapshot::SCHEMA.to_owned(),
            taken_at_ms: epoch_ms(SystemTime::now()),
            servers,
        }
    }
}

/// Milliseconds of a duration, saturating.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Every server going cached → connecting → ready with one catalog change each, while the subscriber does not
    /// run: the whole burst of 64 servers must still be there for it, in order.
    #[test]
    fn a_burst_of_sixty_four_servers_fits_the_event_channel() {
        let board = StatusBoard::new();
        let names: Vec<String> = (0..64).map(|i| format!("s{i:02}")).collect();
        for name in &names {
            board.insert(ServerStatus::new(name, ServerState::Cached, "eager"));
        }
        let mut rx = board.subscribe();
        for (version, name) in names.iter().enumerate() {
            board.update(name, |s| s.state = ServerState::Connecting);
            board.update(name, |s| s.state = ServerState::Ready);
            board.emit(RuntimeEvent::CatalogChanged {
                version: u64::try_from(version).unwrap(),
                servers: vec![name.clone()],
            });
        }
        let mut seen = Vec::new();
        loop {
            match rx.try_recv() {
                Ok(event) => seen.push(event),
                Err(broadcast::error::TryRecvError::Empty) => break,
                Err(e) => panic!("after {} events: {e:?}", seen.len()),
            }
        }
        assert_eq!(seen.len(), 64 * 3);
        assert!(
            matches!(&seen[190], RuntimeEvent::State { server, state: ServerState::Ready, .. } if server == "s63"),
            "{:?}",
            seen[190]
        );
    }

    #[test]
    fn snapshot_serializes_versioned_and_flat() {
        let board = StatusBoard::new();
        let mut rx = board.subscribe();
        board.insert(ServerStatus::new("b", ServerState::Cached, "lazy"));
        board.insert(ServerStatus::new("a", ServerState::Disabled, "lazy"));
        board.update("b", |s| {
            s.state = ServerState::Backoff {
                until: SystemTime::UNIX_EPOCH + Duration::from_secs(10),
                attempt: 2,
            };
            s.reason = Some("exited".into());
        });
        let snap = board.snapshot();
        assert_eq!(
            snap.servers.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let json = serde_json::to_value(&snap).unwrap();
        assert_eq!(json["schema"], "pimcp/status/v1");
        assert_eq!(json["servers"][1]["state"], "backoff");
        assert_eq!(json["servers"][1]["untilMs"], 10_000);
        assert_eq!(json["servers"][1]["attempt"], 2);
        let back: StatusSnapshot = serde_json::from_value(json).unwrap();
        assert_eq!(back.servers[1].state, snap.servers[1].state);
        match rx.try_recv().unwrap() {
            RuntimeEvent::State { server, state, .. } => {
                assert_eq!(server, "b");
                assert_eq!(state.name(), "backoff");
            }
            other => panic!("{other:?}"),
        }
    }
}
