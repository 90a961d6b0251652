//! Loading: which files are read (the six config sources of docs/configuration.md), in which order layers merge, what
//! trust allows, and the entry points [`load`] and [`load_in_memory`]. Nothing here fails as a whole: every problem
//! becomes a [`ConfigProblem`].
//!
//! Layers, lowest precedence first:
//! 1. host imports (`imports` of any trusted file, then `settings.hostConfigDiscovery: "on"`), merged first-wins:
//!    the first listed host that defines a server supplies the whole entry (files of the same host: later wins);
//! 2. Agent Plugins (`settings.agentPluginPaths`), in listed order;
//! 3. the six files (or only source 4 with `PIMCP_CONFIG_MODE=exclusive`).
//!
//! Entries merge field by field (see `merge.rs`). Project-scope files (and project-scope host files) count only when
//! trusted: their servers are listed as [`Availability::Untrusted`] otherwise, and their `settings` and `imports` are
//! ignored. An untrusted entry that only disables a server (`disabled: true` / `enabled: false`) is honoured.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{Map, Value};

use crate::build::{BuildCtx, apply_direct_tools_env, build_server, build_settings};
use crate::entries::{FileContent, parse_root, parse_server};
use crate::imports::{self, HostKind, ImportEnv, ImportScope};
use crate::merge::{MergedServer, MergedSettings};
use crate::model::{Availability, Config, HostConfigDiscovery, Origin, SourceFile, SourceKind, Transport};
use crate::options::LoadOptions;
use crate::problems::{ConfigProblem, Severity, Sink};
use crate::trust::{TrustView, trust_command};

/// Files bigger than this are refused (no MCP config is anywhere near it).
const MAX_CONFIG_BYTES: u64 = crate::read::CONFIG_FILE_LIMIT;

/// One source of entries, before merging.
#[derive(Debug)]
pub(crate) struct Layer {
    pub origin: Origin,
    pub trusted: bool,
    pub content: FileContent,
}

/// A file that was considered, with whether it needs and has trust.
#[derive(Debug, Clone)]
pub(crate) struct SourceStatus {
    pub file: SourceFile,
    /// `Some` for project-scope files.
    pub trusted: Option<bool>,
}

/// The result of loading with everything `config show` needs.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub config: Config,
    /// Merged JSON of every listed server, by name.
    pub merged: BTreeMap<String, MergedServer>,
    pub settings: MergedSettings,
    pub sources: Vec<SourceStatus>,
}

/// Loads the configuration for `opts`. Never fails: problems are in [`Config::problems`].
pub fn load(opts: &LoadOptions) -> Config {
    load_detailed(opts).config
}

/// A complete in-memory config from a library host (same JSON shape as a file), never merged with files or host
/// imports (`imports` is ignored with a warning); `settings.agentPluginPaths` still load.
pub fn load_in_memory(json: &Value, opts: &LoadOptions) -> Config {
    let mut problems = Vec::new();
    let content = parse_root(json, &mut Sink::new(&mut problems, None)).unwrap_or_default();
    if !content.imports.is_empty() {
        Sink::new(&mut problems, None).warning(
            None,
            Some("imports"),
            "host imports are not read for an in-memory config; ignored",
        );
    }
    let layers = vec![Layer {
        origin: Origin::InMemory,
        trusted: true,
        content,
    }];
    finish(opts, layers, Vec::new(), problems, Mode::InMemory).config
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Files { exclusive: bool },
    InMemory,
}

pub(crate) fn load_detailed(opts: &LoadOptions) -> Loaded {
    load_detailed_with(opts, None)
}

/// [`load_detailed`], reading `substitute.1` as the content of the file `substitute.0` (to preview an edit).
pub(crate) fn load_detailed_with(opts: &LoadOptions, substitute: Option<(&Path, &str)>) -> Loaded {
    let mut problems = Vec::new();
    let trust = TrustView::load(&opts.project_dir, &opts.data_dir);
    let mut sources = Vec::new();
    let mut layers = Vec::new();
    for (kind, path) in opts.sources() {
        let origin = Origin::File {
            source: kind,
            path: path.clone(),
        };
        let explicit = kind == SourceKind::PiGlobal && opts.config_path.is_some();
        let (exists, content) = match substitute {
            Some((sub_path, text)) if sub_path == path => (true, parse_text(&path, text, &mut problems)),
            _ => read_file(&path, explicit, &mut problems),
        };
        let trusted = if kind.is_project() {
            Some(opts.trust_project || trust.file_trusted(&path))
        } else {
            None
        };
        sources.push(SourceStatus {
            file: SourceFile {
                origin: origin.clone(),
                exists,
                loaded: content.is_some(),
            },
            trusted,
        });
        let Some(content) = content else { continue };
        if trusted == Some(false)
            && (!content.servers.is_empty() || !content.settings.is_empty() || !content.imports.is_empty())
        {
            Sink::new(&mut problems, Some(&path)).warning(
                None,
                None,
                format!("project file is not trusted: its servers will not start and its settings and imports are ignored until you run `{}`", trust_command(&opts.project_dir)),
            );
        }
        layers.push(Layer {
            origin,
            trusted: trusted.unwrap_or(true),
            content,
        });
    }
    finish(
        opts,
        layers,
        sources,
        problems,
        Mode::Files {
            exclusive: opts.exclusive(),
        },
    )
}

