//! Architecture invariants: dependency arrows between workspace crates point one way (`cargo metadata`), every `.rs`
//! file opens with a `//!` header, and a crate with an OS layer calls the OS only through it.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

/// Layers, lowest first. A crate may depend (normally or at build time) only on crates in strictly lower layers.
const LAYERS: &[(&str, u32)] = &[
    ("pimcp-config", 0),
    ("pimcp-auth", 1),
    ("pimcp-actors", 2),
    ("pimcp-proxy", 3),
    ("pimcp-cli", 4),
    ("pimcp-conformance", 4),
    ("pimcp", 5),
];

/// Test-support crates: anyone may use them as dev-dependencies; they depend on no pimcp crate.
const TEST_SUPPORT: &[&str] = &["mcp-fixture"];

fn metadata() -> anyhow::Result<Value> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// (package, dependency, kind) for every dependency between workspace packages.
fn workspace_edges(meta: &Value) -> Vec<(String, String, String)> {
    let members: Vec<&str> = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["name"].as_str())
        .collect();
    let mut edges = Vec::new();
    for package in meta["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or_default();
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let dep_name = dep["name"].as_str().unwrap_or_default();
            if members.contains(&dep_name) {
                let kind = dep["kind"].as_str().unwrap_or("normal").to_string();
                edges.push((name.to_string(), dep_name.to_string(), kind));
            }
        }
    }
    edges
}

fn violations(edges: &[(String, String, String)]) -> Vec<String> {
    let layer: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let mut bad = Vec::new();
    for (from, to, kind) in edges {
        if TEST_SUPPORT.contains(&from.as_str()) {
            if layer.contains_key(to.as_str()) {
                bad.push(format!("test-support crate `{from}` must not depend on `{to}`"));
            }
            continue;
        }
        if TEST_SUPPORT.contains(&to.as_str()) {
            if kind != "dev" {
                bad.push(format!(
                    "`{from}` may use `{to}` only as a dev-dependency (found a {kind} dependency)"
                ));
            }
            continue;
        }
        match (layer.get(from.as_str()), layer.get(to.as_str())) {
            (Some(a), Some(b)) if a > b => {}
            (Some(_), Some(_)) => bad.push(format!(
                "`{from}` depends on `{to}` ({kind}): arrows must point down the layers"
            )),
            _ => bad.push(format!(
                "`{from}` → `{to}`: crate missing from the layer table in tests/architecture.rs"
            )),
        }
    }
    bad
}

#[test]
fn dependency_arrows_point_one_way() -> anyhow::Result<()> {
    let edges = workspace_edges(&metadata()?);
    assert!(
        !edges.is_empty(),
        "no workspace edges found: is cargo metadata reading the right workspace?"
    );
    let bad = violations(&edges);
    assert!(bad.is_empty(), "architecture violations:\n{}", bad.join("\n"));
    Ok(())
}

#[test]
fn checker_rejects_an_upward_arrow() {
    let edges = vec![
        (
            "pimcp-config".to_string(),
            "pimcp-actors".to_string(),
            "normal".to_string(),
        ),
        (
            "pimcp-proxy".to_string(),
            "mcp-fixture".to_string(),
            "normal".to_string(),
        ),
        (
            "mcp-fixture".to_string(),
            "pimcp-config".to_string(),
            "normal".to_string(),
        ),
    ];
    assert_eq!(violations(&edges).len(), 3);
}

#[test]
fn every_rust_file_opens_with_a_module_doc() -> anyhow::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    let mut stack = vec![root.join("crates"), root.join("src"), root.join("tests")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target" && n != "node_modules") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path)?;
                if !text.trim_start().starts_with("//!") {
                    missing.push(path.strip_prefix(root)?.display().to_string());
                }
            }
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "files without a `//!` header:\n{}",
        missing.join("\n")
    );
    Ok(())
}

/// Longest a file that is not a test may be: past it, a file holds more than one job.
const MAX_FILE_LINES: usize = 700;

/// Rust files of the workspace that are not tests (not under a `tests/` directory, not `tests.rs` or `*_tests.rs`)
/// and are longer than `max` lines.
fn long_files(root: &std::path::Path, max: usize) -> anyhow::Result<Vec<String>> {
    let mut long = Vec::new();
    let mut stack: Vec<_> = ["crates", "src", "examples"]
        .map(|d| root.join(d))
        .into_iter()
        .filter(|d| d.is_dir())
        .collect();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
            if path.is_dir() {
                if !matches!(name.as_str(), "target" | "node_modules" | "tests") {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
                let lines = std::fs::read_to_string(&path)?.lines().count();
                if lines > max {
                    long.push(format!("{} ({lines} lines)", path.strip_prefix(root)?.display()));
                }
            }
        }
    }
    long.sort();
    Ok(long)
}

