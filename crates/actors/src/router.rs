//! RouterActor: owns the merged catalog index, rebuilt from server metadata events and published through a
//! `watch` channel (readers clone the `Arc<Catalog>` without messaging anyone), and routes calls: resolve the name,
//! and when the tool's server has no live metadata yet, ask it to connect (in a task, never blocking the mailbox)
//! and resolve again — a tool that exists is never reported unknown just because its server was asleep.

use std::collections::BTreeMap;
use std::sync::Arc;

use pimcp_config::{ApproveTools, Config};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use rmcp::model::JsonObject;
use tokio::sync::{Semaphore, oneshot, watch};
use tracing::Instrument as _;

use crate::catalog::{Catalog, CatalogTool, MetadataSource, Resolution, ServerInput, ServerMetadata};
use crate::context::Shared;
use crate::error::{Error, Result};
use crate::handles::ServerHandle;
use crate::host::{ApprovalDecision, ApprovalKind, ApprovalRequest};
use crate::job::{CallJob, CallOptions, ToolOutput};
use crate::msg::{Attempt, RouterMsg, ServerRequest};
use crate::naming::{Glob, tool_candidates};
use crate::status::RuntimeEvent;

/// The most servers one request starts to look for a name the catalog does not know (a typo, or a tool of a server
/// with no cached metadata): the first ones by name of those the catalog says may have it. The rest stay as they
/// are; the miss says how many were not looked at and how to load one (`connect`, or a call with `server`).
pub const MAX_DISCOVERY_STARTS: usize = 8;

/// The most discovery connects running at once across all requests (a semaphore the router holds).
pub const DISCOVERY_CONCURRENCY: usize = 8;

pub(crate) struct RouterArgs {
    pub config: Arc<Config>,
    pub known: BTreeMap<String, (Arc<ServerMetadata>, MetadataSource)>,
    pub catalog_tx: watch::Sender<Arc<Catalog>>,
    pub shared: Arc<Shared>,
    /// False for the first router of a runtime: `Runtime::start` already published the catalog built from the
    /// same inputs, so building it again would only cost start-up time. A restarted router publishes.
    pub publish_at_start: bool,
}

pub(crate) struct RouterState {
    config: Arc<Config>,
    known: BTreeMap<String, (Arc<ServerMetadata>, MetadataSource)>,
    catalog_tx: watch::Sender<Arc<Catalog>>,
    version: u64,
    shared: Arc<Shared>,
    /// Permits for discovery connects ([`DISCOVERY_CONCURRENCY`]).
    discovery: Arc<Semaphore>,
}

pub(crate) struct RouterActor;

/// Sends a resolved call to its ServerActor; `span` (the caller's) becomes the parent of the call's spans.
fn forward(
    shared: &Shared,
    tool: Arc<CatalogTool>,
    args: Option<JsonObject>,
    opts: CallOptions,
    reply: oneshot::Sender<Result<ToolOutput>>,
    span: tracing::Span,
) {
    let server = tool.server.clone();
    match shared.server_ref(&server) {
        Some(actor) => {
            if let Err(undelivered) = actor.send(ServerRequest::Call {
                job: CallJob { tool, args, opts, span },
                reply,
            }) && let ractor::MessagingErr::SendErr(ServerRequest::Call { reply, .. }) = *undelivered
            {
                // The message (and its reply port) comes back inside the error.
                let _ = reply.send(Err(Error::Connection {
                    server,
                    message: "server actor is restarting".into(),
                    source: None,
                }));
            }
        }
        None => {
            // The supervisor gave up on this server's actor: say so rather than "unknown server".
            let err = match shared.board.state_of(&server) {
                Some(crate::status::ServerState::Failed { reason }) => Error::CrashLoop {
                    server,
                    reason,
                    failures: 0,
                },
                _ => Error::UnknownServer { server },
            };
            let _ = reply.send(Err(err));
        }
    }
}

/// Whether `approveTools` (the server's, else the global one) gates calls of `tool`: globs over the original
/// and every prefixed form of the name. The router asks before a call; the proxy marks search hits with it.
pub fn approval_required(config: &Config, tool: &CatalogTool) -> bool {
    let Some(cfg) = config.server(&tool.server) else {
        return false;
    };
    let rule = cfg.approve_tools.as_ref().unwrap_or(&config.settings.approve_tools);
    match rule {
        ApproveTools::Off => false,
        ApproveTools::All => true,
        ApproveTools::Globs(globs) => {
            let mode = cfg.tool_prefix.unwrap_or(config.settings.tool_prefix);
            let candidates = tool_candidates(&tool.original, &tool.server, mode);
            globs.iter().any(|g| {
                let g = Glob::new(g);
                candidates.iter().any(|c| g.matches(c))
            })
        }
    }
}