/// Reads and validates one file. Returns (exists, content); content is `None` when the file is absent or failed.
fn read_file(path: &Path, explicit: bool, problems: &mut Vec<ConfigProblem>) -> (bool, Option<FileContent>) {
    let mut sink = Sink::new(problems, Some(path));
    let text = match crate::read::read_text_bounded(path, MAX_CONFIG_BYTES) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            if explicit {
                sink.error(None, None, "the config file given with --config does not exist");
            }
            return (false, None);
        }
        Err(err) => {
            sink.error(None, None, format!("{}; the file is skipped", read_problem(&err)));
            return (true, None);
        }
    };
    (true, parse_text(path, &text, problems))
}

/// A read failure as a problem message: the bounded reader's own sentences ("is a FIFO, not a regular file", "is
/// larger than the 16 MiB limit") stand alone; other I/O errors read "cannot read: …".
pub(crate) fn read_problem(err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::InvalidInput | std::io::ErrorKind::FileTooLarge | std::io::ErrorKind::InvalidData => {
            err.to_string()
        }
        _ => format!("cannot read: {err}"),
    }
}

/// Parses and validates a file's text; `None` when it fails as a whole.
fn parse_text(path: &Path, text: &str, problems: &mut Vec<ConfigProblem>) -> Option<FileContent> {
    match crate::parse_jsonc(text) {
        Ok(None) => Some(FileContent::default()),
        Ok(Some(value)) => parse_root(&value, &mut Sink::new(problems, Some(path))),
        Err(err) => {
            problems.push(ConfigProblem {
                path: Some(path.to_path_buf()),
                position: Some((err.line, err.column)),
                server: None,
                field: None,
                message: format!("not valid JSON: {}; the file is skipped", err.message),
                severity: Severity::Error,
            });
            None
        }
    }
}

/// One entry ready to merge.
struct MergeEntry {
    name: String,
    fields: Map<String, Value>,
    origin: Origin,
    trusted: bool,
    literal: bool,
}

/// Entries of one precedence level.
#[derive(Default)]
struct MergeLayer {
    entries: Vec<MergeEntry>,
    invalid: Vec<(String, Vec<String>, Origin)>,
}

