//! `pimcp-shim`: the guardian shim executable. pimcp starts it between itself and every stdio server; it holds
//! `PR_SET_PDEATHSIG` and kills the server's whole process group when pimcp dies (see `pimcp_actors::process::shim`).
//!
//! It runs once per server spawn, on the first call's path, so it skips std's runtime set-up (`#![no_main]`): that
//! set-up reads `/proc/self/maps` to place the main thread's stack guard and installs a stack-overflow handler on an
//! alternate stack (about 100 k instructions and a dozen system calls, a third of the shim's own start). std still
//! works without it (on Linux/glibc the arguments come from `.init_array`). Of what it did, the shim keeps one
//! thing: `SIGPIPE` ignored, so a write to a closed stderr is an error, not death (a spawned server still starts
//! with the default `SIGPIPE`: std's spawn resets it).
#![no_main]

use std::ffi::{c_char, c_int};
use std::io::Write as _;

#[allow(
    unsafe_code,
    reason = "#![no_main] needs an unmangled C `main`; it only calls safe code and one signal(2)"
)]
#[unsafe(no_mangle)]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    // SAFETY: signal(2) with SIG_IGN installs no handler and touches no memory of ours.
    #[allow(unsafe_code, reason = "signal dispositions have no safe std equivalent")]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    pimcp_actors::process::shim_main_if_requested();
    let _ = writeln!(
        std::io::stderr(),
        "pimcp-shim is started by pimcp, not by hand: {} {} <parent-pid> <program> [args...]",
        pimcp_actors::process::SHIM_BINARY,
        pimcp_actors::process::SHIM_ARG
    );
    2
}