#[test]
fn no_file_but_a_test_is_longer_than_700_lines() -> anyhow::Result<()> {
    let long = long_files(std::path::Path::new(env!("CARGO_MANIFEST_DIR")), MAX_FILE_LINES)?;
    assert!(long.is_empty(), "split these along their seams:\n{}", long.join("\n"));
    Ok(())
}

#[test]
fn the_length_check_finds_a_long_file() -> anyhow::Result<()> {
    let root = tempfile::tempdir()?;
    let src = root.path().join("crates/x/src");
    std::fs::create_dir_all(&src)?;
    std::fs::write(src.join("long.rs"), "//! x\n".repeat(11))?;
    std::fs::write(src.join("long_tests.rs"), "//! x\n".repeat(11))?;
    std::fs::write(src.join("short.rs"), "//! x\n")?;
    assert_eq!(long_files(root.path(), 10)?, ["crates/x/src/long.rs (11 lines)"]);
    Ok(())
}

/// The OS calls of a crate whose OS layer is done: outside its `src/sys/`, `libc` and `std::os::{unix,windows}`
/// appear only in test modules gated on the OS (`#[cfg(all(test, unix))]`, or a `#[cfg(unix)]` test). Returns the
/// offending `file:line`s.
fn ungated_os_calls(src: &std::path::Path) -> anyhow::Result<Vec<String>> {
    const OS_APIS: [&str; 10] = [
        "libc::",
        "std::os::unix",
        "std::os::windows",
        "std::os::fd",
        "tokio::signal::unix",
        "tokio::signal::windows",
        "tokio::net::unix",
        "tokio::net::Unix",
        "tokio::net::windows",
        "\"/proc",
    ];
    let mut found = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                // `sys/` is a crate's OS layer; the token store's back ends are the keyrings of each OS.
                if path.file_name().is_some_and(|n| n != "sys" && n != "store") {
                    stack.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path)?;
            // Everything after the OS-gated test module is test code for that OS.
            let gated_tests = text.find("#[cfg(all(test, unix))]").unwrap_or(text.len());
            let mut offset = 0;
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                let start = offset;
                offset += line.len() + 1;
                if start >= gated_tests
                    || line.trim_start().starts_with("//")
                    || !OS_APIS.iter().any(|api| line.contains(api))
                {
                    continue;
                }
                // A test function gated on the OS: its attribute is among the few lines above it.
                let gated_fn = lines[..i]
                    .iter()
                    .rev()
                    .take(40)
                    .any(|l| l.trim_start().starts_with("#[cfg(unix)]"));
                let in_tests = text[..start].contains("mod tests")
                    || path
                        .file_stem()
                        .is_some_and(|n| n.to_string_lossy().ends_with("_tests"));
                if !gated_fn || !in_tests {
                    found.push(format!("{}:{}", path.display(), i + 1));
                }
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Every product crate reaches the operating system only through its `src/sys/` (`unix.rs`, `windows.rs`) and, for
/// `pimcp-auth`, the keyring back ends in `src/store/`; tests gated on an OS may use it directly.
#[test]
fn the_crates_call_the_os_only_through_their_sys_layers() -> anyhow::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for krate in ["config", "auth", "actors", "proxy", "cli"] {
        found.extend(ungated_os_calls(&root.join("crates").join(krate).join("src"))?);
    }
    found.extend(ungated_os_calls(&root.join("src"))?);
    assert!(
        found.is_empty(),
        "OS calls outside a crate's sys layer:\n{}",
        found.join("\n")
    );
    Ok(())
}

#[test]
fn the_os_layer_check_finds_an_ungated_call() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::write(
        dir.path().join("lib.rs"),
        "//! x\nfn f() { unsafe { libc::getpid() }; }\n#[cfg(all(test, unix))]\nmod tests { use std::os::unix::fs::MetadataExt; }\n",
    )?;
    std::fs::create_dir(dir.path().join("sys"))?;
    std::fs::write(
        dir.path().join("sys/unix.rs"),
        "//! x\nuse std::os::unix::fs::MetadataExt;\n",
    )?;
    let found = ungated_os_calls(dir.path())?;
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].ends_with("lib.rs:2"), "{found:?}");
    Ok(())
}