fn finish(
    opts: &LoadOptions,
    file_layers: Vec<Layer>,
    mut sources: Vec<SourceStatus>,
    mut problems: Vec<ConfigProblem>,
    mode: Mode,
) -> Loaded {
    // Settings: shallow per key, trusted layers only.
    let mut merged_settings = MergedSettings::default();
    for layer in &file_layers {
        if layer.trusted {
            merged_settings.apply(&layer.content.settings, &layer.origin);
        }
    }
    let mut settings = build_settings(
        &merged_settings.values,
        &opts.env,
        &opts.home,
        &opts.project_dir,
        &mut Sink::new(&mut problems, None),
    );

    let mut merge_layers: Vec<MergeLayer> = Vec::new();
    let trust = TrustView::load(&opts.project_dir, &opts.data_dir);

    // 1. Host imports.
    if let Mode::Files { exclusive } = mode {
        let mut hosts: Vec<HostKind> = Vec::new();
        for layer in file_layers.iter().rev().filter(|l| l.trusted) {
            for host in &layer.content.imports {
                if !hosts.contains(host) {
                    hosts.push(*host);
                }
            }
        }
        let env = opts.import_env();
        if !exclusive && settings.host_config_discovery == HostConfigDiscovery::On {
            for (host, _) in imports::detect_hosts(&env) {
                if !hosts.contains(&host) {
                    hosts.push(host);
                }
            }
        }
        // `prompt`: detect and say so (status, `config check`, `init`), never load.
        if !exclusive && settings.host_config_discovery == HostConfigDiscovery::Prompt {
            for (host, paths) in imports::detect_hosts(&env) {
                if hosts.contains(&host) {
                    continue;
                }
                let files: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                Sink::new(&mut problems, None).warning(
                    None,
                    Some("settings.hostConfigDiscovery"),
                    format!(
                        "found {} MCP configuration ({}), not loaded: add \"{}\" to `imports` or run \
                         `pimcp-run config import` to use its servers",
                        host.id(),
                        files.join(", "),
                        host.id()
                    ),
                );
            }
        }
        let mut layer = MergeLayer::default();
        let mut claimed: BTreeSet<String> = BTreeSet::new();
        for host in hosts {
            let (entries, invalid) = read_import_host(host, &env, opts, &trust, &mut problems, &mut sources);
            layer.invalid.extend(invalid);
            for entry in entries {
                if claimed.insert(entry.name.clone()) {
                    layer.entries.push(entry);
                }
            }
        }
        merge_layers.push(layer);
    }

    // 2. Agent Plugins.
    if mode != (Mode::Files { exclusive: true }) {
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for dir in &settings.agent_plugin_paths {
            let Some(plugin) = crate::plugins::load_plugin(dir, &opts.data_dir, &mut problems) else {
                continue;
            };
            if !seen.insert(plugin.name.clone()) {
                Sink::new(&mut problems, Some(dir)).warning(
                    None,
                    None,
                    format!("a plugin named `{}` is already loaded; skipped", plugin.name),
                );
                continue;
            }
            sources.push(SourceStatus {
                file: SourceFile {
                    origin: plugin.origin.clone(),
                    exists: true,
                    loaded: true,
                },
                trusted: None,
            });
            let mut layer = MergeLayer::default();
            for (name, fields) in plugin.servers {
                layer.entries.push(MergeEntry {
                    name,
                    fields,
                    origin: plugin.origin.clone(),
                    trusted: true,
                    literal: true,
                });
            }
            merge_layers.push(layer);
        }
    }

    // 3. The files.
    for layer in file_layers {
        let mut merge = MergeLayer::default();
        for (name, fields) in layer.content.servers {
            merge.entries.push(MergeEntry {
                name,
                fields,
                origin: layer.origin.clone(),
                trusted: layer.trusted,
                literal: false,
            });
        }
        for (name, fields) in layer.content.invalid {
            merge.invalid.push((name, fields, layer.origin.clone()));
        }
        merge_layers.push(merge);
    }

    // Merge.
    let mut merged: BTreeMap<String, MergedServer> = BTreeMap::new();
    let mut untrusted: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut invalid_above: BTreeMap<String, Vec<(usize, Origin, Vec<String>)>> = BTreeMap::new();
    for (idx, layer) in merge_layers.into_iter().enumerate() {
        for entry in layer.entries {
            let server = merged
                .entry(entry.name.clone())
                .or_insert_with(|| MergedServer::new(&entry.name, entry.origin.clone(), idx));
            server.apply(&entry.fields, &entry.origin, entry.literal);
            let fields = untrusted.entry(entry.name.clone()).or_default();
            let honoured = entry.trusted || only_disables(&entry.fields);
            for key in entry.fields.keys() {
                if honoured {
                    fields.remove(key);
                } else {
                    fields.insert(key.clone());
                }
            }
        }
        for (name, fields, origin) in layer.invalid {
            invalid_above.entry(name).or_default().push((idx, origin, fields));
        }
    }

    // Build.
    let ctx = BuildCtx {
        env: &opts.env,
        home: &opts.home,
        project_dir: &opts.project_dir,
        settings: &settings,
    };
    let mut servers = Vec::new();
    let mut listed = BTreeMap::new();
    for (name, server) in merged {
        let path = server.origin.path().map(Path::to_path_buf);
        let Some(mut built) = build_server(&server, &ctx, &mut Sink::new(&mut problems, path.as_deref())) else {
            continue;
        };
        // Fields that survived from untrusted entries (a later trusted file may have overridden them all).
        let still_untrusted = untrusted.get(&name).is_some_and(|keys| !keys.is_empty());
        if let Some(bad) = invalid_above
            .get(&name)
            .and_then(|v| v.iter().find(|(idx, _, _)| *idx > server.first_layer))
        {
            let (_, origin, fields) = bad;
            let fields = if fields.is_empty() {
                String::new()
            } else {
                format!(" (`{}`)", fields.join("`, `"))
            };
            if built.availability == Availability::Available {
                built.availability = Availability::ConfigError {
                    message: format!("its entry in {origin} is invalid{fields}; fix or remove that entry"),
                };
            }
        }
        if let Transport::Stdio(stdio) = &built.transport
            && is_pimcp_command(&stdio.command)
            && !matches!(built.availability, Availability::Disabled)
        {
            let message = format!(
                "this is pimcp itself (`{}`, from {}); pimcp never starts itself as one of its servers",
                stdio.command, server.origin
            );
            Sink::new(&mut problems, path.as_deref()).warning(Some(&name), Some("command"), message.clone());
            built.availability = Availability::ConfigError { message };
        }
        if still_untrusted {
            built.availability = Availability::Untrusted {
                project_dir: opts.project_dir.clone(),
                trust_command: trust_command(&opts.project_dir),
            };
        }
        servers.push(built);
        listed.insert(name, server);
    }
    apply_direct_tools_env(&mut servers, &mut settings, &opts.env);

    Loaded {
        config: Config {
            servers,
            settings,
            problems,
            sources: sources.iter().map(|s| s.file.clone()).collect(),
            project_dir: opts.project_dir.clone(),
        },
        merged: listed,
        settings: merged_settings,
        sources,
    }
}

