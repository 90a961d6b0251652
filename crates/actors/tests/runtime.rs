//! Integration tests of the actor runtime against the real `mcp-fixture` binary: lifecycle, catalog and cache,
//! call semantics, OAuth logins and refresh, and the chaos suite (crashes, hangs, floods, storms, restarts, crash
//! loops, bounded shutdown).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod runtime {
    pub(crate) mod support;

    mod auth;
    mod basic;
    mod chaos;
    mod early;
    mod handlers;
    mod http;
    mod observability;
    mod retry;
    mod secrets;
    mod stress;
    mod warm;
}
