//! Tests of `guard.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::Engine;
use rmcp::model::ImageContent;

use super::*;

fn limits(max_bytes: usize, max_lines: usize) -> OutputGuard {
    OutputGuard::new(max_bytes, max_lines)
}

fn text_of(g: &Guarded) -> &str {
    g.content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.as_str())
        .unwrap_or_default()
}

fn rendered(pieces: Vec<Piece>) -> Rendered {
    Rendered {
        pieces,
        is_error: false,
    }
}

#[test]
fn count_lines_table() {
    for (text, n) in [
        ("", 0),
        ("a", 1),
        ("a\n", 1),
        ("a\nb", 2),
        ("a\nb\n", 2),
        ("\n", 1),
        ("\n\n", 2),
    ] {
        assert_eq!(count_lines(text), n, "{text:?}");
    }
}

#[test]
fn cut_table() {
    let ten: String = (1..=10).map(|i| format!("line{i}\n")).collect();
    // (text, max_bytes, max_lines, reserve) -> (head, tail, omitted lines, omitted bytes)
    type Kept<'a> = Option<(&'a str, &'a str, usize, usize)>;
    let cases: Vec<(&str, usize, usize, usize, Kept<'_>)> = vec![
        (&ten, 1000, 10, 0, None),
        (&ten, 1000, 5, 0, Some(("line1\nline2", "line9\nline10\n", 6, 37))),
        (&ten, 1000, 4, 0, Some(("line1\nline2", "line10\n", 7, 43))),
        // 10 bytes each side: line 2 and line 9 are shown in part.
        (&ten, 20, 100, 0, Some(("line1\nline", "e9\nline10\n", 6, 41))),
        ("aaaaaaaaaa", 4, 10, 0, Some(("aa", "aa", 0, 6))),
        ("abc", 0, 0, 0, Some(("", "", 1, 3))),
    ];
    for (text, max_bytes, max_lines, reserve, want) in cases {
        let got =
            cut_text(text, max_bytes, max_lines, reserve).map(|c| (c.head, c.tail, c.omitted_lines, c.omitted_bytes));
        assert_eq!(got, want, "{max_bytes}/{max_lines}");
    }
}

#[test]
fn cut_lands_on_utf8_boundaries() {
    // Every limit cuts inside some multibyte character of this text at least once.
    let text = "é漢🙂".repeat(200);
    for max_bytes in 1..64 {
        let cut = cut_text(&text, max_bytes, 10, 0).unwrap();
        assert!(cut.head.len() + cut.tail.len() <= max_bytes, "{max_bytes}");
        assert_eq!(cut.head.len() + cut.omitted_bytes + cut.tail.len(), text.len());
    }
    let cut = cut_text(&text, 8, 10, 0).unwrap();
    assert_eq!(
        (cut.head, cut.tail),
        ("é", "🙂"),
        "a 4-byte head keeps `é` (2 bytes) but not `漢` (3 more)"
    );
}

/// Another process holding a spill directory's owner lock: a `python3` that `flock`s it on Unix; on Windows (no
/// `python3` assumed) a second handle of this process, which `LockFileEx` treats like any other holder.
struct LockHolder {
    #[cfg(unix)]
    process: std::process::Child,
    #[cfg(windows)]
    _file: fs::File,
}

impl LockHolder {
    fn hold(path: &Path) -> LockHolder {
        #[cfg(unix)]
        {
            let hold = "import fcntl, sys, time\nf = open(sys.argv[1])\nfcntl.flock(f, fcntl.LOCK_EX)\ntime.sleep(60)";
            let process = std::process::Command::new("python3")
                .args(["-c", hold])
                .arg(path)
                .spawn()
                .unwrap();
            LockHolder { process }
        }
        #[cfg(windows)]
        {
            let file = fs::File::open(path).unwrap();
            file.lock().unwrap();
            LockHolder { _file: file }
        }
    }

    fn release(self) {
        #[cfg(unix)]
        {
            let mut process = self.process;
            process.kill().unwrap();
            process.wait().unwrap();
        }
    }
}

