//! The real per-OS config file locations of each host, user scope first, then project scope.

use std::path::{Path, PathBuf};

use super::{HostKind, ImportEnv, ImportScope, Os};

/// Candidate files of `host`, in merge order (later wins), without duplicates. User-scope files are left out when
/// `env.home` is empty.
pub(super) fn candidates(host: HostKind, env: &ImportEnv) -> Vec<(ImportScope, PathBuf)> {
    let mut out: Vec<(ImportScope, PathBuf)> = Vec::new();
    let has_home = !env.home.as_os_str().is_empty();
    let mut user = |path: Option<PathBuf>| {
        if let Some(path) = path {
            out.push((ImportScope::User, path));
        }
    };
    let home = &env.home;
    match host {
        HostKind::Cursor => user(has_home.then(|| home.join(".cursor").join("mcp.json"))),
        // `.mcp.json` is pimcp's own source 5 and the `projects[<dir>]` scope lives inside `~/.claude.json`.
        HostKind::ClaudeCode => user(has_home.then(|| home.join(".claude.json"))),
        HostKind::ClaudeDesktop => {
            user(app_config_dir(env).map(|dir| dir.join("Claude").join("claude_desktop_config.json")))
        }
        HostKind::OpenCode => {
            // OpenCode uses xdg-basedir on every OS: `$XDG_CONFIG_HOME/opencode` or `~/.config/opencode`, merging
            // `config.json` (legacy), `opencode.json`, `opencode.jsonc` in that order.
            if let Some(dir) = xdg_config_home(env) {
                let dir = dir.join("opencode");
                for name in ["config.json", "opencode.json", "opencode.jsonc"] {
                    user(Some(dir.join(name)));
                }
            }
        }
        HostKind::VsCode => user(app_config_dir(env).map(|dir| dir.join("Code").join("User").join("mcp.json"))),
        HostKind::Windsurf => {
            user(has_home.then(|| home.join(".codeium").join("windsurf").join("mcp_config.json")));
        }
        HostKind::Codex => {
            let dir = match &env.codex_home {
                Some(dir) => Some(dir.clone()),
                None => has_home.then(|| home.join(".codex")),
            };
            user(dir.map(|dir| dir.join("config.toml")));
        }
    }
    let project = &env.project_dir;
    let project_files: Vec<PathBuf> = match host {
        HostKind::Cursor => vec![project.join(".cursor").join("mcp.json")],
        HostKind::VsCode => vec![project.join(".vscode").join("mcp.json")],
        HostKind::OpenCode => vec![
            project.join("opencode.json"),
            project.join("opencode.jsonc"),
            project.join(".opencode").join("opencode.json"),
            project.join(".opencode").join("opencode.jsonc"),
        ],
        // Codex reads `<project>/.codex/config.toml` for projects it trusts; pimcp's own project trust gates it here.
        HostKind::Codex => vec![project.join(".codex").join("config.toml")],
        HostKind::ClaudeCode | HostKind::ClaudeDesktop | HostKind::Windsurf => Vec::new(),
    };
    if !project.as_os_str().is_empty() {
        out.extend(project_files.into_iter().map(|path| (ImportScope::Project, path)));
    }
    let mut seen: Vec<PathBuf> = Vec::new();
    out.retain(|(_, path)| {
        if seen.contains(path) {
            false
        } else {
            seen.push(path.clone());
            true
        }
    });
    out
}

/// Scope of a path returned by [`candidates`] (a path that is not a candidate counts as project scope when it lies
/// under the project directory).
pub(super) fn scope_of(host: HostKind, path: &Path, env: &ImportEnv) -> ImportScope {
    match candidates(host, env).into_iter().find(|(_, p)| p == path) {
        Some((scope, _)) => scope,
        None if !env.project_dir.as_os_str().is_empty() && path.starts_with(&env.project_dir) => ImportScope::Project,
        None => ImportScope::User,
    }
}

/// The per-user application config directory of GUI apps: `~/Library/Application Support` (macOS),
/// `%APPDATA%` (Windows), `$XDG_CONFIG_HOME` or `~/.config` (Linux).
fn app_config_dir(env: &ImportEnv) -> Option<PathBuf> {
    let has_home = !env.home.as_os_str().is_empty();
    match env.os {
        Os::MacOs => has_home.then(|| env.home.join("Library").join("Application Support")),
        Os::Windows => env
            .appdata
            .clone()
            .or_else(|| has_home.then(|| env.home.join("AppData").join("Roaming"))),
        Os::Linux => xdg_config_home(env),
    }
}

fn xdg_config_home(env: &ImportEnv) -> Option<PathBuf> {
    env.xdg_config_home
        .clone()
        .or_else(|| (!env.home.as_os_str().is_empty()).then(|| env.home.join(".config")))
}
