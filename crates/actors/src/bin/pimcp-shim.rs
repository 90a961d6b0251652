//! `pimcp-shim`: the guardian shim executable. pimcp starts it between itself and every stdio server; it holds
//! `PR_SET_PDEATHSIG` and kills the server's whole process group when pimcp dies (see `pimcp_actors::process::shim`).

fn main() {
    pimcp_actors::process::shim_main_if_requested();
    eprintln!(
        "pimcp-shim is started by pimcp, not by hand: {} {} <parent-pid> <program> [args...]",
        pimcp_actors::process::SHIM_BINARY,
        pimcp_actors::process::SHIM_ARG
    );
    std::process::exit(2);
}
