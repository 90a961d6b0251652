//! Integration tests of the proxy façade and the `pimcp-run` MCP server against `mcp-fixture` servers: every `mcp`
//! mode, bad input, the behaviours published peers get wrong, direct tools and `list_changed`, server→client
//! forwarding, and (once the CLI wires it) the real `pimcp-run` binary.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

#[path = "all/support.rs"]
mod support;

#[path = "all/auth.rs"]
mod auth;
#[path = "all/binary.rs"]
mod binary;
#[path = "all/calls.rs"]
mod calls;
#[path = "all/direct.rs"]
mod direct;
#[path = "all/forwarding.rs"]
mod forwarding;
#[path = "all/host_input.rs"]
mod host_input;
#[path = "all/host_lines.rs"]
mod host_lines;
#[path = "all/http_serve.rs"]
mod http_serve;
#[path = "all/modes.rs"]
mod modes;
#[path = "all/protocol.rs"]
mod protocol;
#[path = "all/script.rs"]
mod script;
