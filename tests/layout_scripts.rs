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
    assert!(stderr.contains("Ran "), "unittest reported no run:\n{stderr}");
}
