//! Small helpers for human output: stdout writes that survive a closed pipe, paths shortened with `~`, error chains,
//! one-line JSON values, colour that is used only on a terminal and never with `NO_COLOR`, and left-aligned tables.

use std::io::{IsTerminal, Write as _};
use std::path::Path;

use serde_json::Value;

/// `print!` for a command's output, through [`write_stdout`].
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::write_stdout(format_args!($($arg)*)) };
}

/// `println!` for a command's output, through [`write_stdout`].
macro_rules! outln {
    () => { $crate::output::write_stdout(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::output::write_stdout(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprint!` for messages to the user, through [`write_stderr`].
macro_rules! err {
    ($($arg:tt)*) => { $crate::output::write_stderr(format_args!($($arg)*)) };
}

/// `eprintln!` for messages to the user, through [`write_stderr`].
macro_rules! errln {
    () => { $crate::output::write_stderr(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::output::write_stderr(format_args!("{}\n", format_args!($($arg)*))) };
}

/// Writes a message to stderr. A stderr that fails (a host that closed the pipe it read our log from, `pimcp-run
/// status 2>&1 | head -1`) loses the message, never the process: `eprint!` panics there, and a stdio server would
/// die with the host's session. There is nowhere left to report the failure.
/// Secret values resolved in this process are redacted (`pimcp_config::redact_known_secrets`); URLs stay whole,
/// since some of these messages are URLs to open (an OAuth login's authorization URL). Log lines get the full
/// redaction (`telemetry`).
pub(crate) fn write_stderr(args: std::fmt::Arguments<'_>) {
    let text = args.to_string();
    let _ = std::io::stderr()
        .lock()
        .write_all(pimcp_config::redact_known_secrets(&text).as_bytes());
}

/// Writes a command's output. A reader that closed the pipe (`pimcp-run status | head -1`) is not an error: the rest
/// is dropped and the command ends with its own exit code (`print!` would panic). Any other failure is reported on
/// stderr once per write.
pub(crate) fn write_stdout(args: std::fmt::Arguments<'_>) {
    match std::io::stdout().lock().write_fmt(args) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => errln!("pimcp-run: writing to stdout failed: {e}"),
    }
}

/// `path` with the home directory shown as `~`.
pub(crate) fn path(path: &Path, home: &Path) -> String {
    if !home.as_os_str().is_empty()
        && let Ok(rest) = path.strip_prefix(home)
    {
        return if rest.as_os_str().is_empty() {
            "~".into()
        } else {
            format!("~/{}", rest.display())
        };
    }
    path.display().to_string()
}

/// `err` and its causes, joined with `: ` (a cause already quoted by the message before it is not repeated).
pub(crate) fn error_chain(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// A JSON value on one line.
pub(crate) fn compact(value: &Value) -> String {
    value.to_string()
}

/// Prints `value` as pretty JSON on stdout.
pub(crate) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Whether colour may be used on a stream: it is a terminal, `NO_COLOR` is unset or empty, and `TERM` is not `dumb`.
pub(crate) fn colour_allowed(is_terminal: bool, no_color: Option<&str>, term: Option<&str>) -> bool {
    is_terminal && no_color.is_none_or(str::is_empty) && term != Some("dumb")
}

/// Terminal colours used by the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Colour {
    Green,
    Yellow,
    Red,
    Dim,
    Bold,
    Cyan,
}

impl Colour {
    fn code(self) -> &'static str {
        match self {
            Colour::Green => "32",
            Colour::Yellow => "33",
            Colour::Red => "31",
            Colour::Dim => "2",
            Colour::Bold => "1",
            Colour::Cyan => "36",
        }
    }
}

/// Whether to paint, decided once per stream.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Style {
    pub colour: bool,
}

impl Style {
    /// The style for stdout.
    pub(crate) fn stdout() -> Style {
        Style {
            colour: colour_allowed(
                std::io::stdout().is_terminal(),
                std::env::var("NO_COLOR").ok().as_deref(),
                std::env::var("TERM").ok().as_deref(),
            ),
        }
    }

    /// The style for stderr.
    pub(crate) fn stderr() -> Style {
        Style {
            colour: colour_allowed(
                std::io::stderr().is_terminal(),
                std::env::var("NO_COLOR").ok().as_deref(),
                std::env::var("TERM").ok().as_deref(),
            ),
        }
    }

    /// `text` wrapped in the colour's escape codes, or unchanged when colour is off.
    pub(crate) fn paint(self, text: &str, colour: Option<Colour>) -> String {
        match colour {
            Some(c) if self.colour && !text.is_empty() => format!("\x1b[{}m{text}\x1b[0m", c.code()),
            _ => text.to_owned(),
        }
    }
}

/// One table cell: text plus an optional colour (applied after padding, so alignment ignores escape codes).
#[derive(Debug, Clone)]
pub(crate) struct Cell {
    pub text: String,
    pub colour: Option<Colour>,
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell { text, colour: None }
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Cell {
        Cell {
            text: text.to_owned(),
            colour: None,
        }
    }
}

/// `text` in `colour`.
pub(crate) fn cell(text: impl Into<String>, colour: Option<Colour>) -> Cell {
    Cell {
        text: text.into(),
        colour,
    }
}

/// A left-aligned table with a header row; columns are separated by two spaces and the last column is not padded.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    pub(crate) fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub(crate) fn render(&self, style: Style) -> String {
        let n_cols = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| width(h)).collect();
        for row in &self.rows {
            for (idx, c) in row.iter().enumerate().take(n_cols) {
                widths[idx] = widths[idx].max(width(&c.text));
            }
        }
        let mut out = String::new();
        let header: Vec<Cell> = self
            .headers
            .iter()
            .map(|h| cell(h.clone(), Some(Colour::Bold)))
            .collect();
        for row in std::iter::once(&header).chain(self.rows.iter()) {
            let mut line = String::new();
            for (idx, c) in row.iter().enumerate().take(n_cols) {
                if idx > 0 {
                    line.push_str("  ");
                }
                line.push_str(&style.paint(&c.text, c.colour));
                if idx + 1 < n_cols.min(row.len()) {
                    line.push_str(&" ".repeat(widths[idx].saturating_sub(width(&c.text))));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Display width in terminal columns, counting every char as one column.
pub(crate) fn width(text: &str) -> usize {
    text.chars().count()
}

/// `text` on one line (whitespace runs collapsed), cut to `max` chars with `…`.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() <= max {
        return joined;
    }
    let mut out: String = joined.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_needs_a_terminal_and_no_no_color() {
        assert!(colour_allowed(true, None, Some("xterm")));
        assert!(colour_allowed(true, Some(""), None), "an empty NO_COLOR does not count");
        assert!(!colour_allowed(true, Some("1"), Some("xterm")));
        assert!(!colour_allowed(false, None, Some("xterm")));
        assert!(!colour_allowed(true, None, Some("dumb")));
    }

    #[test]
    fn tables_align_without_counting_escape_codes() {
        let mut table = Table::new(&["NAME", "STATE", "NOTE"]);
        table.row(vec!["a".into(), cell("ready", Some(Colour::Green)), "z".into()]);
        table.row(vec!["longer".into(), "cached".into(), "".into()]);
        let plain = table.render(Style { colour: false });
        assert_eq!(plain, "NAME    STATE   NOTE\na       ready   z\nlonger  cached\n");
        let painted = table.render(Style { colour: true });
        assert!(painted.contains("\x1b[32mready\x1b[0m   "), "{painted:?}");
        assert!(painted.starts_with("\x1b[1mNAME\x1b[0m    "), "{painted:?}");
    }

    #[test]
    fn one_line_collapses_and_cuts() {
        assert_eq!(one_line("a\n  b\tc", 10), "a b c");
        assert_eq!(one_line("abcdefghijkl", 5), "abcd…");
    }
}
