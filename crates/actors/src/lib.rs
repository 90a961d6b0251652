//! pimcp-actors: the actor runtime. A SupervisorActor owns one ServerActor per configured server and a RouterActor;
//! each ServerActor drives its server's lifecycle as message-driven state transitions; the router keeps the merged
//! catalog as a snapshot readers clone without messaging anyone; the metadata cache lets lazy servers be searched
//! before they ever start.

mod cache;
mod catalog;
mod error;
mod naming;
mod policy;
mod status;

pub use cache::{CACHE_FILE_NAME, CACHE_MAX_AGE, CACHE_VERSION, CacheEntry, CacheFile, Freshness, MetadataCache};
pub use catalog::{Catalog, CatalogTool, MetadataSource, Resolution, ServerCatalog, ServerInput, ServerMetadata};
pub use error::{Error, ErrorCategory, Result};
pub use naming::{
    Glob, ToolFilter, format_tool_name, resource_tool_name, sanitize_server, server_prefix, tool_candidates,
};
pub use policy::{ClockWatch, ConnectBackoff, CrashLoopBreaker, Tuning};
pub use status::{RuntimeEvent, ServerState, ServerStatus, StatusSnapshot};

/// Placeholder until the runtime module lands.
#[derive(Debug, Clone)]
pub struct ToolOutput;
