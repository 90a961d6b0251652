//! Server-level modes: status lines, list, connect, OAuth login, instructions, and the server states the texts
//! show.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pimcp_actors::{MetadataSource, ServerCatalog, ServerState as RuntimeState, ServerStatus, StatusSnapshot};
use pimcp_surface::{ProxyError, ServerLine, ServerState};

use super::discovery::{apply_rules, keyword_rules, tool_doc};
use super::{CATALOG_SETTLE, Proxy, ServerListing};

impl Proxy {
    /// The runtime's status snapshot. Never connects anything.
    pub fn status(&self) -> StatusSnapshot {
        self.inner.runtime.status()
    }

    /// One line per server, as `mcp({})` shows them. Never connects anything.
    pub fn server_lines(&self) -> Vec<ServerLine> {
        let snapshot = self.inner.runtime.status();
        let catalog = self.inner.runtime.catalog();
        let now = SystemTime::now();
        let config = self.config();
        snapshot
            .servers
            .iter()
            .map(|s| {
                let sc = catalog.server(&s.name);
                ServerLine {
                    name: s.name.clone(),
                    state: state_of(s, sc, now),
                    n_tools: sc.filter(|c| c.source.is_some()).map(|c| c.tools.len()),
                    reason: reason_of(s),
                    description: config
                        .server(&s.name)
                        .and_then(|c| c.description.as_deref())
                        .and_then(pimcp_surface::short_description),
                }
            })
            .collect()
    }

    /// One server's tools (from the cache when not connected); a startable server with nothing known is connected
    /// first.
    pub async fn list(&self, server: &str) -> std::result::Result<ServerListing, ProxyError> {
        let catalog = self.inner.runtime.catalog();
        let Some(sc) = catalog.server(server) else {
            return Err(self.unknown_server(server));
        };
        if sc.source.is_none() && sc.available {
            self.connect_and_wait(server, false).await?;
        }
        Ok(self.listing(server))
    }

    /// Connects (or reconnects) a server, refreshes its metadata, then lists it.
    pub async fn connect(&self, server: &str) -> std::result::Result<ServerListing, ProxyError> {
        if self.inner.runtime.catalog().server(server).is_none() {
            return Err(self.unknown_server(server));
        }
        let connected = self.connect_and_wait(server, true).await;
        self.refreshed_deliberately();
        connected?;
        Ok(self.listing(server))
    }

    /// `mcp({action: "auth-start", server})`: starts an OAuth login (loopback listener, browser) and tells the
    /// model what to show the user. The login finishes by itself when the browser comes back to this machine.
    pub async fn auth_start(&self, server: &str) -> std::result::Result<String, ProxyError> {
        if self.inner.runtime.catalog().server(server).is_none() {
            return Err(self.unknown_server(server));
        }
        let start = self
            .inner
            .runtime
            .auth_start(server)
            .await
            .map_err(|e| self.runtime_error(e, Some(server)))?;
        Ok(format!(
            "Show the user this URL to authorize {server:?}:\n{}\n\nWhen the browser comes back to this machine the \
             login finishes by itself and {server:?} reconnects. If the browser runs on another machine, its last page \
             does not load: ask the user for that page's full URL and call mcp({{action: \"auth-complete\", server: \
             {server:?}, args: {{redirectUrl: \"<that URL>\"}}}}).",
            start.url
        ))
    }

    /// `mcp({action: "auth-complete", server, args: {redirectUrl}})`: finishes the pending login with the pasted
    /// redirect URL (or code), stores the tokens and reconnects; answers with the server's tools.
    pub async fn auth_complete(&self, server: &str, input: &str) -> std::result::Result<String, ProxyError> {
        if self.inner.runtime.catalog().server(server).is_none() {
            return Err(self.unknown_server(server));
        }
        self.inner
            .runtime
            .auth_complete(server, input)
            .await
            .map_err(|e| self.runtime_error(e, Some(server)))?;
        Ok(format!("Logged in to {server:?}.\n\n{}", self.listing(server).text()))
    }

