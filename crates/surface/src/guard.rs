//! The output guard: long text is cut on a UTF-8 boundary keeping head and tail around a visible marker, the full
//! text spilled to a private file; binary payloads become files. [`SpillDir`] owns those files: a 0700 temporary
//! directory of 0600 files with a bounded total size (oldest evicted), removed when the value is dropped.

use std::collections::VecDeque;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use base64::Engine;
use pimcp_config::OutputGuard;
use rmcp::model::{CallToolResult, ContentBlock};

use crate::error::{Error, Result};
use crate::render::{Binary, BinaryKind, Piece, Rendered, human_bytes};
use crate::text::{Category, with_category};

/// Largest binary payload (decoded) written to a file.
pub const MAX_BLOB_BYTES: u64 = 10 * 1024 * 1024;
/// Default total size of a [`SpillDir`]'s files.
pub const DEFAULT_SPILL_BUDGET_BYTES: u64 = 256 * 1024 * 1024;
/// Prefix of spill directories in the temporary directory.
pub const SPILL_DIR_PREFIX: &str = "pimcp-output-";

/// The file in each spill directory that its process holds locked for as long as it lives.
const OWNER_LOCK: &str = "owner.lock";

/// Whether the process that made spill directory `dir` is gone: its [`OWNER_LOCK`] exists and can be locked (the OS
/// drops a process's locks when it exits, however it exits). A directory without the file is not judged.
fn owner_gone(dir: &Path) -> bool {
    match fs::File::open(dir.join(OWNER_LOCK)) {
        Ok(file) => file.try_lock().is_ok(),
        Err(_) => false,
    }
}

/// Removes the spill directories in `parent` whose owning process is gone and whose owner (uid) is that of `ours`,
/// the directory just created. Directories without an owner lock, symlinks and files are left alone.
fn sweep_orphans(parent: &Path, ours: &Path) {
    let Ok(owner) = fs::symlink_metadata(ours).map(|m| same_owner_key(&m)) else {
        return;
    };
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(|n| n.starts_with(SPILL_DIR_PREFIX)) {
            continue;
        }
        let path = entry.path();
        let owned_dir = fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && same_owner_key(&m) == owner);
        if path == ours || !owned_dir || !owner_gone(&path) {
            continue;
        }
        match fs::remove_dir_all(&path) {
            Ok(()) => tracing::debug!(path = %path.display(), "removed the spill directory of a process that is gone"),
            Err(e) => tracing::debug!(path = %path.display(), error = %e, "could not remove a stale spill directory"),
        }
    }
}

/// Who owns a file, as far as the sweep cares: the uid on Unix (the temporary directory is shared by all users);
/// on Windows every entry of the per-user temporary directory counts as the user's.
fn same_owner_key(metadata: &fs::Metadata) -> Option<u32> {
    crate::sys::owner(metadata)
}

/// A private directory of spill files, removed (with its files) on drop.
///
/// Writes are serialized internally, so one value can be shared by concurrent calls.
#[derive(Debug)]
pub struct SpillDir {
    /// [`OWNER_LOCK`], locked while this process lives. Declared before `dir` so that it is closed first: Windows
    /// removes no directory holding an open file.
    _owner: fs::File,
    dir: tempfile::TempDir,
    budget_bytes: u64,
    state: Mutex<SpillState>,
}

#[derive(Debug, Default)]
struct SpillState {
    /// Oldest first.
    files: VecDeque<(PathBuf, u64)>,
    total_bytes: u64,
    next_id: u64,
}

impl SpillDir {
    /// A spill directory in the system temporary directory with the default budget.
    pub fn new() -> Result<SpillDir> {
        SpillDir::new_in(&std::env::temp_dir(), DEFAULT_SPILL_BUDGET_BYTES)
    }

