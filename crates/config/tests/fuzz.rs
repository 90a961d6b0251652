//! Bounded fuzzing of everything the config loader reads (`mcp_fixture::fuzz`): JSONC text, a config file through
//! `load` (merge, interpolation, `!command` detection, plugins, trust), each host-import format, and interpolation
//! inside every string field. The properties: no panic, no hang, no unbounded allocation, and every problem names
//! what is wrong.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use mcp_fixture::fuzz;
use pimcp_config::imports::{HostKind, ImportEnv, Os, candidate_paths, read_host};
use pimcp_config::{EnvMap, LoadOptions, load, load_in_memory, parse_jsonc, strip_jsonc};

#[global_allocator]
static ALLOC: fuzz::CappedAlloc = fuzz::CappedAlloc;

fn env() -> EnvMap {
    let mut env = EnvMap::new();
    env.insert("TOKEN", "fuzz-token-value")
        .insert("EMPTY", "")
        .insert("HOME", "/home/fuzz");
    env
}

fn assert_problems_are_named(config: &pimcp_config::Config, input: &[u8]) {
    for problem in &config.problems {
        assert!(
            !problem.message.trim().is_empty(),
            "a problem without a message for {input:?}: {problem:?}"
        );
    }
}

#[test]
fn jsonc() {
    fuzz::run("jsonc", |input| {
        let text = String::from_utf8_lossy(input);
        let parsed = parse_jsonc(&text);
        let stripped = strip_jsonc(&text);
        // What parses as JSONC parses the same once its comments are stripped.
        if let (Ok(Some(value)), Ok(again)) = (parsed, serde_json::from_str::<serde_json::Value>(&stripped)) {
            assert_eq!(value, again, "{text:?}");
        }
    });
}

#[test]
fn config_load() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mcp.json");
    let mut options = LoadOptions::new(dir.path().join("home"), dir.path().join("project"));
    options.config_path = Some(file.clone());
    options.data_dir = dir.path().join("data");
    options.env = env();
    fuzz::run("config_load", |input| {
        std::fs::write(&file, input).unwrap();
        let config = load(&options);
        assert_problems_are_named(&config, input);
    });
}

#[test]
fn imports() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let project = dir.path().join("project");
    let import_env = ImportEnv {
        home: home.clone(),
        project_dir: project.clone(),
        os: Os::Linux,
        appdata: None,
        xdg_config_home: None,
        codex_home: None,
    };
    // Every host's first candidate file gets the input (JSON, JSONC or TOML as the host reads it).
    let targets: Vec<(HostKind, std::path::PathBuf)> = HostKind::ALL
        .iter()
        .filter_map(|host| {
            candidate_paths(*host, &import_env)
                .into_iter()
                .next()
                .map(|p| (*host, p))
        })
        .collect();
    assert_eq!(targets.len(), HostKind::ALL.len(), "every host has a candidate path");
    for (_, path) in &targets {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    }
    fuzz::run("imports", |input| {
        for (host, path) in &targets {
            std::fs::write(path, input).unwrap();
            for file in read_host(*host, &import_env) {
                match file {
                    Ok(file) => assert_eq!(file.host, *host),
                    Err(e) => assert!(!e.to_string().trim().is_empty(), "{host:?}: {e:?}"),
                }
            }
            std::fs::remove_file(path).unwrap();
        }
    });
}

#[test]
fn interpolation() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = LoadOptions::new(dir.path().join("home"), dir.path().join("project"));
    options.env = env();
    fuzz::run("interpolation", |input| {
        let text = String::from_utf8_lossy(input).into_owned();
        let config = serde_json::json!({
            "mcpServers": {
                "stdio": { "command": text, "args": [text, "--x"], "env": { "A": text }, "cwd": text },
                "http": { "url": format!("https://h.example/{text}"), "headers": { "X": text }, "bearerToken": text }
            }
        });
        let loaded = load_in_memory(&config, &options);
        assert_problems_are_named(&loaded, input);
    });
}