#[test]
fn a_new_spill_dir_sweeps_those_of_processes_that_are_gone_and_keeps_the_living() {
    let parent = tempfile::tempdir().unwrap();
    let make = |name: &str, lock: bool| {
        let dir = parent.path().join(name);
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("output-1.txt"), "spilled").unwrap();
        if lock {
            fs::write(dir.join(OWNER_LOCK), "").unwrap();
        }
        dir
    };
    // A process that is gone: its lock file is there, and nobody holds it.
    let of_dead = make(&format!("{SPILL_DIR_PREFIX}4242-abc"), true);
    // Another live process holds its lock: no process table is read to decide, so this holds where there is no
    // `/proc`.
    let living = make(&format!("{SPILL_DIR_PREFIX}4343-abc"), true);
    let holder = LockHolder::hold(&living.join(OWNER_LOCK));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while fs::File::open(living.join(OWNER_LOCK)).unwrap().try_lock().is_ok() {
        assert!(std::time::Instant::now() < deadline, "flock never took the lock");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // A living SpillDir of this very process.
    let sibling = SpillDir::new_in(parent.path(), DEFAULT_SPILL_BUDGET_BYTES).unwrap();
    // Not ours to judge: no owner lock, or not a directory.
    let unlocked = make(&format!("{SPILL_DIR_PREFIX}Xy12ab"), false);
    let file = parent.path().join(format!("{SPILL_DIR_PREFIX}4444-abc"));
    fs::write(&file, "").unwrap();

    let spill = SpillDir::new_in(parent.path(), DEFAULT_SPILL_BUDGET_BYTES).unwrap();
    let name = spill.path().file_name().unwrap().to_str().unwrap().to_string();
    assert!(
        name.starts_with(&format!("{SPILL_DIR_PREFIX}{}-", std::process::id())),
        "{name}"
    );
    assert!(!of_dead.exists(), "the directory of a process that is gone is removed");
    assert!(living.exists(), "another live process's directory is kept");
    assert!(sibling.path().exists() && unlocked.exists() && file.exists());
    holder.release();
    // Its owner gone, the next spill directory sweeps it.
    let _next = SpillDir::new_in(parent.path(), DEFAULT_SPILL_BUDGET_BYTES).unwrap();
    assert!(!living.exists(), "the directory of a process that ended is removed");
    assert!(sibling.path().exists() && spill.path().exists());
}

#[test]
fn huge_output_is_cut_and_spilled_0600_and_cleaned_on_drop() {
    let parent = tempfile::tempdir().unwrap();
    let spill = SpillDir::new_in(parent.path(), DEFAULT_SPILL_BUDGET_BYTES).unwrap();
    let dir = spill.path().to_path_buf();
    let text: String = (0..100_000)
        .map(|i| format!("row {i}: {}\n", "漢字".repeat(i % 7)))
        .collect();
    let g = apply_guard(
        rendered(vec![Piece::Text(text.clone())]),
        Some(&OutputGuard::DEFAULT),
        Some(&spill),
    );
    let out = text_of(&g);
    assert!(out.len() <= OutputGuard::DEFAULT.max_bytes, "{}", out.len());
    assert!(count_lines(out) <= OutputGuard::DEFAULT.max_lines);
    assert!(out.starts_with("row 0: \nrow 1: 漢字\n"));
    assert!(
        out.ends_with("row 99999: 漢字漢字漢字漢字\n"),
        "{}",
        &out[out.len() - 40..]
    );
    let path = g.report.full_output.clone().unwrap();
    let omitted = out.lines().find(|l| l.starts_with("[… omitted ")).unwrap();
    assert!(
        omitted.ends_with(&format!("; full output: {} …]", path.display())),
        "{omitted}"
    );
    assert!(omitted.contains(" of 100000 lines, "), "{omitted}");
    assert_eq!(fs::read_to_string(&path).unwrap(), text);
    assert!(g.report.truncated);
    assert_eq!(
        (g.report.original_bytes, g.report.original_lines),
        (text.len(), 100_000)
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
    }
    drop(spill);
    assert!(!path.exists() && !dir.exists(), "spill directory removed on drop");
}

