//! What host imports would contribute (`pimcp-run config import`, `pimcp-run init`): per host, the files read, each
//! server and how it would combine with pimcp's own files, and the notes of the translation. Read-only; values are
//! never part of the result.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

use crate::entries::parse_server;
use crate::imports::{self, HostKind, ImportScope};
use crate::load::load_detailed;
use crate::model::{HostConfigDiscovery, Origin};
use crate::options::LoadOptions;
use crate::problems::ConfigProblem;
use crate::problems::Sink;
use crate::trust::TrustView;

/// One host's contribution.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostPreview {
    /// The id used in `imports`.
    pub host: String,
    /// Already listed in `imports` (or enabled by `hostConfigDiscovery: "on"`), i.e. loaded today.
    pub active: bool,
    /// The host's config files that were looked at.
    pub files: Vec<ImportFilePreview>,
    /// The servers they define.
    pub servers: Vec<ImportServerPreview>,
    /// Notes and problems, each naming the file, server and field.
    pub notes: Vec<ConfigProblem>,
}

/// One host config file.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportFilePreview {
    /// The file.
    pub path: PathBuf,
    /// `user` or `project`.
    pub scope: &'static str,
    /// For project-scope files: whether project trust covers them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trusted: Option<bool>,
    /// Why the file could not be read or parsed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One server a host file defines.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportServerPreview {
    /// The server's name.
    pub name: String,
    /// The file that defines it.
    pub path: PathBuf,
    /// `stdio`, `http`, `socket`, or `unknown` when the entry has no transport.
    pub transport: &'static str,
    /// `new` (nothing else defines it), `under-files` (pimcp files also define it; their fields win),
    /// `shadowed` (an earlier import defines it and wins), `invalid` (skipped).
    pub status: &'static str,
    /// For `under-files`: the files whose fields win; for `shadowed`: the import that wins.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub by: Vec<String>,
}

/// Previews `hosts` (every host with a config file, plus the active ones, when empty).
pub fn preview_imports(opts: &LoadOptions, hosts: &[HostKind]) -> Vec<HostPreview> {
    let loaded = load_detailed(opts);
    let env = opts.import_env();
    let trust = TrustView::load(&opts.project_dir, &opts.data_dir);
    // Hosts active today, in the loader's order.
    let mut active: Vec<HostKind> = Vec::new();
    for source in loaded.sources.iter() {
        if let Origin::Import { host, .. } = &source.file.origin
            && let Some(host) = HostKind::from_id(host)
            && !active.contains(&host)
        {
            active.push(host);
        }
    }
    if loaded.config.settings.host_config_discovery == HostConfigDiscovery::On {
        for (host, _) in imports::detect_hosts(&env) {
            if !active.contains(&host) {
                active.push(host);
            }
        }
    }
    let mut wanted: Vec<HostKind> = hosts.to_vec();
    if wanted.is_empty() {
        wanted = active.clone();
        for (host, _) in imports::detect_hosts(&env) {
            if !wanted.contains(&host) {
                wanted.push(host);
            }
        }
    }
    // Which pimcp files define each server name (valid or not: any entry there overrides the import's fields).
    let mut file_definers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (kind, path) in opts.sources() {
        let Ok(text) = crate::read::read_text_bounded(&path, crate::read::CONFIG_FILE_LIMIT) else {
            continue;
        };
        let Ok(Some(root)) = crate::parse_jsonc(&text) else {
            continue;
        };
        let origin = Origin::File { source: kind, path };
        for key in ["mcp-servers", "mcpServers"] {
            for name in root
                .get(key)
                .and_then(Value::as_object)
                .into_iter()
                .flat_map(|m| m.keys())
            {
                let files = file_definers.entry(name.clone()).or_default();
                if !files.contains(&origin.to_string()) {
                    files.push(origin.to_string());
                }
            }
        }
    }
    let mut claimed: BTreeMap<String, String> = BTreeMap::new();
    // Servers claimed by active imports that come before a host in the loader's order.
    let mut out = Vec::new();
    for host in wanted {
        let mut preview = HostPreview {
            host: host.id().to_string(),
            active: active.contains(&host),
            files: Vec::new(),
            servers: Vec::new(),
            notes: Vec::new(),
        };
        let mut host_servers: Vec<ImportServerPreview> = Vec::new();
        for result in imports::read_host(host, &env) {
            let file = match result {
                Ok(file) => file,
                Err(err) => {
                    let scope = if err.path().starts_with(&opts.project_dir) {
                        "project"
                    } else {
                        "user"
                    };
                    preview.files.push(ImportFilePreview {
                        path: err.path().to_path_buf(),
                        scope,
                        trusted: None,
                        error: Some(err.to_string()),
                    });
                    continue;
                }
            };
            let project = file.scope(&env) == ImportScope::Project;
            preview.files.push(ImportFilePreview {
                path: file.path.clone(),
                scope: if project { "project" } else { "user" },
                trusted: project.then(|| opts.trust_project || trust.file_trusted(&file.path)),
                error: None,
            });
            let mut sink = Sink::new(&mut preview.notes, Some(&file.path));
            for note in &file.notes {
                sink.warning(note.server.as_deref(), note.field.as_deref(), note.message.clone());
            }
            for (name, value) in file.servers {
                let transport = if value.contains_key("command") {
                    "stdio"
                } else if value.contains_key("url") {
                    "http"
                } else if value.contains_key("socket") {
                    "socket"
                } else {
                    "unknown"
                };
                let valid = parse_server(&name, &Value::Object(value), &mut sink).is_ok();
                host_servers.retain(|s| s.name != name);
                host_servers.push(ImportServerPreview {
                    name,
                    path: file.path.clone(),
                    transport,
                    status: if valid { "new" } else { "invalid" },
                    by: Vec::new(),
                });
            }
        }
        for mut server in host_servers {
            if server.status != "invalid" {
                if let Some(winner) = claimed.get(&server.name) {
                    server.status = "shadowed";
                    server.by = vec![winner.clone()];
                } else {
                    claimed.insert(server.name.clone(), host.id().to_string());
                    if let Some(files) = file_definers.get(&server.name) {
                        server.status = "under-files";
                        server.by = files.clone();
                    }
                }
            }
            preview.servers.push(server);
        }
        out.push(preview);
    }
    out
}
