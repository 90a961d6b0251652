//! The crate's one error enum and its `Result` alias; every variant names the thing and where.

/// Errors of serving MCP to a host: the host transport, the runtime's start, and the surface's own errors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A search query, an `mcp` parameter, tool arguments or a spill file (see [`pimcp_surface::Error`]).
    #[error(transparent)]
    Surface(#[from] pimcp_surface::Error),
    /// Serving MCP to the host failed (handshake, transport, signal setup).
    #[error("serving MCP over {transport}: {message}")]
    Serve {
        /// Which host transport (`stdio`, `http`).
        transport: &'static str,
        /// What failed.
        message: String,
    },
    /// The runtime could not start.
    #[error("starting the runtime: {0}")]
    Runtime(#[from] pimcp_actors::Error),
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
