//! Integration tests of the transport + process layer against the real `mcp-fixture` binary: stdio (eras, env,
//! cwd, secrets, startup failures, stderr, shutdown, parent death), Streamable HTTP (auth, hints, sessions) and
//! Unix sockets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod transport {
    pub mod support;

    mod http;
    mod lifecycle;
    mod secrets;
    mod socket;
    mod sse;
    mod stdio;
}
