//! Operating `pimcp-run` for a team (docs/operations.md): `serve --http` shared by several real clients with one
//! upstream process, hot reload of the config file (only changed servers restart, an invalid file keeps the running
//! setup and says so), graceful shutdown (drain, exit 0, no child left; a second signal exits at once), and the
//! HTTP guards (token off loopback, token checked on every request, `--attach`, Host validation). The binaries are
//! the real `pimcp-run` and `mcp-fixture`; the clients are the Python `mcp` client and `mcp-inspector --cli` from
//! `.ci/setup-peers` plus rmcp.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "operations/reload.rs"]
mod reload;
#[path = "operations/security.rs"]
mod security;
#[path = "operations/shared.rs"]
mod shared;
#[path = "operations/shutdown.rs"]
mod shutdown;
mod support;