#[test]
fn many_short_lines_are_cut_by_line_count() {
    let text: String = (0..5000).map(|i| format!("{i}\n")).collect();
    let g = apply_guard(rendered(vec![Piece::Text(text)]), Some(&limits(1 << 20, 11)), None);
    let out = text_of(&g);
    insta::assert_snapshot!(out, @r"
    0
    1
    2
    3
    4
    [… omitted 4990 of 5000 lines, 23.3 KiB; full output not saved: no spill directory …]
    4995
    4996
    4997
    4998
    4999
    ");
    assert_eq!(g.report.spill_error.as_deref(), Some("no spill directory"));
}

#[test]
fn disabled_guard_and_small_output_pass_through() {
    let big = "x".repeat(200_000);
    let g = apply_guard(rendered(vec![Piece::Text(big.clone())]), None, None);
    assert_eq!(text_of(&g), big);
    assert!(!g.report.truncated);
    let g = apply_guard(
        rendered(vec![Piece::Text("a".into()), Piece::Text("b".into())]),
        Some(&OutputGuard::DEFAULT),
        None,
    );
    assert_eq!(text_of(&g), "a\nb");
}

#[test]
fn images_pass_through_after_text() {
    let image = ImageContent::new("iVBORw0KGgo=", "image/png");
    let g = apply_guard(
        rendered(vec![Piece::Image(image.clone()), Piece::Text("caption".into())]),
        None,
        None,
    );
    assert_eq!(g.content.len(), 2);
    assert_eq!(text_of(&g), "caption");
    assert_eq!(g.content[1].as_image(), Some(&image));
}

#[test]
fn binaries_become_files() {
    let parent = tempfile::tempdir().unwrap();
    let spill = SpillDir::new_in(parent.path(), DEFAULT_SPILL_BUDGET_BYTES).unwrap();
    let pdf = b"%PDF-1.4 fake".to_vec();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&pdf);
    let pieces = vec![
        Piece::Binary(Binary {
            kind: BinaryKind::Resource,
            uri: Some("file:///a.pdf".into()),
            mime_type: Some("application/pdf".into()),
            base64: b64.clone(),
        }),
        Piece::Binary(Binary {
            kind: BinaryKind::Audio,
            uri: None,
            mime_type: Some("audio/wav".into()),
            base64: "UklGRg".into(),
        }),
        Piece::Binary(Binary {
            kind: BinaryKind::Resource,
            uri: Some("x:bad".into()),
            mime_type: None,
            base64: "@@@".into(),
        }),
        Piece::Binary(Binary {
            kind: BinaryKind::Resource,
            uri: Some("x:big".into()),
            mime_type: None,
            base64: "A".repeat(14 << 20),
        }),
    ];
    let g = apply_guard(rendered(pieces), Some(&OutputGuard::DEFAULT), Some(&spill));
    assert_eq!(g.report.files.len(), 2);
    assert_eq!(fs::read(&g.report.files[0]).unwrap(), pdf);
    assert!(g.report.files[0].to_string_lossy().ends_with(".pdf"));
    assert_eq!(fs::read(&g.report.files[1]).unwrap(), b"RIFF");
    let lines: Vec<String> = text_of(&g)
        .lines()
        .map(|l| l.replace(&spill.path().display().to_string(), "DIR").replace('\\', "/"))
        .collect();
    assert_eq!(
        lines,
        [
            "[Resource: file:///a.pdf (application/pdf, 13 bytes) saved to DIR/resource-000001.pdf]",
            "[Audio (audio/wav, 4 bytes) saved to DIR/audio-000002.wav]",
            "[Resource: x:bad (application/octet-stream) not saved: the data is not valid base64]",
            "[Resource: x:big (application/octet-stream, about 10.5 MiB) not saved: larger than the 10.0 MiB limit]",
        ]
    );
}

#[test]
fn spill_budget_evicts_oldest() {
    let parent = tempfile::tempdir().unwrap();
    let spill = SpillDir::new_in(parent.path(), 100).unwrap();
    let a = spill.write("f", "txt", &[b'a'; 40]).unwrap();
    let b = spill.write("f", "txt", &[b'b'; 40]).unwrap();
    let c = spill.write("f", "txt", &[b'c'; 40]).unwrap();
    assert!(!a.exists() && b.exists() && c.exists());
    assert_eq!(spill.total_bytes(), 80);
    let err = spill.write("f", "txt", &[0; 101]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "output of 101 bytes exceeds the spill budget of 100 bytes"
    );
    // A cut whose full text does not fit the budget still returns the cut, saying why nothing was saved.
    let g = apply_guard(
        rendered(vec![Piece::Text("y\n".repeat(200))]),
        Some(&limits(300, 10)),
        Some(&spill),
    );
    assert!(
        text_of(&g).contains("; full output not saved: output of 400 bytes exceeds the spill budget of 100 bytes …]")
    );
}

#[test]
fn upstream_errors_stay_errors() {
    let g = apply_guard(
        Rendered {
            pieces: vec![Piece::Text("bad input".into())],
            is_error: true,
        },
        None,
        None,
    );
    let result = g.into_call_result();
    assert_eq!(result.is_error, Some(true));
    assert_eq!(result.content[0].as_text().unwrap().text, "bad input");
    let meta = serde_json::to_value(&result).unwrap();
    assert_eq!(meta["_meta"]["pimcp/category"], "tool-error");
}