/// The public surface of the `pimcp` crate, one line per item, read from `src/lib.rs`: re-exports by path, the
/// facade's own types, constants and functions with their signatures, and the public methods of its types.
fn public_api(source: &str) -> anyhow::Result<Vec<String>> {
    use quote::ToTokens;
    fn uses(tree: &syn::UseTree, prefix: &str, out: &mut Vec<String>) {
        match tree {
            syn::UseTree::Path(p) => uses(&p.tree, &format!("{prefix}{}::", p.ident), out),
            syn::UseTree::Name(n) => out.push(format!("{prefix}{}", n.ident)),
            syn::UseTree::Rename(r) => out.push(format!("{prefix}{} as {}", r.ident, r.rename)),
            syn::UseTree::Glob(_) => out.push(format!("{prefix}*")),
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| uses(t, prefix, out)),
        }
    }
    fn items(list: &[syn::Item], module: &str, out: &mut Vec<String>) {
        let public = |v: &syn::Visibility| matches!(v, syn::Visibility::Public(_));
        let flat = |t: &dyn ToTokens| t.to_token_stream().to_string();
        for item in list {
            match item {
                syn::Item::Use(u) if public(&u.vis) => {
                    let mut paths = Vec::new();
                    uses(&u.tree, "", &mut paths);
                    let scope = if module.is_empty() {
                        String::new()
                    } else {
                        format!("{}: ", module.trim_end_matches("::"))
                    };
                    out.extend(paths.into_iter().map(|p| format!("{scope}pub use {p}")));
                }
                syn::Item::Mod(m) if public(&m.vis) => {
                    if let Some((_, inner)) = &m.content {
                        items(inner, &format!("{module}{}::", m.ident), out);
                    }
                }
                syn::Item::Fn(f) if public(&f.vis) => out.push(format!("{module}{}", flat(&f.sig))),
                syn::Item::Const(c) if public(&c.vis) => {
                    out.push(format!("{module}const {}: {}", c.ident, flat(&c.ty)))
                }
                syn::Item::Struct(s) if public(&s.vis) => {
                    out.push(format!("{module}struct {}", s.ident));
                    for field in s.fields.iter().filter(|f| public(&f.vis)) {
                        let name = field.ident.as_ref().map(ToString::to_string).unwrap_or_default();
                        out.push(format!("{module}{}.{name}: {}", s.ident, flat(&field.ty)));
                    }
                }
                syn::Item::Enum(e) if public(&e.vis) => {
                    out.push(format!("{module}enum {}", e.ident));
                    for variant in &e.variants {
                        let types: Vec<String> = variant.fields.iter().map(|f| flat(&f.ty)).collect();
                        let fields = if types.is_empty() {
                            String::new()
                        } else {
                            format!("({})", types.join(", "))
                        };
                        out.push(format!("{module}{}::{}{fields}", e.ident, variant.ident));
                    }
                }
                syn::Item::Impl(i) if i.trait_.is_none() => {
                    let ty = flat(&i.self_ty);
                    for inner in &i.items {
                        if let syn::ImplItem::Fn(f) = inner
                            && public(&f.vis)
                        {
                            out.push(format!("{module}impl {ty}: {}", flat(&f.sig)));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let file = syn::parse_file(source)?;
    let mut out = Vec::new();
    items(&file.items, "", &mut out);
    Ok(out)
}

/// The public API of `pimcp` is the checked-in `tests/public_api.txt`: a change to the boundary is a reviewed diff of
/// that file. `PIMCP_BLESS=1` rewrites it.
#[test]
fn the_public_api_is_the_snapshot() -> anyhow::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let api = public_api(&std::fs::read_to_string(root.join("src/lib.rs"))?)?.join("\n") + "\n";
    let snapshot = root.join("tests/public_api.txt");
    if std::env::var_os("PIMCP_BLESS").is_some() {
        std::fs::write(&snapshot, &api)?;
    }
    let expected = std::fs::read_to_string(&snapshot)?;
    let (now, then): (Vec<&str>, Vec<&str>) = (api.lines().collect(), expected.lines().collect());
    let added: Vec<&&str> = now.iter().filter(|l| !then.contains(l)).collect();
    let removed: Vec<&&str> = then.iter().filter(|l| !now.contains(l)).collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "the public API of pimcp changed; if that is intended, run with PIMCP_BLESS=1 and review the diff of \
         tests/public_api.txt\nadded: {added:#?}\nremoved: {removed:#?}"
    );
    Ok(())
}

#[test]
fn the_public_api_lists_items_signatures_and_fields() -> anyhow::Result<()> {
    let api = public_api(
        "pub use a::{B, c::D as E};\npub struct S { pub x: u32, y: u8 }\nstruct Hidden;\n\
         impl S { pub fn new(x: u32) -> S { S { x, y: 0 } } fn private(&self) {} }\npub mod m { pub const N: usize = 1; }",
    )?;
    assert_eq!(
        api,
        [
            "pub use a::B",
            "pub use a::c::D as E",
            "struct S",
            "S.x: u32",
            "impl S: fn new (x : u32) -> S",
            "m::const N: usize",
        ]
    );
    Ok(())
}