    /// A spill directory under `parent` whose files never total more than `budget_bytes`.
    ///
    /// Its name carries this process's pid (`pimcp-output-<pid>-<random>`, for people), and it holds the file
    /// `owner.lock` locked for as long as the process lives. A process that was killed never removes its directory,
    /// so each new one sweeps the spill directories in `parent` that belong to the same user and whose lock is free:
    /// their owner is gone. No process table is read, so the sweep works alike on every OS.
    pub fn new_in(parent: &Path, budget_bytes: u64) -> Result<SpillDir> {
        let mut builder = tempfile::Builder::new();
        let prefix = format!("{SPILL_DIR_PREFIX}{}-", std::process::id());
        builder.prefix(&prefix);
        let dir = builder.tempdir_in(parent).map_err(|source| Error::Spill {
            action: "create spill directory in",
            path: parent.to_path_buf(),
            source,
        })?;
        pimcp_config::private_fs::restrict_dir(dir.path()).map_err(|source| Error::Spill {
            action: "restrict spill directory",
            path: dir.path().to_path_buf(),
            source,
        })?;
        let owner = fs::File::create(dir.path().join(OWNER_LOCK))
            .and_then(|file| file.try_lock().map(|()| file).map_err(std::io::Error::other))
            .map_err(|source| Error::Spill {
                action: "lock the owner file of",
                path: dir.path().to_path_buf(),
                source,
            })?;
        sweep_orphans(parent, dir.path());
        Ok(SpillDir {
            dir,
            _owner: owner,
            budget_bytes,
            state: Mutex::new(SpillState::default()),
        })
    }

    /// The spill directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Bytes currently held in spill files.
    pub fn total_bytes(&self) -> u64 {
        self.state.lock().map_or(0, |s| s.total_bytes)
    }

    /// Writes `bytes` to a new 0600 file `<stem>-<n>.<ext>`, first evicting the oldest files as needed to stay within
    /// the budget. Errors when `bytes` alone exceed the budget or the file cannot be written.
    pub fn write(&self, stem: &str, ext: &str, bytes: &[u8]) -> Result<PathBuf> {
        let size = bytes.len() as u64;
        if size > self.budget_bytes {
            return Err(Error::SpillBudget {
                size,
                budget: self.budget_bytes,
            });
        }
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while state.total_bytes + size > self.budget_bytes {
            let Some((old, old_size)) = state.files.pop_front() else {
                break;
            };
            match fs::remove_file(&old) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => tracing::warn!(path = %old.display(), error = %e, "could not remove evicted spill file"),
            }
            state.total_bytes = state.total_bytes.saturating_sub(old_size);
        }
        state.next_id += 1;
        let path = self.dir.path().join(format!("{stem}-{:06}.{ext}", state.next_id));
        let mut options = OpenOptions::new();
        pimcp_config::private_fs::file(options.write(true).create_new(true));
        let write = || -> std::io::Result<()> {
            let mut file = options.open(&path)?;
            file.write_all(bytes)?;
            file.flush()
        };
        if let Err(source) = write() {
            let _ = fs::remove_file(&path);
            return Err(Error::Spill {
                action: "write spill file",
                path,
                source,
            });
        }
        state.total_bytes += size;
        state.files.push_back((path.clone(), size));
        Ok(path)
    }
}

/// What the guard did, for logs and result metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GuardReport {
    /// Whether the text was cut to the limits.
    pub truncated: bool,
    /// The size of the text before the guard.
    pub original_bytes: usize,
    /// Its lines before the guard.
    pub original_lines: usize,
    /// The size of the text the model gets.
    pub returned_bytes: usize,
    /// Its lines.
    pub returned_lines: usize,
    /// The file holding the full text, when it was cut and saved.
    pub full_output: Option<PathBuf>,
    /// Why the full text was not saved, when it was cut but not saved.
    pub spill_error: Option<String>,
    /// Files written for binary payloads.
    pub files: Vec<PathBuf>,
}

/// A guarded result: one text block (all text joined by newlines) followed by the images.
#[derive(Debug, Clone, PartialEq)]
pub struct Guarded {
    /// The text block, then the images.
    pub content: Vec<ContentBlock>,
    /// Whether the tool reported an error.
    pub is_error: bool,
    /// What the guard did.
    pub report: GuardReport,
}

impl Guarded {
    /// The result to return to the host; an upstream error becomes an error result with category `tool-error`.
    pub fn into_call_result(self) -> CallToolResult {
        if self.is_error {
            with_category(CallToolResult::error(self.content), Category::ToolError)
        } else {
            CallToolResult::success(self.content)
        }
    }
}

