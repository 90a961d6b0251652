//! placeholder bench
fn main() {}
