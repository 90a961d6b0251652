//! The messages the runtime's actors take from one another: [`ServerRequest`] (what the rest of the runtime may
//! send a ServerActor; its own tasks' and timers' reports stay private to `server/`) and [`RouterMsg`]. Only data
//! lives here, so a module that sends a message needs this file and the handles (`handles.rs`), not the actor.

use std::sync::Arc;
use std::time::Duration;

use pimcp_config::Config;
use rmcp::RoleClient;
use rmcp::model::JsonObject;
use rmcp::service::Peer;
use tokio::sync::oneshot;

use crate::catalog::{CatalogTool, MetadataSource, ServerMetadata};
use crate::error::{Error, Result};
use crate::job::{CallJob, CallOptions, CallReport, ToolOutput};

/// What the rest of the runtime sends a ServerActor: requests, each with a `reply`, and the reports of the two
/// things that run outside its mailbox on its connection (the call lane and the client handler), each tagged with the
/// connection generation it belongs to.
pub(crate) enum ServerRequest {
    /// Run a tool call (connecting first if needed).
    Call {
        job: CallJob,
        reply: oneshot::Sender<Result<ToolOutput>>,
    },
    /// Be connected with fresh metadata (lazy discovery for the router).
    Ensure { reply: oneshot::Sender<Result<()>> },
    /// Explicit connect: closes the crash-loop breaker; `force` tears down a live connection first.
    Connect {
        force: bool,
        reply: oneshot::Sender<Result<()>>,
    },
    /// Start connecting now if the server has not started (`cached`, nothing refusing it); nobody waits for it.
    Warm,
    /// Disconnect and refuse work until [`ServerRequest::Enable`].
    Disable { reply: oneshot::Sender<()> },
    /// Leave `disabled`.
    Enable { reply: oneshot::Sender<()> },
    /// Close everything and stop accepting work; replies once the connection is closed.
    Shutdown { reply: oneshot::Sender<()> },
    /// Wall clock jumped (sleep/wake): check a live connection now.
    Revalidate,
    /// The live connection's peer and request timeout, if connected, for one-off requests (`prompts/get`,
    /// `resources/read`); restarts the idle timer.
    LivePeer {
        reply: oneshot::Sender<Option<(Peer<RoleClient>, Duration)>>,
    },
    /// A call on the lane hit something the actor must handle (a dead transport, a refused token).
    CallReport { generation: u64, report: CallReport },
    /// The server said one of its lists changed.
    ListChanged { generation: u64, kind: ListKind },
    /// Makes the handler fail, to exercise supervision.
    #[cfg(test)]
    FailForTest,
}

/// Which list a `list_changed` notification is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListKind {
    Tools,
    Resources,
    Prompts,
}

/// Messages of the RouterActor.
pub(crate) enum RouterMsg {
    /// A server's metadata changed (`None`: nothing known any more).
    Metadata {
        server: String,
        metadata: Option<(Arc<ServerMetadata>, MetadataSource)>,
    },
    /// Resolve a name, discovering lazily when needed.
    Resolve {
        name: String,
        server: Option<String>,
        attempt: Attempt,
        reply: oneshot::Sender<Result<Arc<CatalogTool>>>,
    },
    /// Resolve and forward a call to the tool's ServerActor.
    Call {
        name: String,
        args: Option<JsonObject>,
        opts: CallOptions,
        attempt: Attempt,
        reply: oneshot::Sender<Result<ToolOutput>>,
    },
    /// Replace the configuration (servers added/removed/changed by the supervisor).
    Reconfigure { config: Arc<Config> },
}

/// First resolution, or the one after a discovery round (with the errors servers gave while connecting).
#[derive(Debug, Clone, Default)]
pub(crate) struct Attempt {
    pub(crate) discovered: bool,
    pub(crate) errors: Vec<(String, Error)>,
}
