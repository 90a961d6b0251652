//! Runs `pimcp-run` hermetically: empty environment except PATH, a temp HOME, project (the working directory) and
//! data dir.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub struct Sandbox {
    pub root: tempfile::TempDir,
    pub home: PathBuf,
    pub project: PathBuf,
    pub data: PathBuf,
    pub env: Vec<(String, String)>,
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|err| panic!("stdout is not JSON ({err}):\n{}", self.stdout))
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().canonicalize().unwrap();
        let (home, project, data) = (base.join("home"), base.join("project"), base.join("data"));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        Sandbox {
            root,
            home,
            project,
            data,
            env: Vec::new(),
        }
    }

    pub fn write(&self, path: impl AsRef<Path>, text: &str) -> PathBuf {
        let path = path.as_ref().to_path_buf();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    pub fn global(&self) -> PathBuf {
        self.home.join(".pi/agent/mcp.json")
    }

    pub fn env(mut self, name: &str, value: &str) -> Sandbox {
        self.env.push((name.into(), value.into()));
        self
    }

    pub fn run(&self, args: &[&str]) -> Run {
        let mut command = Command::new(env!("CARGO_BIN_EXE_pimcp-run"));
        command
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("PIMCP_DATA_DIR", &self.data)
            .current_dir(&self.project)
            .stdin(Stdio::null());
        for (name, value) in &self.env {
            command.env(name, value);
        }
        let out = command.output().unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}
