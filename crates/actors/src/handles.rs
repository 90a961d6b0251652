//! Typed handles to the runtime's actors: what the rest of the runtime holds instead of an `ActorRef`.
//! [`ServerHandle`] takes only [`ServerRequest`]s (a ServerActor's own reports cannot be sent from outside it) and
//! [`RouterHandle`] only [`RouterMsg`]s; each request that waits for an answer waits at most the bound its caller
//! names, so a stuck actor costs a caller an error, never a hang.

use std::sync::Arc;
use std::time::Duration;

use ractor::{ActorId, ActorRef, DerivedActorRef, MessagingErr};
use rmcp::model::JsonObject;
use tokio::sync::oneshot;

use crate::catalog::CatalogTool;
use crate::error::{Error, Result};
use crate::job::{CallOptions, ToolOutput};
use crate::msg::{Attempt, RouterMsg, ServerRequest};

/// The current ServerActor of each server, by name (replaced on restart). Shared: the runtime holds it, the auth
/// layer keeps a weak reference to reconnect a server after its login.
pub(crate) type ServerRegistry = dashmap::DashMap<String, ServerHandle>;

/// One ServerActor, as seen from outside it.
#[derive(Clone)]
pub(crate) struct ServerHandle {
    actor: DerivedActorRef<ServerRequest>,
}

impl ServerHandle {
    pub(crate) fn new(actor: DerivedActorRef<ServerRequest>) -> ServerHandle {
        ServerHandle { actor }
    }

    /// Sends without waiting (the mailbox is unbounded, so this never blocks); a request that could not be
    /// delivered comes back inside the error (its reply port with it).
    pub(crate) fn send(&self, request: ServerRequest) -> std::result::Result<(), Box<MessagingErr<ServerRequest>>> {
        self.actor.send_message(request).map_err(Box::new)
    }

    /// Sends the request built around a reply port and waits for the answer at most `within`; `operation` names
    /// the request in the timeout error.
    pub(crate) async fn ask<T>(
        &self,
        server: &str,
        operation: &str,
        within: Duration,
        request: impl FnOnce(oneshot::Sender<T>) -> ServerRequest,
    ) -> Result<T> {
        let (tx, rx) = oneshot::channel();
        self.send(request(tx)).map_err(|_| Error::Connection {
            server: server.to_owned(),
            message: "server actor is restarting".into(),
            source: None,
        })?;
        match tokio::time::timeout(within, rx).await {
            Ok(reply) => reply.map_err(|_| Error::Connection {
                server: server.to_owned(),
                message: "server actor stopped".into(),
                source: None,
            }),
            Err(_) => Err(Error::OperationTimeout {
                server: server.to_owned(),
                operation: operation.to_owned(),
                after: within,
            }),
        }
    }

    /// The actor's id: tells the current actor of a server from the one it replaced.
    pub(crate) fn id(&self) -> ActorId {
        self.actor.get_id()
    }

    /// Stops the actor without waiting for its connection to close (see [`ServerRequest::Shutdown`] for that).
    pub(crate) fn stop(&self, reason: &str) {
        self.actor.stop(Some(reason.to_owned()));
    }
}

/// The RouterActor, as seen from outside it.
#[derive(Clone)]
pub(crate) struct RouterHandle {
    actor: ActorRef<RouterMsg>,
}

impl RouterHandle {
    pub(crate) fn new(actor: ActorRef<RouterMsg>) -> RouterHandle {
        RouterHandle { actor }
    }

    /// Sends without waiting; an error only means the router is gone (a restarted one starts from the shared
    /// state).
    pub(crate) fn send(&self, msg: RouterMsg) -> Result<()> {
        self.actor
            .send_message(msg)
            .map_err(|_| Error::actor("the router is not running"))
    }

    /// Resolves a tool name (discovering lazily when needed), waiting at most `within`.
    pub(crate) async fn resolve(&self, name: &str, server: Option<&str>, within: Duration) -> Result<Arc<CatalogTool>> {
        let request = |reply| RouterMsg::Resolve {
            name: name.to_owned(),
            server: server.map(str::to_owned),
            attempt: Attempt::default(),
            reply,
        };
        let timeout = || Error::OperationTimeout {
            server: server.unwrap_or("*").to_owned(),
            operation: format!("resolving `{name}`"),
            after: within,
        };
        self.ask(request, within, "the router dropped the request", timeout)
            .await
    }

    /// Resolves and runs a call, waiting at most `within` for its answer.
    pub(crate) async fn call(
        &self,
        name: &str,
        args: Option<JsonObject>,
        opts: CallOptions,
        within: Duration,
    ) -> Result<ToolOutput> {
        let request = |reply| RouterMsg::Call {
            name: name.to_owned(),
            args,
            opts,
            attempt: Attempt::default(),
            reply,
        };
        let timeout = || Error::OperationTimeout {
            server: "*".to_owned(),
            operation: format!("calling `{name}`"),
            after: within,
        };
        self.ask(request, within, "the call was dropped by a stopping actor", timeout)
            .await
    }

    /// Sends the request built around a reply port and waits for the answer at most `within`: a dropped reply port
    /// is `dropped`, running out of time is `timeout()`.
    async fn ask<T>(
        &self,
        request: impl FnOnce(oneshot::Sender<Result<T>>) -> RouterMsg,
        within: Duration,
        dropped: &str,
        timeout: impl FnOnce() -> Error,
    ) -> Result<T> {
        let (tx, rx) = oneshot::channel();
        self.send(request(tx))?;
        match tokio::time::timeout(within, rx).await {
            Ok(reply) => reply.map_err(|_| Error::actor(dropped))?,
            Err(_) => Err(timeout()),
        }
    }

    /// Stops the router.
    pub(crate) fn stop(&self, reason: &str) {
        self.actor.stop(Some(reason.to_owned()));
    }
}
