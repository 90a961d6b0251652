//! Runs `pimcp-run` hermetically: empty environment except PATH, a temp HOME, project (the working directory) and
//! data dir.

pub(crate) use mcp_fixture::pid_alive;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub(crate) struct Sandbox {
    pub root: tempfile::TempDir,
    pub home: PathBuf,
    pub project: PathBuf,
    pub data: PathBuf,
    pub env: Vec<(String, String)>,
}

pub(crate) struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub(crate) fn json(&self) -> serde_json::Value {
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
    pub(crate) fn new() -> Sandbox {
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

    pub(crate) fn write(&self, path: impl AsRef<Path>, text: &str) -> PathBuf {
        let path = path.as_ref().to_path_buf();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    pub(crate) fn global(&self) -> PathBuf {
        self.home.join(".pi/agent/mcp.json")
    }

    pub(crate) fn env(mut self, name: &str, value: &str) -> Sandbox {
        self.env.push((name.into(), value.into()));
        self
    }

    pub(crate) fn run(&self, args: &[&str]) -> Run {
        self.run_with_stdin(args, "")
    }

    /// `pimcp-run ARGS` in this sandbox's environment, stderr piped.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_pimcp-run"));
        command
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("PIMCP_DATA_DIR", &self.data)
            .current_dir(&self.project)
            .stderr(Stdio::piped());
        for (name, value) in &self.env {
            command.env(name, value);
        }
        command
    }

    /// Runs `pimcp-run` with `stdin` as its standard input.
    pub(crate) fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Run {
        use std::io::Write as _;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.as_bytes()).unwrap();
        drop(input);
        let out = child.wait_with_output().unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Starts `pimcp-run ARGS` with its stderr closed (`pimcp-run 2>&-`, through `sh -c 'exec …'`: the child is
    /// pimcp-run itself), stdin and stdout piped. Used by a Linux-only test (it reads `/proc`).
    #[cfg(target_os = "linux")]
    pub(crate) fn spawn_with_closed_stderr(&self, args: &[&str]) -> std::process::Child {
        let inner = self.command(args);
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(r#"exec "$0" "$@" 2>&-"#)
            .arg(inner.get_program())
            .args(inner.get_args())
            .env_clear()
            .envs(inner.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .current_dir(&self.project)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        command.spawn().unwrap()
    }

    /// Runs `pimcp-run` with `stream` a pipe whose reader is already closed (`pimcp-run … | head -0`): every write to
    /// it fails with EPIPE. That stream of the result is empty.
    pub(crate) fn run_with_closed_pipe(&self, args: &[&str], stream: Stream) -> Run {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut command = self.command(args);
        command.stdin(Stdio::null());
        match stream {
            Stream::Stdout => command.stdout(writer),
            Stream::Stderr => command.stderr(writer),
        };
        let out = command.output().unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// One of the process's output streams.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

impl Sandbox {
    /// Runs `pimcp-run ARGS` on a pseudo-terminal (util-linux `script`), so stdin, stdout and stderr are all a TTY.
    /// The terminal's output (both streams) is in `stdout`.
    pub(crate) fn run_in_terminal(&self, args: &[&str]) -> Run {
        let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
        let mut line = quote(env!("CARGO_BIN_EXE_pimcp-run"));
        for arg in args {
            line.push(' ');
            line.push_str(&quote(arg));
        }
        let mut command = Command::new("script");
        command
            .args(["-qec", &line, "/dev/null"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("PIMCP_DATA_DIR", &self.data)
            .env("SHELL", "/bin/sh")
            .env("TERM", "xterm")
            .current_dir(&self.project)
            .stdin(Stdio::null());
        for (name, value) in &self.env {
            command.env(name, value);
        }
        let out = command.output().expect("run `script` (util-linux)");
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// Polls `done` every 20 ms until it holds or `deadline` passes; returns whether it held.
pub(crate) fn poll_until(deadline: std::time::Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    loop {
        if done() {
            return true;
        }
        if start.elapsed() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
