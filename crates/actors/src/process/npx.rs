//! `npx` / `npm exec` resolution: run the installed package binary directly instead of
//! paying for an npm parent process on every spawn; the answer is cached 24 h in a JSON file.
//!
//! Lookup order: the cache file (entry younger than 24 h whose binary still exists) → `node_modules/.bin` in the
//! working directory and its ancestors → the npm cache's `_npx/*/node_modules/<pkg>` (newest first; cache dir from
//! the server's or our `NPM_CONFIG_CACHE`, else `~/.npm`, `%LOCALAPPDATA%\npm-cache` on Windows) → the global
//! prefix (`npm prefix -g`, 10 s cap).
//! Anything unusual (unknown flags, several packages, a version that does not match) keeps the original command.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// How long a cached resolution is trusted.
pub(super) const NPX_CACHE_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// Cap for `npm prefix -g`.
const NPM_PREFIX_TIMEOUT: Duration = Duration::from_secs(10);
const CACHE_VERSION: u32 = 1;

/// A resolved npx command: run `program args…` instead of the original.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NpxResolution {
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// What an `npx`/`npm exec` command line asks for.
#[derive(Debug, PartialEq, Eq)]
struct NpxRequest {
    /// `name` or `name@spec` as written.
    package: String,
    /// The binary to run when `-p` named the package and the command is separate.
    bin: Option<String>,
    rest: Vec<String>,
}

impl NpxRequest {
    fn name(&self) -> &str {
        split_spec(&self.package).0
    }
    fn version(&self) -> Option<&str> {
        split_spec(&self.package).1
    }
}

/// `@scope/name@1.2.3` → (`@scope/name`, Some(`1.2.3`)).
fn split_spec(spec: &str) -> (&str, Option<&str>) {
    let search_from = usize::from(spec.starts_with('@'));
    match spec[search_from..].find('@') {
        Some(i) => (&spec[..search_from + i], Some(&spec[search_from + i + 1..])),
        None => (spec, None),
    }
}

fn parse(command: &str, args: &[String]) -> Option<NpxRequest> {
    let base = Path::new(command).file_name()?.to_str()?;
    let args: &[String] = match base {
        "npx" => args,
        "npm" => match args.first().map(String::as_str) {
            Some("exec" | "x") => &args[1..],
            _ => return None,
        },
        _ => return None,
    };
    let mut package: Option<String> = None;
    let mut positional: Vec<String> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if !positional.is_empty() {
            positional.push(args[i].clone());
        } else if a == "--" {
            positional.extend(args[i + 1..].iter().cloned());
            break;
        } else if a == "-y" || a == "--yes" || a == "-q" || a == "--quiet" {
        } else if a == "-p" || a == "--package" {
            if package.is_some() {
                return None;
            }
            package = Some(args.get(i + 1)?.clone());
            i += 1;
        } else if let Some(p) = a.strip_prefix("--package=") {
            if package.is_some() {
                return None;
            }
            package = Some(p.to_owned());
        } else if a.starts_with('-') {
            return None;
        } else {
            positional.push(args[i].clone());
        }
        i += 1;
    }
    let mut positional = positional.into_iter();
    match package {
        Some(package) => {
            let bin = positional.next()?;
            Some(NpxRequest {
                package,
                bin: Some(bin),
                rest: positional.collect(),
            })
        }
        None => {
            let package = positional.next()?;
            Some(NpxRequest {
                package,
                bin: None,
                rest: positional.collect(),
            })
        }
    }
}

#[derive(Serialize, Deserialize, Default)]
struct CacheFile {
    version: u32,
    entries: BTreeMap<String, CacheEntry>,
}