/// An entry from an untrusted file that only disables (`disabled: true`) cannot start anything: it is honoured.
fn only_disables(fields: &Map<String, Value>) -> bool {
    !fields.is_empty() && fields.iter().all(|(k, v)| k == "disabled" && v == &Value::Bool(true))
}

type InvalidImport = (String, Vec<String>, Origin);

/// Reads every file of one host: entries (later files of the host override earlier ones) and invalid entries.
fn read_import_host(
    host: HostKind,
    env: &ImportEnv,
    opts: &LoadOptions,
    trust: &TrustView,
    problems: &mut Vec<ConfigProblem>,
    sources: &mut Vec<SourceStatus>,
) -> (Vec<MergeEntry>, Vec<InvalidImport>) {
    let mut by_name: Vec<MergeEntry> = Vec::new();
    let mut invalid = Vec::new();
    for result in imports::read_host(host, env) {
        let file = match result {
            Ok(file) => file,
            Err(err) => {
                let path = err.path().to_path_buf();
                let (position, message) = match &err {
                    imports::ImportError::Syntax {
                        line, column, message, ..
                    } => (
                        Some((*line, *column)),
                        format!(
                            "not valid {}: {message}; the import is skipped",
                            if host == HostKind::Codex { "TOML" } else { "JSON" }
                        ),
                    ),
                    other => (
                        None,
                        format!("{}; the import is skipped", strip_path(&other.to_string(), &path)),
                    ),
                };
                problems.push(ConfigProblem {
                    path: Some(path.clone()),
                    position,
                    server: None,
                    field: None,
                    message,
                    severity: Severity::Error,
                });
                let origin = Origin::Import {
                    host: host.id().to_string(),
                    path,
                };
                sources.push(SourceStatus {
                    file: SourceFile {
                        origin,
                        exists: true,
                        loaded: false,
                    },
                    trusted: None,
                });
                continue;
            }
        };
        let origin = Origin::Import {
            host: host.id().to_string(),
            path: file.path.clone(),
        };
        let project = file.scope(env) == ImportScope::Project;
        let trusted = !project || opts.trust_project || trust.file_trusted(&file.path);
        sources.push(SourceStatus {
            file: SourceFile {
                origin: origin.clone(),
                exists: true,
                loaded: true,
            },
            trusted: project.then_some(trusted),
        });
        let mut sink = Sink::new(problems, Some(&file.path));
        for note in &file.notes {
            sink.warning(note.server.as_deref(), note.field.as_deref(), note.message.clone());
        }
        if project && !trusted && !file.servers.is_empty() {
            sink.warning(
                None,
                None,
                format!(
                    "project file is not trusted: its servers will not start until you run `{}`",
                    trust_command(&opts.project_dir)
                ),
            );
        }
        for (name, value) in file.servers {
            match parse_server(&name, &Value::Object(value), &mut sink) {
                Ok(fields) => {
                    by_name.retain(|e| e.name != name);
                    by_name.push(MergeEntry {
                        name,
                        fields,
                        origin: origin.clone(),
                        trusted,
                        literal: false,
                    });
                }
                Err(fields) => invalid.push((name, fields, origin.clone())),
            }
        }
    }
    (by_name, invalid)
}

/// `ImportError`'s Display starts with the path; the problem carries the path separately.
fn strip_path(text: &str, path: &Path) -> String {
    let prefix = format!("{}: ", path.display());
    text.strip_prefix(&prefix).unwrap_or(text).to_string()
}

/// Whether a stdio server's `command` starts pimcp: the `pimcp-run` executable under any path, or this very process's
/// executable (a Rust host that embeds pimcp, listed among its own servers). A host config that lists pimcp for the
/// host is often also read by pimcp (`~/.config/mcp/mcp.json`, `imports`), and a pimcp that started itself would do
/// it again at every level.
pub fn is_pimcp_command(command: &str) -> bool {
    let path = Path::new(command);
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    if stem == "pimcp-run" {
        return true;
    }
    if !command.contains(std::path::MAIN_SEPARATOR) && !command.contains('/') {
        return false;
    }
    match (
        std::fs::canonicalize(path),
        std::env::current_exe().and_then(std::fs::canonicalize),
    ) {
        (Ok(command), Ok(own)) => command == own,
        _ => false,
    }
}
