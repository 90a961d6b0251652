//! The layout scripts' unit tests (`bench/layout/test_layout.py`: order.py's and session.py's parsing and
//! bookkeeping), run with the machine's `python3` so that `cargo test` covers them.

#![allow(clippy::expect_used)]

use std::process::Command;

#[test]
fn layout_scripts_pass_their_unit_tests() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("python3")
        .args([
            "-W",
            "error::ResourceWarning",
            "-m",
            "unittest",
            "discover",
            "-s",
            "bench/layout",
            "-p",
            "test_*.py",
        ])
        .current_dir(root)
        .output()
        .expect("python3 runs (the layout scripts' tests need it)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bench/layout tests failed ({}):\n{stderr}",
        out.status
    );
    // Python 3.11's unittest exits 0 when discovery finds nothing ("Ran 0 tests"): that must not pass.
    let ran: u32 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("Ran ")?.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    assert!(ran > 0, "unittest ran no test:\n{stderr}");
}