#[derive(Serialize, Deserialize, Clone)]
struct CacheEntry {
    bin: PathBuf,
    is_js: bool,
    resolved_at: u64,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn cache_key(req: &NpxRequest) -> String {
    format!("{}|{}", req.package, req.bin.as_deref().unwrap_or(""))
}

fn read_cache(path: &Path) -> CacheFile {
    pimcp_config::read_bounded(path, pimcp_config::CONFIG_FILE_LIMIT)
        .ok()
        .and_then(|b| serde_json::from_slice::<CacheFile>(&b).ok())
        .filter(|c| c.version == CACHE_VERSION)
        .unwrap_or_default()
}

fn write_cache(path: &Path, req: &NpxRequest, entry: CacheEntry) {
    let mut cache = read_cache(path);
    cache.version = CACHE_VERSION;
    let now = now_secs();
    cache
        .entries
        .retain(|_, e| now.saturating_sub(e.resolved_at) < NPX_CACHE_TTL.as_secs());
    cache.entries.insert(cache_key(req), entry);
    let Ok(json) = serde_json::to_vec_pretty(&cache) else {
        return;
    };
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    if std::fs::write(&tmp, json).is_ok() && std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Resolves an `npx`/`npm exec` command to the installed package binary. `env` is the server's environment overlay
/// (consulted for `NPM_CONFIG_CACHE` and `HOME` before ours). Blocking (file system, maybe `npm prefix -g`).
pub(crate) fn resolve_npx(
    command: &str,
    args: &[String],
    cwd: &Path,
    env: &[(String, String)],
    cache_file: Option<&Path>,
) -> Option<NpxResolution> {
    let req = parse(command, args)?;
    let now = now_secs();
    if let Some(path) = cache_file
        && let Some(entry) = read_cache(path).entries.get(&cache_key(&req))
        && now.saturating_sub(entry.resolved_at) < NPX_CACHE_TTL.as_secs()
        && entry.bin.is_file()
    {
        return Some(finish(&req, entry.bin.clone(), entry.is_js));
    }
    let lookup = |key: &str| -> Option<OsString> {
        env.iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| OsString::from(v))
            .or_else(|| std::env::var_os(key))
    };
    let bin = find_in_node_modules(&req, cwd)
        .or_else(|| find_in_npx_cache(&req, &lookup))
        .or_else(|| find_in_global_prefix(&req))?;
    let is_js = is_js_file(&bin);
    if let Some(path) = cache_file {
        write_cache(
            path,
            &req,
            CacheEntry {
                bin: bin.clone(),
                is_js,
                resolved_at: now,
            },
        );
    }
    Some(finish(&req, bin, is_js))
}

fn finish(req: &NpxRequest, bin: PathBuf, is_js: bool) -> NpxResolution {
    if is_js {
        let mut args = vec![bin.to_string_lossy().into_owned()];
        args.extend(req.rest.iter().cloned());
        NpxResolution {
            program: PathBuf::from("node"),
            args,
        }
    } else {
        NpxResolution {
            program: bin,
            args: req.rest.clone(),
        }
    }
}

fn is_js_file(path: &Path) -> bool {
    if matches!(path.extension().and_then(|e| e.to_str()), Some("js" | "mjs" | "cjs")) {
        return true;
    }
    let mut head = [0_u8; 128];
    let n = pimcp_config::open_regular(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .unwrap_or(0);
    let first = String::from_utf8_lossy(&head[..n]);
    first.starts_with("#!") && first.lines().next().is_some_and(|l| l.contains("node"))
}

/// `<dir>/node_modules/<pkg>/package.json` → the binary it declares, if the version matches.
fn bin_from_package_dir(req: &NpxRequest, pkg_dir: &Path) -> Option<PathBuf> {
    let manifest: serde_json::Value = serde_json::from_slice(
        &pimcp_config::read_bounded(&pkg_dir.join("package.json"), pimcp_config::CONFIG_FILE_LIMIT).ok()?,
    )
    .ok()?;
    if let Some(wanted) = req.version().filter(|v| is_exact_version(v))
        && manifest.get("version").and_then(|v| v.as_str()) != Some(wanted)
    {
        return None;
    }
    let short = req.name().rsplit('/').next().unwrap_or(req.name());
    let rel = match manifest.get("bin")? {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Object(map) => {
            let pick = req
                .bin
                .as_deref()
                .and_then(|b| map.get(b))
                .or_else(|| map.get(short))
                .or_else(|| map.get(req.name()));
            let pick = pick.or_else(|| if map.len() == 1 { map.values().next() } else { None })?;
            pick.as_str()?.to_owned()
        }
        _ => return None,
    };
    let path = pkg_dir.join(rel);
    path.is_file().then_some(path)
}

fn is_exact_version(v: &str) -> bool {
    !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_digit() || c == '.' || c == '-' || c.is_ascii_alphanumeric())
        && v.chars().next().is_some_and(|c| c.is_ascii_digit())
}

fn find_in_node_modules(req: &NpxRequest, cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .find_map(|dir| bin_from_package_dir(req, &dir.join("node_modules").join(req.name())))
}

fn find_in_npx_cache(req: &NpxRequest, lookup: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let cache_dir = lookup("NPM_CONFIG_CACHE")
        .or_else(|| lookup("npm_config_cache"))
        .map(PathBuf::from)
        .or_else(|| crate::sys::default_npm_cache(lookup))?;
    let mut dirs: Vec<(SystemTime, PathBuf)> = std::fs::read_dir(cache_dir.join("_npx"))
        .ok()?
        .flatten()
        .filter_map(|e| {
            let pkg = e.path().join("node_modules").join(req.name());
            let mtime = std::fs::metadata(pkg.join("package.json"))
                .and_then(|m| m.modified())
                .ok()?;
            Some((mtime, pkg))
        })
        .collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.0));
    dirs.into_iter().find_map(|(_, dir)| bin_from_package_dir(req, &dir))
}

