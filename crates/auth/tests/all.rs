//! Integration tests of pimcp-auth: every flow runs against a loopback fake authorization server (the fixture's
//! library, `mcp_fixture::oauth`) and real token stores in temp dirs; multi-process behaviour uses the
//! `token_tool` example as a separate process.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use mcp_fixture::oauth as fake_as;

#[path = "all/discovery.rs"]
mod discovery;
#[path = "all/fixture.rs"]
mod fixture;
#[path = "all/flows.rs"]
mod flows;
#[path = "all/refresh.rs"]
mod refresh;
#[cfg(target_os = "linux")]
#[path = "all/secret_service.rs"]
mod secret_service;
#[path = "all/secrets.rs"]
mod secrets;
// File modes and the kernel keyring: Unix.
#[cfg(unix)]
#[path = "all/stores.rs"]
mod stores;
#[path = "all/support.rs"]
mod support;