    /// A server's full instructions (connecting a startable server with nothing known).
    pub async fn instructions(&self, server: &str) -> std::result::Result<Option<String>, ProxyError> {
        let catalog = self.inner.runtime.catalog();
        let Some(sc) = catalog.server(server) else {
            return Err(self.unknown_server(server));
        };
        if sc.instructions.is_none() && sc.source.is_none() && sc.available {
            self.connect_and_wait(server, false).await?;
            return Ok(self.inner.runtime.instructions(server));
        }
        Ok(sc.instructions.clone())
    }

    fn listing(&self, server: &str) -> ServerListing {
        let catalog = self.inner.runtime.catalog();
        let snapshot = self.inner.runtime.status();
        let sc = catalog.server(server);
        let state = match snapshot.server(server) {
            Some(s) => state_of(s, sc, SystemTime::now()),
            None => ServerState::NotStarted,
        };
        let config = self.config();
        let cfg = config.server(server);
        let rules = keyword_rules(cfg);
        ServerListing {
            server: server.to_owned(),
            state,
            source: sc.and_then(|c| c.source),
            tools: sc
                .map(|c| {
                    c.tools
                        .iter()
                        .map(|t| tool_doc(t, &apply_rules(&rules, t, cfg, &config), &config))
                        .collect()
                })
                .unwrap_or_default(),
            instructions: sc.and_then(|c| c.instructions.clone()),
        }
    }

    pub(super) async fn connect_and_wait(&self, server: &str, force: bool) -> std::result::Result<(), ProxyError> {
        let runtime = &self.inner.runtime;
        let done = if force {
            runtime.reconnect(server).await
        } else {
            runtime.connect(server).await
        };
        done.map_err(|e| self.runtime_error(e, None))?;
        let mut rx = runtime.catalog_watch();
        let settled = tokio::time::timeout(
            CATALOG_SETTLE,
            rx.wait_for(|c| c.server(server).is_some_and(|s| s.source == Some(MetadataSource::Live))),
        )
        .await;
        if settled.is_err() {
            tracing::debug!(%server, "catalog did not show live metadata within the settle time");
        }
        Ok(())
    }
}

/// A server's state for the texts.
pub(super) fn state_of(s: &ServerStatus, sc: Option<&ServerCatalog>, now: SystemTime) -> ServerState {
    match &s.state {
        RuntimeState::Disabled => ServerState::Disabled,
        RuntimeState::Cached => {
            if sc.is_some_and(|c| c.source.is_some()) {
                ServerState::Cached
            } else if s.last_error.is_some() {
                // A lazy server whose connect failed is back to waiting for the next request, with nothing known:
                // that it failed is what the model needs to hear.
                ServerState::Failed {
                    ago: now
                        .duration_since(UNIX_EPOCH + Duration::from_millis(s.since_ms))
                        .unwrap_or_default(),
                }
            } else {
                ServerState::NotStarted
            }
        }
        RuntimeState::Connecting => ServerState::Connecting,
        RuntimeState::Ready => ServerState::Ready,
        RuntimeState::Draining => ServerState::Draining,
        RuntimeState::Backoff { until, .. } => ServerState::Backoff {
            retry_in: until.duration_since(now).unwrap_or_default(),
        },
        RuntimeState::NeedsAuth => ServerState::NeedsAuth,
        RuntimeState::Failed { .. } => ServerState::Failed {
            ago: now
                .duration_since(UNIX_EPOCH + Duration::from_millis(s.since_ms))
                .unwrap_or_default(),
        },
        RuntimeState::Untrusted => ServerState::Untrusted,
        RuntimeState::ConfigError => ServerState::ConfigError,
        // `ServerState` is `#[non_exhaustive]` for hosts; a state the texts do not know yet reads as connecting.
        _ => ServerState::Connecting,
    }
}

fn reason_of(s: &ServerStatus) -> Option<String> {
    match &s.state {
        RuntimeState::Failed { reason } => Some(reason.clone()),
        RuntimeState::Backoff { .. } => s.last_error.clone().or_else(|| s.reason.clone()),
        RuntimeState::ConfigError => s.reason.clone().or_else(|| s.last_error.clone()),
        _ => None,
    }
}
