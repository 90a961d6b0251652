//! `pimcp-guardian`: the guardian executable for Rust hosts that do not serve it from their own binary (and for the
//! tests). pimcp starts one per runtime; it kills every stdio server's process group when pimcp dies (see
//! `pimcp_actors::Guardian`). `pimcp-run` needs none: it is its own guardian.

use std::io::Write as _;

fn main() -> std::process::ExitCode {
    pimcp_actors::guardian_main_if_requested();
    let _ = writeln!(
        std::io::stderr(),
        "{} is started by pimcp, not by hand ({} {})",
        pimcp_actors::GUARDIAN_BINARY,
        pimcp_actors::GUARDIAN_BINARY,
        pimcp_actors::GUARDIAN_ARG
    );
    std::process::ExitCode::from(2)
}
