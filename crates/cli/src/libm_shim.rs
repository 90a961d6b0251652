//! The two C math functions pimcp-run's dependencies call, defined here from the pure-Rust `libm` crate so that the
//! binary does not load glibc's `libm.so.6`: tokio's multi-thread scheduler statistics call `pow` (`f64::powf`, for
//! `serve --http`) and num-bigint (under jsonschema) calls `log2`. Loading libm costs the stdio server ~0.3 MiB of
//! resident memory for two functions it barely uses (docs/benchmarks.md, "less code on the serving path"). With no
//! undefined reference left, the linker's `--as-needed` drops libm from the binary's `NEEDED` list; a test
//! (`tests/all/commands.rs`, `pimcp_run_does_not_load_libm`) fails when a dependency starts calling another libm
//! function, naming none: `nm -D --undefined-only` on the binary shows which.
//!
//! Both are musl's algorithms (the `libm` crate is their port): within 1 ULP of glibc's, which is all the callers
//! need (an average of poll times; a capacity estimate). The symbols are the executable's own: shared libraries keep
//! their own references, and no other code in the process calls these.

#![cfg(all(target_os = "linux", target_env = "gnu"))]
#![allow(
    unsafe_code,
    reason = "a C symbol the linker resolves to must be unmangled, which is an unsafe attribute"
)]

/// C's `pow(x, y)`.
#[unsafe(no_mangle)]
pub extern "C" fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}

/// C's `log2(x)`.
#[unsafe(no_mangle)]
pub extern "C" fn log2(x: f64) -> f64 {
    libm::log2(x)
}

#[cfg(test)]
mod tests {
    #[test]
    fn pow_and_log2_answer_as_c_does() {
        let cases = [
            (2.0, 10.0, 1024.0),
            (0.5, 2.0, 0.25),
            (9.0, 0.5, 3.0),
            (0.0, 0.0, 1.0),
            (-2.0, 3.0, -8.0),
        ];
        for (x, y, want) in cases {
            assert_eq!(super::pow(x, y), want, "pow({x}, {y})");
        }
        assert!(super::pow(-1.0, 0.5).is_nan());
        assert_eq!(super::log2(8.0), 3.0);
        assert_eq!(super::log2(1.0), 0.0);
        assert_eq!(super::log2(0.0), f64::NEG_INFINITY);
        assert!((super::log2(10.0) - std::f64::consts::LOG2_10).abs() < 1e-15);
    }
}