/// Applies the guard to a rendered result: binary payloads are written to `spill` (when given) and noted; the joined
/// text is cut per `guard` (`None` disables cutting) with the full text saved to `spill`.
pub fn apply_guard(rendered: Rendered, guard: Option<&OutputGuard>, spill: Option<&SpillDir>) -> Guarded {
    let mut report = GuardReport::default();
    let mut texts: Vec<String> = Vec::new();
    let mut images: Vec<ContentBlock> = Vec::new();
    for piece in rendered.pieces {
        match piece {
            Piece::Text(text) => texts.push(text),
            Piece::Image(image) => images.push(ContentBlock::Image(image)),
            Piece::Binary(binary) => texts.push(save_binary(&binary, spill, &mut report)),
            #[allow(unreachable_patterns)] // `Piece` is non-exhaustive for other crates only
            _ => {}
        }
    }
    let mut content = Vec::with_capacity(1 + images.len());
    if !texts.is_empty() {
        let joined = texts.join("\n");
        report.original_bytes = joined.len();
        report.original_lines = count_lines(&joined);
        let text = match guard {
            Some(limits) => guard_text(joined, limits, spill, &mut report),
            None => joined,
        };
        report.returned_bytes = text.len();
        report.returned_lines = count_lines(&text);
        content.push(ContentBlock::text(text));
    }
    content.extend(images);
    Guarded {
        content,
        is_error: rendered.is_error,
        report,
    }
}

/// The guard applied to one of pimcp's own texts (a status, list, search or describe answer): cut to `limits` like
/// an upstream result, the full text saved to `spill`.
pub fn guard_own_text(text: String, limits: &OutputGuard, spill: &SpillDir) -> String {
    guard_text(text, limits, Some(spill), &mut GuardReport::default())
}

fn guard_text(text: String, limits: &OutputGuard, spill: Option<&SpillDir>, report: &mut GuardReport) -> String {
    let total_lines = count_lines(&text);
    if text.len() <= limits.max_bytes && total_lines <= limits.max_lines {
        return text;
    }
    let saved = match spill {
        Some(dir) => dir.write("output", "txt", text.as_bytes()).map_err(|e| e.to_string()),
        None => Err("no spill directory".to_string()),
    };
    let where_ = match &saved {
        Ok(path) => format!("full output: {}", path.display()),
        Err(reason) => format!("full output not saved: {reason}"),
    };
    let worst_marker = marker(total_lines, total_lines, text.len(), &where_);
    let Some(cut) = cut_text(&text, limits.max_bytes, limits.max_lines, worst_marker.len() + 2) else {
        return text;
    };
    let marker = marker(cut.omitted_lines, total_lines, cut.omitted_bytes, &where_);
    let mut out = String::with_capacity(cut.head.len() + marker.len() + cut.tail.len() + 2);
    out.push_str(cut.head);
    if !cut.head.is_empty() {
        out.push('\n');
    }
    out.push_str(&marker);
    if !cut.tail.is_empty() {
        out.push('\n');
        out.push_str(cut.tail);
    }
    report.truncated = true;
    match saved {
        Ok(path) => report.full_output = Some(path),
        Err(reason) => report.spill_error = Some(reason),
    }
    out
}

fn marker(omitted_lines: usize, total_lines: usize, omitted_bytes: usize, where_: &str) -> String {
    format!(
        "[… omitted {omitted_lines} of {total_lines} lines, {}; {where_} …]",
        human_bytes(omitted_bytes as u64)
    )
}

fn save_binary(binary: &Binary, spill: Option<&SpillDir>, report: &mut GuardReport) -> String {
    let mime = binary.mime_type.as_deref().unwrap_or("application/octet-stream");
    let label = match (binary.kind, &binary.uri) {
        (BinaryKind::Resource, Some(uri)) => format!("Resource: {uri}"),
        (BinaryKind::Resource, None) => "Resource".to_string(),
        (BinaryKind::Audio, _) => "Audio".to_string(),
    };
    let estimate = (binary.base64.len() as u64 / 4) * 3;
    if estimate > MAX_BLOB_BYTES + 3 {
        return format!(
            "[{label} ({mime}, about {}) not saved: larger than the {} limit]",
            human_bytes(estimate),
            human_bytes(MAX_BLOB_BYTES)
        );
    }
    let Some(bytes) = decode_base64(&binary.base64) else {
        return format!("[{label} ({mime}) not saved: the data is not valid base64]");
    };
    let size = human_bytes(bytes.len() as u64);
    if bytes.len() as u64 > MAX_BLOB_BYTES {
        return format!(
            "[{label} ({mime}, {size}) not saved: larger than the {} limit]",
            human_bytes(MAX_BLOB_BYTES)
        );
    }
    let Some(dir) = spill else {
        return format!("[{label} ({mime}, {size}) not saved: no spill directory]");
    };
    let stem = match binary.kind {
        BinaryKind::Resource => "resource",
        BinaryKind::Audio => "audio",
    };
    match dir.write(stem, extension_for(mime), &bytes) {
        Ok(path) => {
            let note = format!("[{label} ({mime}, {size}) saved to {}]", path.display());
            report.files.push(path);
            note
        }
        Err(e) => format!("[{label} ({mime}, {size}) not saved: {e}]"),
    }
}