/// Builds the catalog for `config` from what is known.
pub(crate) fn build_catalog(
    config: &Config,
    known: &BTreeMap<String, (Arc<ServerMetadata>, MetadataSource)>,
    version: u64,
) -> Catalog {
    let inputs: Vec<ServerInput<'_>> = config
        .servers
        .iter()
        .map(|s| ServerInput {
            config: s,
            metadata: known.get(&s.name).map(|(m, src)| (m.as_ref(), *src)),
        })
        .collect();
    let mut c = Catalog::build(config.settings.tool_prefix, &inputs);
    c.version = version;
    c
}

impl RouterActor {
    fn publish(st: &mut RouterState, changed: Vec<String>) {
        st.version += 1;
        let catalog = build_catalog(&st.config, &st.known, st.version);
        st.catalog_tx.send_replace(Arc::new(catalog));
        st.shared.board.emit(RuntimeEvent::CatalogChanged {
            version: st.version,
            servers: changed,
        });
    }

    /// `Ok(tool)`, `Err(error)`, or servers to discover first.
    fn resolve(
        st: &RouterState,
        name: &str,
        server: Option<&str>,
        attempt: &Attempt,
    ) -> std::result::Result<Result<Arc<CatalogTool>>, Vec<String>> {
        let catalog = st.catalog_tx.borrow().clone();
        match catalog.resolve(name, server) {
            Resolution::Found(t) => Ok(Ok(t)),
            Resolution::Ambiguous(candidates) => Ok(Err(Error::AmbiguousTool {
                name: name.to_owned(),
                candidates,
            })),
            Resolution::UnknownServer(server) => Ok(Err(Error::UnknownServer { server })),
            Resolution::NeedsDiscovery(servers) if !attempt.discovered => Err(servers),
            Resolution::NeedsDiscovery(servers) => {
                // Discovery was tried and failed for these: report why rather than "unknown tool", unless the name's
                // prefix points at a server whose tools are known. Then a typo of one of its tools is "unknown
                // tool" with its suggestions, not the connect error of an unrelated server that could not be asked.
                let live_implied = catalog.implied_servers(name).into_iter().find(|s| {
                    !servers.contains(s)
                        && catalog
                            .server(s)
                            .is_some_and(|sc| sc.available && sc.source == Some(MetadataSource::Live))
                });
                if live_implied.is_none()
                    && let Some((_, e)) = attempt.errors.iter().find(|(s, _)| servers.contains(s))
                {
                    return Ok(Err(e.clone()));
                }
                let (implied, available) = match live_implied.as_deref().and_then(|s| catalog.server(s)) {
                    Some(sc) => (
                        Some(sc.server.clone()),
                        sc.tools.iter().map(|t| t.name.clone()).collect(),
                    ),
                    None => (None, Vec::new()),
                };
                Ok(Err(Error::UnknownTool {
                    name: name.to_owned(),
                    server: server
                        .map(str::to_owned)
                        .or(implied)
                        .or_else(|| servers.first().cloned()),
                    available,
                    suggestions: catalog.suggestions(name),
                }))
            }
            Resolution::NotFound {
                server: implied,
                available,
                suggestions,
            } => {
                if let Some(implied) = &implied
                    && let Some((_, e)) = attempt.errors.iter().find(|(s, _)| s == implied)
                {
                    return Ok(Err(e.clone()));
                }
                Ok(Err(Error::UnknownTool {
                    name: name.to_owned(),
                    server: implied,
                    available,
                    suggestions,
                }))
            }
        }
    }

    /// Connects `servers` (at most [`MAX_DISCOVERY_STARTS`] of them, [`DISCOVERY_CONCURRENCY`] at a time across
    /// requests) in a task, then sends `again` back to the router.
    fn discover_then(
        myself: &ActorRef<RouterMsg>,
        st: &RouterState,
        mut servers: Vec<String>,
        again: impl FnOnce(Attempt) -> RouterMsg + Send + 'static,
    ) {
        servers.truncate(MAX_DISCOVERY_STARTS);
        let permits = st.discovery.clone();
        let refs: Vec<(String, Option<ServerHandle>)> = servers
            .into_iter()
            .map(|s| {
                let r = st.shared.server_ref(&s);
                (s, r)
            })
            .collect();
        let me = myself.clone();
        // The retried message carries the caller's span (ractor propagates the span current at send).
        let span = tracing::Span::current();
        tokio::spawn(async move {
            let waits = refs.into_iter().map(|(name, actor)| {
                let permits = permits.clone();
                async move {
                    let Some(actor) = actor else {
                        return Some((name.clone(), Error::UnknownServer { server: name }));
                    };
                    // Held until the server answered (connected or failed); never closed, so `acquire` only waits.
                    let _permit = permits.acquire_owned().await.ok();
                    let (tx, rx) = oneshot::channel();
                    if actor.send(ServerRequest::Ensure { reply: tx }).is_err() {
                        return Some((
                            name.clone(),
                            Error::Connection {
                                server: name,
                                message: "server actor is restarting".into(),
                                source: None,
                            },
                        ));
                    }
                    match rx.await {
                        Ok(Ok(())) => None,
                        Ok(Err(e)) => Some((name, e)),
                        Err(_) => Some((
                            name.clone(),
                            Error::Connection {
                                server: name,
                                message: "server actor stopped".into(),
                                source: None,
                            },
                        )),
                    }
                }
            });
            let errors: Vec<(String, Error)> = futures::future::join_all(waits)
                .instrument(span.clone())
                .await
                .into_iter()
                .flatten()
                .collect();
            let _entered = span.enter();
            let _ = me.send_message(again(Attempt {
                discovered: true,
                errors,
            }));
        });
    }
}

