//! The Linux store selection against real programs: a private `dbus-daemon` on a temp socket (no service
//! activation) with a real Secret Service provider (`gnome-keyring-daemon`, unlocked with a password on stdin),
//! driven through the `token_tool` example in separate processes; and the fallback to kernel keyutils when the bus,
//! the provider or an unlocked default collection is missing. The programs come from `.ci/setup-peers`.

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{sha, token_tool};

const URL: &str = "https://m.example/mcp";

/// The program on PATH, or a loud failure naming the script that installs it.
fn require(program: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "`{program}` is not installed: run `.ci/setup-peers` (it installs gnome-keyring, dbus-daemon and \
                 dbus-bin with apt-get)"
            )
        })
}

/// A unique keyring service name, so parallel tests and earlier runs never share records.
fn service() -> String {
    format!("pimcp.test.ss.{}.{:x}", std::process::id(), rand::random::<u64>())
}

/// Where a `token_tool` process finds the session bus.
#[derive(Clone, Copy)]
enum BusEnv<'a> {
    Unset,
    Address(&'a str),
}

fn tool(bus: BusEnv<'_>, args: &[&str]) -> String {
    let mut command = Command::new(token_tool());
    command.args(args);
    match bus {
        BusEnv::Unset => command.env_remove("DBUS_SESSION_BUS_ADDRESS"),
        BusEnv::Address(address) => command.env("DBUS_SESSION_BUS_ADDRESS", address),
    };
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "token_tool {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A private session bus with no service activation, and optionally a gnome-keyring Secret Service on it.
struct Bus {
    dir: tempfile::TempDir,
    address: String,
    daemon: Child,
    keyring: Option<Child>,
}

impl Bus {
    fn start() -> Bus {
        let dbus_daemon = require("dbus-daemon");
        require("dbus-send");
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("bus.conf");
        std::fs::write(
            &config,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#,
                dir.path().join("bus").display()
            ),
        )
        .unwrap();
        let mut daemon = Command::new(dbus_daemon)
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--print-address"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        // The daemon prints its address once it listens.
        let mut address = String::new();
        BufReader::new(daemon.stdout.take().unwrap())
            .read_line(&mut address)
            .unwrap();
        let address = address.trim().to_string();
        assert!(
            address.starts_with("unix:"),
            "dbus-daemon printed no address: {address:?}"
        );
        Bus {
            dir,
            address,
            daemon,
            keyring: None,
        }
    }

    fn env(&self) -> BusEnv<'_> {
        BusEnv::Address(&self.address)
    }

    /// Start gnome-keyring's Secret Service on this bus with a fresh HOME. With a password, the login collection is
    /// created unlocked and becomes the default one; without, there is no usable default collection.
    fn start_keyring(&mut self, password: Option<&str>) {
        let daemon = require("gnome-keyring-daemon");
        let home = self.dir.path().join("home");
        let runtime = self.dir.path().join("run");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&runtime).unwrap();
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
        let log = std::fs::File::create(self.dir.path().join("gnome-keyring.log")).unwrap();
        let mut command = Command::new(daemon);
        command
            .args(["--foreground", "--components=secrets"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        if password.is_some() {
            command.arg("--unlock").stdin(Stdio::piped());
        } else {
            command.stdin(Stdio::null());
        }
        let mut child = command.spawn().unwrap();
        if let Some(password) = password {
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(password.as_bytes()).unwrap();
        }
        self.keyring = Some(child);
        self.wait_for(|bus| {
            let owned = bus.send(&[
                "--dest=org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus.NameHasOwner",
                "string:org.freedesktop.secrets",
            ]);
            if !owned.is_some_and(|reply| reply.contains("boolean true")) {
                return false;
            }
            if password.is_none() {
                return true;
            }
            // Unlocked: the `default` alias names a collection whose Locked property is false.
            let Some(alias) = bus.send(&[
                "--dest=org.freedesktop.secrets",
                "/org/freedesktop/secrets",
                "org.freedesktop.Secret.Service.ReadAlias",
                "string:default",
            ]) else {
                return false;
            };
            let Some(path) = alias.split('"').nth(1).filter(|p| *p != "/") else {
                return false;
            };
            bus.send(&[
                "--dest=org.freedesktop.secrets",
                path,
                "org.freedesktop.DBus.Properties.Get",
                "string:org.freedesktop.Secret.Collection",
                "string:Locked",
            ])
            .is_some_and(|reply| reply.contains("boolean false"))
        });
    }

    /// One `dbus-send --print-reply` call on this bus; `None` when it fails.
    fn send(&self, args: &[&str]) -> Option<String> {
        let out = Command::new("dbus-send")
            .arg(format!("--bus={}", self.address))
            .arg("--print-reply")
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Poll `ready` toward a generous deadline; on timeout, fail with the provider's log.
    fn wait_for(&self, ready: impl Fn(&Bus) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ready(self) {
            assert!(
                Instant::now() < deadline,
                "the Secret Service never became ready on {}; gnome-keyring log:\n{}",
                self.address,
                std::fs::read_to_string(self.dir.path().join("gnome-keyring.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        for child in self.keyring.iter_mut().chain(std::iter::once(&mut self.daemon)) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn secret_service_round_trips_across_processes_and_deletes() {
    let mut bus = Bus::start();
    bus.start_keyring(Some("ci-pass"));
    let service = service();

    let saved = tool(
        bus.env(),
        &["keyring-save", &service, "github", URL, "ss-planted-token"],
    );
    assert!(saved.contains("Secret Service"), "{saved}");
    assert!(!saved.contains("ss-planted-token"), "{saved}");

    // A second process reads it through the Secret Service.
    let loaded = tool(bus.env(), &["keyring-load", &service, "github", URL]);
    assert_eq!(loaded, format!("token={}", sha("ss-planted-token")));
    let moved = tool(
        bus.env(),
        &["keyring-load", &service, "github", "https://moved.example/mcp"],
    );
    assert_eq!(moved, "none", "a URL change invalidates");
    // It lives in the Secret Service, not in kernel keyutils.
    assert_eq!(tool(BusEnv::Unset, &["keyring-load", &service, "github", URL]), "none");

    assert_eq!(tool(bus.env(), &["keyring-delete", &service, "github", URL]), "deleted");
    assert_eq!(tool(bus.env(), &["keyring-load", &service, "github", URL]), "none");
    // Deleting again is not an error.
    assert_eq!(tool(bus.env(), &["keyring-delete", &service, "github", URL]), "deleted");
}

#[test]
fn keyutils_is_used_when_no_secret_service_answers() {
    let mut bus = Bus::start();
    let service = service();
    let missing_socket = format!("unix:path={}", bus.dir.path().join("no-such-bus").display());
    let check = |env: BusEnv<'_>, token: &str| {
        let saved = tool(env, &["keyring-save", &service, "github", URL, token]);
        assert!(saved.contains("Linux keyutils"), "{saved}");
        // Another process without any bus reads the same keyutils record.
        assert_eq!(
            tool(BusEnv::Unset, &["keyring-load", &service, "github", URL]),
            format!("token={}", sha(token))
        );
    };

    check(BusEnv::Unset, "no-bus-token");
    check(BusEnv::Address(&missing_socket), "dead-bus-token");
    check(bus.env(), "no-provider-token");
    // A provider that answers but has no unlocked default collection is not asked to prompt.
    bus.start_keyring(None);
    check(bus.env(), "locked-token");

    assert_eq!(tool(bus.env(), &["keyring-delete", &service, "github", URL]), "deleted");
    assert_eq!(tool(BusEnv::Unset, &["keyring-load", &service, "github", URL]), "none");
}
