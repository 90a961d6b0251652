//! Architecture invariants: dependency arrows between workspace crates point one way (`cargo metadata`), every `.rs`
//! file opens with a `//!` header, and a crate with an OS layer calls the OS only through it.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

/// Layers, lowest first. A crate may depend (normally or at build time) only on crates in strictly lower layers.
const LAYERS: &[(&str, u32)] = &[
    ("pimcp-config", 0),
    ("pimcp-auth", 1),
    ("pimcp-surface", 1),
    ("pimcp-actors", 2),
    ("pimcp-proxy", 3),
    ("pimcp-cli", 4),
    ("pimcp-conformance", 4),
    ("pimcp", 5),
];

/// Test-support crates: anyone may use them as dev-dependencies; they depend on no pimcp crate.
const TEST_SUPPORT: &[&str] = &["mcp-fixture"];

/// The model-facing surface is pure: no actor runtime under it (`ractor`, `pimcp-actors`), so search, rendering and
/// the texts can be used, built and tested without one.
#[test]
fn the_surface_has_no_runtime_under_it() -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "pimcp-surface",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8(out.stdout)?;
    let runtime: Vec<&str> = tree
        .lines()
        .filter(|line| {
            line.starts_with("ractor ") || line.starts_with("pimcp-actors ") || line.starts_with("pimcp-proxy ")
        })
        .collect();
    anyhow::ensure!(tree.lines().count() > 5, "cargo tree printed no tree:\n{tree}");
    assert!(runtime.is_empty(), "pimcp-surface depends on the runtime: {runtime:?}");
    Ok(())
}

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

/// The `.rs` files under `dirs` (those that exist), not descending into directories named in `skip`; sorted.
fn rust_files(dirs: &[std::path::PathBuf], skip: &[&str]) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let mut files = Vec::new();
    let mut stack: Vec<std::path::PathBuf> = dirs.iter().filter(|d| d.is_dir()).cloned().collect();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| !skip.iter().any(|s| n == *s)) {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

#[test]
fn every_rust_file_opens_with_a_module_doc() -> anyhow::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    let dirs = ["crates", "src", "tests"].map(|d| root.join(d));
    for path in rust_files(&dirs, &["target", "node_modules"])? {
        if !std::fs::read_to_string(&path)?.trim_start().starts_with("//!") {
            missing.push(path.strip_prefix(root)?.display().to_string());
        }
    }
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
    let dirs = ["crates", "src", "examples"].map(|d| root.join(d));
    for path in rust_files(&dirs, &["target", "node_modules", "tests"])? {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name == "tests.rs" || name.ends_with("_tests.rs") {
            continue;
        }
        let lines = std::fs::read_to_string(&path)?.lines().count();
        if lines > max {
            long.push(format!("{} ({lines} lines)", path.strip_prefix(root)?.display()));
        }
    }
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
    // `sys/` is a crate's OS layer; the token store's back ends are the keyrings of each OS.
    for path in rust_files(&[src.to_path_buf()], &["sys", "store"])? {
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
    Ok(found)
}

/// Every product crate reaches the operating system only through its `src/sys/` (`unix.rs`, `windows.rs`) and, for
/// `pimcp-auth`, the keyring back ends in `src/store/`; tests gated on an OS may use it directly.
#[test]
fn the_crates_call_the_os_only_through_their_sys_layers() -> anyhow::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for krate in ["config", "auth", "surface", "actors", "proxy", "cli"] {
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

/// The files of one crate's `src` and the files each refers to through `crate::…` and `super::…` paths (test
/// modules and `*_tests.rs` files left out). A file is named by its module path (`server/connect`, `lib` for the
/// root); a reference to a module's own ancestor (a child using its parent) is not an edge.
fn module_graph(src: &std::path::Path) -> anyhow::Result<BTreeMap<String, std::collections::BTreeSet<String>>> {
    let mut files: BTreeMap<Vec<String>, std::path::PathBuf> = BTreeMap::new();
    for path in rust_files(&[src.to_path_buf()], &[])? {
        let stem = path.file_stem().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        if stem == "tests" || stem.ends_with("_tests") {
            continue;
        }
        let rel = path.strip_prefix(src)?.with_extension("");
        let mut module: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        if matches!(stem.as_str(), "mod" | "lib" | "main") {
            module.pop();
        }
        files.insert(module, path);
    }
    let resolve = |path: &[String]| -> Option<Vec<String>> {
        (1..=path.len())
            .rev()
            .map(|k| path[..k].to_vec())
            .find(|p| files.contains_key(p))
    };
    let label = |m: &[String]| if m.is_empty() { "lib".to_owned() } else { m.join("/") };
    let mut graph = BTreeMap::new();
    for (module, path) in &files {
        let text = std::fs::read_to_string(path)?;
        let code = ["#[cfg(test)]\nmod tests {", "#[cfg(test)]\npub(crate) mod tests {"]
            .iter()
            .filter_map(|marker| text.find(marker))
            .min()
            .map_or(text.as_str(), |at| &text[..at]);
        let mut edges = std::collections::BTreeSet::new();
        for (prefix, base) in [
            ("crate::", Vec::new()),
            ("super::", module[..module.len().saturating_sub(1)].to_vec()),
        ] {
            for (at, _) in code.match_indices(prefix) {
                if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let rest = &code[at + prefix.len()..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == ':'))
                    .unwrap_or(rest.len());
                let mut path = base.clone();
                path.extend(rest[..end].split("::").filter(|s| !s.is_empty()).map(str::to_owned));
                if let Some(target) = resolve(&path)
                    && target != *module
                    && !module.starts_with(&target)
                {
                    edges.insert(label(&target));
                }
            }
        }
        graph.insert(label(module), edges);
    }
    Ok(graph)
}

/// The largest strongly connected set of files (Tarjan), sorted.
fn largest_cycle(graph: &BTreeMap<String, std::collections::BTreeSet<String>>) -> Vec<String> {
    struct Walk<'a> {
        graph: &'a BTreeMap<String, std::collections::BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        best: Vec<String>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a str) {
        let i = w.index.len();
        w.index.insert(v, i);
        w.low.insert(v, i);
        w.stack.push(v);
        for next in w.graph.get(v).into_iter().flatten() {
            let next = next.as_str();
            if !w.index.contains_key(next) {
                visit(w, next);
                let low = w.low[v].min(w.low[next]);
                w.low.insert(v, low);
            } else if w.stack.contains(&next) {
                let low = w.low[v].min(w.index[next]);
                w.low.insert(v, low);
            }
        }
        if w.low[v] == w.index[v] {
            let at = w.stack.iter().rposition(|&x| x == v).unwrap_or(0);
            let mut set: Vec<String> = w.stack.drain(at..).map(str::to_owned).collect();
            if set.len() > w.best.len() {
                set.sort();
                w.best = set;
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        best: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            visit(&mut walk, v);
        }
    }
    walk.best
}

/// Files that reach each other are one unit to understand: no crate has a cycle of more than three files.
#[test]
fn cycles_between_files_stay_small() -> anyhow::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut report = Vec::new();
    for entry in std::fs::read_dir(root.join("crates"))? {
        let dir = entry?.path();
        if !dir.join("src").is_dir() {
            continue;
        }
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let cycle = largest_cycle(&module_graph(&dir.join("src"))?);
        let allowed = 3;
        report.push(match cycle.len() {
            0 | 1 => format!("{name}: no cycle"),
            n => format!("{name}: {n} files {cycle:?}"),
        });
        assert!(
            cycle.len() <= allowed,
            "crates/{name}: a cycle of {} files (at most {allowed}): {cycle:?}",
            cycle.len()
        );
    }
    eprintln!("largest cycle per crate:\n{}", report.join("\n"));
    Ok(())
}

