//! Integration tests of the transport + process layer against the real `mcp-fixture` binary: stdio (eras, env,
//! cwd, secrets, startup failures, stderr, shutdown, parent death), Streamable HTTP (auth, hints, sessions) and
//! Unix sockets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod transport {
    pub(crate) mod support;

    mod http;
    // Process groups, signals and parent death (Unix; Windows jobs are checked under Wine by `.ci/cross`).
    #[cfg(unix)]
    mod lifecycle;
    mod secrets;
    #[cfg(unix)]
    mod socket;
    mod sse;
    mod stdio;
}
