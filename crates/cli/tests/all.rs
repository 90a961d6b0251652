//! Integration tests of the `pimcp-run` binary: run as a real process with a temp HOME, project and data dir.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "all/auth.rs"]
mod auth;
#[path = "all/commands.rs"]
mod commands;
#[path = "all/editing.rs"]
mod editing;
#[path = "all/runtime.rs"]
mod runtime;
#[path = "all/secrets.rs"]
mod secrets;
#[path = "all/serve.rs"]
mod serve;
#[path = "all/support.rs"]
mod support;