#[test]
fn the_cycle_check_finds_a_cycle() -> anyhow::Result<()> {
    let root = tempfile::tempdir()?;
    let src = root.path();
    std::fs::create_dir_all(src.join("server"))?;
    std::fs::write(src.join("lib.rs"), "//! x\nmod a;\nmod b;\nmod server;\n")?;
    std::fs::write(src.join("a.rs"), "//! x\nuse crate::b::B;\n")?;
    std::fs::write(
        src.join("b.rs"),
        "//! x\nuse crate::server::S;\nuse crate::server::connect::C;\n",
    )?;
    std::fs::write(src.join("server/mod.rs"), "//! x\nmod connect;\nuse super::a::A;\n")?;
    std::fs::write(
        src.join("server/connect.rs"),
        "//! x\nuse super::Parent;\nuse crate::error::E;\n",
    )?;
    std::fs::write(
        src.join("error.rs"),
        "//! x\n#[cfg(test)]\nmod tests {\n use crate::a::A;\n}\n",
    )?;
    let graph = module_graph(src)?;
    assert_eq!(
        graph["server/connect"].iter().collect::<Vec<_>>(),
        ["error"],
        "a child's use of its parent is no edge"
    );
    assert!(graph["error"].is_empty(), "test modules are left out");
    assert_eq!(largest_cycle(&graph), ["a", "b", "server"]);
    Ok(())
}

/// The actor runtime's data modules stay leaves: none of them reaches an actor (its messages, state or handles), so
/// each can be read, and changed, on its own.
#[test]
fn the_runtime_data_modules_import_no_actor() -> anyhow::Result<()> {
    const LEAVES: [&str; 14] = [
        "msg",
        "job",
        "handles",
        "host",
        "progress",
        "client",
        "error",
        "naming",
        "policy",
        "catalog",
        "cache",
        "status",
        "trace",
        "transport/kind",
    ];
    const ACTORS: [&str; 9] = [
        "server",
        "router",
        "supervisor",
        "runtime",
        "lane",
        "context",
        "auth/actor",
        "call",
        "task",
    ];
    let graph = module_graph(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/actors/src"))?;
    let mut wrong = Vec::new();
    for leaf in LEAVES {
        let edges = graph
            .get(leaf)
            .ok_or_else(|| anyhow::anyhow!("no module `{leaf}` in pimcp-actors"))?;
        wrong.extend(
            edges
                .iter()
                .filter(|t| {
                    ACTORS
                        .iter()
                        .any(|a| t.as_str() == *a || t.starts_with(&format!("{a}/")))
                })
                .map(|t| format!("{leaf} -> {t}")),
        );
    }
    assert!(
        wrong.is_empty(),
        "data modules reaching an actor module:\n{}",
        wrong.join("\n")
    );
    Ok(())
}