fn find_in_global_prefix(req: &NpxRequest) -> Option<PathBuf> {
    let mut npm = std::process::Command::new("npm");
    super::strip_control_env(&mut npm);
    let mut child = npm
        .args(["prefix", "-g"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + NPM_PREFIX_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(_)) | Err(_) => return None,
            Ok(None) if std::time::Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut out).ok()?;
    let prefix = PathBuf::from(out.trim());
    bin_from_package_dir(req, &prefix.join("lib").join("node_modules").join(req.name()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn parses_the_common_shapes() {
        let r = parse("npx", &s(&["-y", "@scope/srv@1.2.3", "--port", "1"])).unwrap();
        assert_eq!(
            (r.name(), r.version(), r.rest.clone()),
            ("@scope/srv", Some("1.2.3"), s(&["--port", "1"]))
        );
        let r = parse("/usr/bin/npx", &s(&["--package=pkg", "pkg-bin", "a"])).unwrap();
        assert_eq!(
            (r.name(), r.bin.as_deref(), r.rest.clone()),
            ("pkg", Some("pkg-bin"), s(&["a"]))
        );
        let r = parse("npm", &s(&["exec", "--yes", "--", "srv", "x"])).unwrap();
        assert_eq!((r.name(), r.rest.clone()), ("srv", s(&["x"])));
        assert!(parse("npx", &s(&["--registry", "x", "srv"])).is_none());
        assert!(parse("npm", &s(&["run", "x"])).is_none());
        assert!(parse("node", &s(&["x"])).is_none());
    }

    #[test]
    fn resolves_from_the_npx_cache_and_caches_the_answer() {
        let tmp = tempfile::tempdir().unwrap();
        let pkg = tmp.path().join("npm/_npx/abc123/node_modules/@acme/mcp");
        std::fs::create_dir_all(pkg.join("dist")).unwrap();
        std::fs::write(
            pkg.join("package.json"),
            r#"{"name":"@acme/mcp","version":"1.0.0","bin":{"mcp":"dist/cli.js"}}"#,
        )
        .unwrap();
        std::fs::write(pkg.join("dist/cli.js"), "#!/usr/bin/env node\n").unwrap();
        let env = vec![(
            "NPM_CONFIG_CACHE".to_owned(),
            tmp.path().join("npm").to_string_lossy().into_owned(),
        )];
        let cache = tmp.path().join("npx-cache.json");
        let r = resolve_npx(
            "npx",
            &s(&["-y", "@acme/mcp@1.0.0", "--flag"]),
            tmp.path(),
            &env,
            Some(&cache),
        )
        .unwrap();
        assert_eq!(r.program, PathBuf::from("node"));
        // Compared by components: a package name's `/` and the OS's separator may both appear in the path.
        assert!(
            Path::new(&r.args[0])
                .components()
                .eq(pkg.join("dist/cli.js").components()),
            "{:?}",
            r.args
        );
        assert_eq!(r.args[1], "--flag");
        assert!(cache.exists());
        // A version that does not match is not used.
        assert!(resolve_npx("npx", &s(&["-y", "@acme/mcp@2.0.0"]), tmp.path(), &env, None).is_none());
    }
}
