//! Search benchmark: builds synthetic catalogs (20, 1,000, 5,000, 20,000 tools; deterministic seed) and prints a
//! markdown table of index build time and per-query latency (median / p99) for ranked search, ranked search plus the
//! result text, regex search and typo suggestions, as wall-clock and as thread CPU time. Run:
//! `cargo bench -p pimcp-proxy --bench search` (`PIMCP_BENCH_DETAIL=1` adds per-query medians on stderr;
//! `PIMCP_BENCH_TOOLS=N` runs one catalog size; `PIMCP_BENCH_QUERY=q` times that one ranked query 20,000 times and
//! stops; `PIMCP_BENCH_DUMP=dir` writes every ranked query's result text to `dir/<tools>.txt`, to compare versions).
#![allow(clippy::print_stdout)] // the table on stdout is this binary's output
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pimcp_proxy::{SearchIndex, SearchQuery, ToolDoc, search_text};

/// The system allocator, counting live heap bytes and their peak (for the index memory table).
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static BLOCKS: AtomicUsize = AtomicUsize::new(0);

fn count_alloc(size: usize) {
    BLOCKS.fetch_add(1, Ordering::Relaxed);
    let live = LIVE.fetch_add(size, Ordering::Relaxed) + size;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: every call goes to `System` with the caller's own arguments; the counters do not touch the memory.
#[expect(
    unsafe_code,
    reason = "a counting global allocator is an unsafe trait; it forwards to System"
)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_alloc(layout.size());
        // SAFETY: forwarded as received.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_alloc(layout.size());
        // SAFETY: forwarded as received.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        BLOCKS.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: forwarded as received.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        BLOCKS.fetch_sub(1, Ordering::Relaxed);
        count_alloc(new_size);
        // SAFETY: forwarded as received.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Heap bytes and blocks the index holds beyond its documents, and the build's peak bytes above them.
fn index_heap(docs: &[ToolDoc]) -> (usize, usize, usize) {
    let docs = docs.to_vec();
    let (base, base_blocks) = (LIVE.load(Ordering::Relaxed), BLOCKS.load(Ordering::Relaxed));
    PEAK.store(base, Ordering::Relaxed);
    let index = SearchIndex::build(docs);
    let held = LIVE.load(Ordering::Relaxed) - base;
    let blocks = BLOCKS.load(Ordering::Relaxed) - base_blocks;
    let peak = PEAK.load(Ordering::Relaxed) - base;
    drop(index);
    (held, blocks, peak)
}

#[path = "search/catalog.rs"]
mod catalog;

use catalog::{catalog, lexicon};