impl Actor for RouterActor {
    type Msg = RouterMsg;
    type State = RouterState;
    type Arguments = RouterArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<RouterMsg>,
        args: RouterArgs,
    ) -> std::result::Result<RouterState, ActorProcessingErr> {
        let RouterArgs {
            config,
            known,
            catalog_tx,
            shared,
            publish_at_start,
        } = args;
        let version = catalog_tx.borrow().version;
        let mut st = RouterState {
            config,
            known,
            catalog_tx,
            version,
            shared,
            discovery: Arc::new(Semaphore::new(DISCOVERY_CONCURRENCY)),
        };
        if publish_at_start {
            let names = st.config.servers.iter().map(|s| s.name.clone()).collect();
            Self::publish(&mut st, names);
        }
        Ok(st)
    }

    async fn handle(
        &self,
        myself: ActorRef<RouterMsg>,
        msg: RouterMsg,
        st: &mut RouterState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        match msg {
            RouterMsg::Metadata { server, metadata } => {
                st.shared.update_known(&server, metadata.clone());
                match metadata {
                    Some(m) => {
                        st.known.insert(server.clone(), m);
                    }
                    None => {
                        st.known.remove(&server);
                    }
                }
                Self::publish(st, vec![server]);
            }
            RouterMsg::Reconfigure { config } => {
                st.known.retain(|name, _| config.server(name).is_some());
                st.config = config;
                let names = st.config.servers.iter().map(|s| s.name.clone()).collect();
                Self::publish(st, names);
            }
            RouterMsg::Resolve {
                name,
                server,
                attempt,
                reply,
            } => match Self::resolve(st, &name, server.as_deref(), &attempt) {
                Ok(r) => {
                    let _ = reply.send(r);
                }
                Err(servers) => Self::discover_then(&myself, st, servers, move |attempt| RouterMsg::Resolve {
                    name,
                    server,
                    attempt,
                    reply,
                }),
            },
            RouterMsg::Call {
                name,
                args,
                opts,
                attempt,
                reply,
            } => match Self::resolve(st, &name, opts.server.as_deref(), &attempt) {
                Ok(Ok(tool)) => {
                    let key = (tool.server.clone(), tool.original.clone());
                    if approval_required(&st.config, &tool) && !st.shared.approvals.contains_key(&key) {
                        let shared = st.shared.clone();
                        let span = tracing::Span::current();
                        tokio::spawn(async move {
                            let request = ApprovalRequest {
                                server: tool.server.clone(),
                                tool: tool.name.clone(),
                                original: tool.original.clone(),
                                arguments: args.clone(),
                                kind: ApprovalKind::ToolCall,
                            };
                            let decision = match &shared.handlers.approval {
                                Some(h) => tokio::time::timeout(shared.tuning.approval_wait, h.approve(&request))
                                    .await
                                    .ok(),
                                None => Some(ApprovalDecision::InputRequired),
                            };
                            let refuse = |message: String| Error::Approval {
                                server: tool.server.clone(),
                                tool: tool.original.clone(),
                                message,
                            };
                            let Some(decision) = decision else {
                                let msg = format!(
                                    "no answer to the approval request for tool `{}` on server `{}` within {} s",
                                    tool.original,
                                    tool.server,
                                    shared.tuning.approval_wait.as_secs_f64()
                                );
                                let _ = reply.send(Err(refuse(msg)));
                                return;
                            };
                            match decision {
                                ApprovalDecision::AllowOnce => forward(&shared, tool, args, opts, reply, span),
                                ApprovalDecision::AllowForSession => {
                                    shared.approvals.insert(key, ());
                                    forward(&shared, tool, args, opts, reply, span);
                                }
                                ApprovalDecision::Deny => {
                                    let msg = format!(
                                        "the user declined approval to run tool `{}` on server `{}`",
                                        tool.original, tool.server
                                    );
                                    let _ = reply.send(Err(refuse(msg)));
                                }
                                ApprovalDecision::InputRequired => {
                                    let msg = format!(
                                        "tool `{}` on server `{}` requires approval and there is no way to ask",
                                        tool.original, tool.server
                                    );
                                    let _ = reply.send(Err(refuse(msg)));
                                }
                            }
                        });
                    } else {
                        forward(&st.shared, tool, args, opts, reply, tracing::Span::current());
                    }
                }
                Ok(Err(e)) => {
                    let _ = reply.send(Err(e));
                }
                Err(servers) => Self::discover_then(&myself, st, servers, move |attempt| RouterMsg::Call {
                    name,
                    args,
                    opts,
                    attempt,
                    reply,
                }),
            },
        }
        Ok(())
    }
}
