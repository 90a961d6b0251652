//! Integration tests of pimcp-config against real file trees in temp dirs (never the real HOME).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "all/bad_input.rs"]
mod bad_input;
// Edits keep permission bits and replace inodes: Unix file metadata.
#[cfg(unix)]
#[path = "all/editing.rs"]
mod editing;
#[path = "all/interpolation.rs"]
mod interpolation;
#[path = "all/plugins.rs"]
mod plugins;
#[path = "all/schema.rs"]
mod schema;
#[path = "all/secrets.rs"]
mod secrets;
#[path = "all/sources.rs"]
mod sources;
#[path = "all/support.rs"]
mod support;
#[path = "all/trust.rs"]
mod trust;
