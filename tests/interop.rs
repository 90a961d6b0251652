//! Interop with real MCP peers (installed by `.ci/setup-peers`; a missing peer fails with that command): pimcp-run
//! in front of `@modelcontextprotocol/server-everything` over stdio and Streamable HTTP, the Python `mcp` client and
//! `mcp-inspector --cli` driving pimcp-run, and the proof that no child process outlives a SIGKILLed pimcp-run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "interop/everything.rs"]
mod everything;
#[path = "interop/inspector.rs"]
mod inspector;
#[path = "interop/orphans.rs"]
mod orphans;
#[path = "interop/python.rs"]
mod python;
mod support;