fn decode_base64(data: &str) -> Option<Vec<u8>> {
    let compact: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let engines = [
        base64::engine::general_purpose::STANDARD,
        base64::engine::general_purpose::STANDARD_NO_PAD,
    ];
    engines.iter().find_map(|engine| engine.decode(compact.as_bytes()).ok())
}

fn extension_for(mime: &str) -> &'static str {
    let essence = mime.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    match essence.as_str() {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "application/pdf" => "pdf",
        "application/json" => "json",
        "application/zip" => "zip",
        "application/gzip" => "gz",
        "text/plain" => "txt",
        "text/html" => "html",
        "text/csv" => "csv",
        "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/ogg" => "ogg",
        "audio/webm" => "webm",
        _ => "bin",
    }
}

/// Lines in `text`: a final newline ends the last line rather than starting another.
pub(crate) fn count_lines(text: &str) -> usize {
    if text.is_empty() {
        return 0;
    }
    text.bytes().filter(|&b| b == b'\n').count() + usize::from(!text.ends_with('\n'))
}

/// Head and tail kept from a text that exceeds its limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cut<'a> {
    pub head: &'a str,
    pub tail: &'a str,
    pub omitted_lines: usize,
    pub omitted_bytes: usize,
}

/// Cuts `text` to at most `max_bytes` (less `reserve_bytes` kept for the marker) and `max_lines` (one kept for the
/// marker), half for the head and half for the tail, on UTF-8 boundaries. `None` when it already fits.
pub(crate) fn cut_text(text: &str, max_bytes: usize, max_lines: usize, reserve_bytes: usize) -> Option<Cut<'_>> {
    let total_lines = count_lines(text);
    if text.len() <= max_bytes && total_lines <= max_lines {
        return None;
    }
    let line_budget = max_lines.saturating_sub(1);
    let head_lines = line_budget.div_ceil(2);
    let tail_lines = line_budget - head_lines;
    let byte_budget = max_bytes.saturating_sub(reserve_bytes);
    let head_bytes = byte_budget.div_ceil(2);
    let tail_bytes = byte_budget / 2;

    let by_lines = if head_lines == 0 {
        0
    } else {
        text.match_indices('\n')
            .nth(head_lines - 1)
            .map_or(text.len(), |(i, _)| i)
    };
    let head_end = floor_char_boundary(text, by_lines.min(head_bytes));

    let body = text.strip_suffix('\n').unwrap_or(text);
    let tail_by_lines = if tail_lines == 0 {
        text.len()
    } else {
        body.rmatch_indices('\n').nth(tail_lines - 1).map_or(0, |(i, _)| i + 1)
    };
    let tail_start = ceil_char_boundary(text, tail_by_lines.max(text.len().saturating_sub(tail_bytes))).max(head_end);
    let (head, tail) = (&text[..head_end], &text[tail_start..]);

    let newlines_before = |i: usize| text.as_bytes()[..i].iter().filter(|&&b| b == b'\n').count();
    let head_shown = if head.is_empty() {
        0
    } else {
        newlines_before(head_end) + 1
    };
    let tail_first = newlines_before(tail_start);
    let tail_shown = if tail.is_empty() { 0 } else { total_lines - tail_first };
    let shared = usize::from(!head.is_empty() && !tail.is_empty() && head_shown - 1 == tail_first);
    let omitted_lines = total_lines.saturating_sub(head_shown + tail_shown - shared);
    Some(Cut {
        head,
        tail,
        omitted_lines,
        omitted_bytes: tail_start - head_end,
    })
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;
