//! pimcp: one small, robust MCP client runtime. This facade re-exports the library crates for Rust hosts.

pub use pimcp_config as config;