/// The fixed query set; three names come from the catalog itself (exact, prefix, typo).
fn ranked_queries(docs: &[ToolDoc], lexicon: &[String]) -> Vec<String> {
    let exact = docs[docs.len() / 3].name.clone();
    let prefix: String = docs[docs.len() / 2].name.chars().take(10).collect();
    let mut q: Vec<String> = [
        "issue",
        "create issue",
        "list files",
        "send a message to a channel",
        "getFileContents",
        "pull request comment",
        "delete",
        "kubernetes pod logs",
        "invoice payment",
        "search",
        "calendar event",
        "upload file to bucket",
        "archived",
        "permissions",
        "搜索文档",
        "zzz nonexistent words",
        "database row query",
        "restore deployment",
        "x",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    q.push(exact);
    q.push(prefix);
    q.push(lexicon[0].clone());
    q.push(lexicon[lexicon.len() / 2].clone());
    q.push(lexicon[7].chars().take(4).collect());
    q.push(format!("{} {}", lexicon[1], "issue"));
    q
}

const REGEX_QUERIES: &[&str] = &[
    "^github_.*issue",
    "delete|remove",
    "(a+)+$",
    "pull.?request",
    "^[a-z]+_list",
    "cursor",
    "批|文档",
];

fn typo_names(docs: &[ToolDoc]) -> Vec<String> {
    [docs.len() / 5, docs.len() / 2, docs.len() * 4 / 5]
        .iter()
        .map(|&i| {
            let mut chars: Vec<char> = docs[i].name.chars().collect();
            let n = chars.len();
            chars.swap(n - 2, n - 3);
            chars.into_iter().collect()
        })
        .chain(["everything_ecoh".to_string(), "nonexistent_tool_name".to_string()])
        .collect()
}

struct Stats {
    median: Duration,
    p99: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    Stats {
        median: at(0.5),
        p99: at(0.99),
    }
}

/// CPU time of this thread: unlike wall-clock time it excludes time spent descheduled, which dominates the tail
/// on a shared 2-core machine.
#[cfg(unix)]
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `clock_gettime` writes one `timespec` through a valid, exclusive pointer; no other memory is touched.
    #[expect(unsafe_code, reason = "clock_gettime(2) for thread CPU time has no std equivalent")]
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// No thread CPU clock is read on other systems (the figures in docs/benchmarks.md come from Linux): zero.
#[cfg(not(unix))]
fn thread_cpu_time() -> Duration {
    Duration::ZERO
}

/// Wall-clock and thread CPU time of one call.
fn time<T>(f: impl FnOnce() -> T) -> (Duration, Duration) {
    let cpu = thread_cpu_time();
    let start = Instant::now();
    black_box(f());
    (start.elapsed(), thread_cpu_time().saturating_sub(cpu))
}

/// Samples of one operation, wall-clock and CPU.
#[derive(Default)]
struct Samples {
    wall: Vec<Duration>,
    cpu: Vec<Duration>,
}

impl Samples {
    fn push(&mut self, (wall, cpu): (Duration, Duration)) {
        self.wall.push(wall);
        self.cpu.push(cpu);
    }

    fn wall(&self) -> String {
        let s = stats(self.wall.clone());
        format!("{} / {}", us(s.median), us(s.p99))
    }

    fn cpu(&self) -> String {
        let s = stats(self.cpu.clone());
        format!("{} / {}", us(s.median), us(s.p99))
    }
}

fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

/// Per-query medians (set `PIMCP_BENCH_DETAIL=1`), to see which queries cost what.
fn detail(index: &SearchIndex, queries: &[String], typos: &[String], reps: usize) {
    let mut rows: Vec<(String, Duration, usize)> = Vec::new();
    for q in queries {
        let query = SearchQuery::new(q.as_str());
        let total = index.search(&query).map_or(0, |p| p.total);
        rows.push((
            format!("ranked {q:?}"),
            stats(
                (0..reps)
                    .map(|_| time(|| index.search(&query).map(|p| p.total)).1)
                    .collect(),
            )
            .median,
            total,
        ));
    }
    for q in REGEX_QUERIES {
        let query = SearchQuery::new(*q).with_regex(true);
        let total = index.search(&query).map_or(0, |p| p.total);
        rows.push((
            format!("regex {q:?}"),
            stats(
                (0..reps)
                    .map(|_| time(|| index.search(&query).map(|p| p.total)).1)
                    .collect(),
            )
            .median,
            total,
        ));
    }
    for t in typos {
        let n = index.suggest(t, 5).len();
        rows.push((
            format!("suggest {t:?}"),
            stats((0..reps).map(|_| time(|| index.suggest(t, 5).len()).1).collect()).median,
            n,
        ));
    }
    eprintln!("-- {} tools", index.len());
    for (what, median, total) in rows {
        eprintln!("{:>10} µs  {total:>6} hits  {what}", us(median));
    }
}

fn main() {
    let sizes: &[(usize, usize, usize)] = &[(20, 1, 200), (1_000, 10, 40), (5_000, 25, 20), (20_000, 50, 8)];
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split_whitespace().take(3).collect::<Vec<_>>().join(" ");
    println!("Search benchmark — {cpu}, {cores} cores, load average {load} at start.\n");
    let lexicon = lexicon(6_000);
    let mut cpu_rows = Vec::new();
    let mut heap_rows = Vec::new();
    println!("Wall-clock time per query, median / p99 (µs):\n");
    println!("| tools | tokens | build (ms) | ranked | ranked + text | regex | suggest | queries × reps |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    let only: Option<usize> = std::env::var("PIMCP_BENCH_TOOLS").ok().and_then(|v| v.parse().ok());
    for &(n_tools, n_servers, reps) in sizes {
        if only.is_some_and(|n| n != n_tools) {
            continue;
        }
        let docs = catalog(n_tools, n_servers, 0x5EED_0000 + n_tools as u64, &lexicon);
        let builds: Vec<Duration> = (0..5).map(|_| time(|| SearchIndex::build(docs.clone())).0).collect();
        let build = stats(builds).median;
        let (held, blocks, peak) = index_heap(&docs);
        heap_rows.push(format!(
            "| {n_tools} | {:.1} | {blocks} | {:.1} |",
            held as f64 / 1024.0,
            peak as f64 / 1024.0
        ));
        let queries = ranked_queries(&docs, &lexicon);
        let typos = typo_names(&docs);
        let index = SearchIndex::build(docs);
        // Warm-up, and a check that the set exercises real work.
        let mut hits = 0;
        for q in &queries {
            hits += index.search(&SearchQuery::new(q.as_str())).map_or(0, |p| p.total);
        }
        assert!(hits > 0, "queries found nothing");
        let (mut ranked, mut with_text, mut regex, mut suggest) = (
            Samples::default(),
            Samples::default(),
            Samples::default(),
            Samples::default(),
        );
        for _ in 0..reps {
            for q in &queries {
                let query = SearchQuery::new(q.as_str());
                ranked.push(time(|| index.search(&query).map(|p| p.total)));
                with_text.push(time(|| index.search(&query).map(|p| search_text(&query, &p, &[]))));
            }
            for q in REGEX_QUERIES {
                let query = SearchQuery::new(*q).with_regex(true);
                regex.push(time(|| index.search(&query).map(|p| p.total)));
            }
            for t in &typos {
                suggest.push(time(|| index.suggest(t, 5).len()));
            }
        }
        if let Ok(q) = std::env::var("PIMCP_BENCH_QUERY") {
            let query = SearchQuery::new(q.as_str());
            let samples: Vec<Duration> = (0..20_000)
                .map(|_| time(|| index.search(&query).map(|p| p.total)).0)
                .collect();
            println!("{q:?}: {}", us(stats(samples).median));
            return;
        }
        if let Some(dir) = std::env::var_os("PIMCP_BENCH_DUMP") {
            let mut all = String::new();
            for q in &queries {
                let query = SearchQuery::new(q.as_str());
                let page = index.search(&query).unwrap();
                all.push_str(&format!("=== {q:?}\n{}\n", search_text(&query, &page, &[])));
            }
            std::fs::write(std::path::Path::new(&dir).join(format!("{n_tools}.txt")), all).unwrap();
        }
        if std::env::var_os("PIMCP_BENCH_DETAIL").is_some() {
            detail(&index, &queries, &typos, reps);
        }
        println!(
            "| {n_tools} | {} | {:.1} | {} | {} | {} | {} | {}+{}+{} × {reps} |",
            index.n_tokens(),
            build.as_secs_f64() * 1e3,
            ranked.wall(),
            with_text.wall(),
            regex.wall(),
            suggest.wall(),
            queries.len(),
            REGEX_QUERIES.len(),
            typos.len(),
        );
        cpu_rows.push(format!(
            "| {n_tools} | {} | {} | {} | {} |",
            ranked.cpu(),
            with_text.cpu(),
            regex.cpu(),
            suggest.cpu()
        ));
    }
    println!("\nThread CPU time per query (excludes time descheduled), median / p99 (µs):\n");
    println!("| tools | ranked | ranked + text | regex | suggest |");
    println!("|---:|---:|---:|---:|---:|");
    for row in cpu_rows {
        println!("{row}");
    }
    println!("\nIndex heap beyond the documents (held after the build: KiB and allocations; peak during it: KiB):\n");
    println!("| tools | held KiB | allocations | build peak KiB |");
    println!("|---:|---:|---:|---:|");
    for row in heap_rows {
        println!("{row}");
    }
}
