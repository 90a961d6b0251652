//! Typo suggestions for an unknown name: edit distance (optimal string alignment, pruned by character-count
//! fingerprints), with and without a server prefix, then the token ranking of the name's words.

use super::tokens::name_key;
use super::{SearchIndex, ToolDoc, to_u32};

/// 32 buckets of character counts; half the L1 distance of two fingerprints bounds their edit distance from below.
#[derive(Debug, Clone)]
pub(super) struct Fingerprint([u8; 32]);

impl Fingerprint {
    pub(super) fn of(chars: &[char]) -> Self {
        let mut buckets = [0u8; 32];
        for &c in chars {
            let slot = &mut buckets[(c as usize) % 32];
            *slot = slot.saturating_add(1);
        }
        Fingerprint(buckets)
    }

    fn lower_bound(&self, other: &Fingerprint) -> usize {
        let l1: usize = self
            .0
            .iter()
            .zip(other.0.iter())
            .map(|(a, b)| usize::from(a.abs_diff(*b)))
            .sum();
        l1.div_ceil(2)
    }
}

impl SearchIndex {
    /// Up to `k` tools for an unknown `name`: first names within a small edit distance (optimal string alignment,
    /// so transpositions count once; the allowance grows with length: 1 up to 4 characters, 2 up to 9, else 3),
    /// compared with and without a leading server prefix; then the token ranking of the name's words.
    pub fn suggest(&self, name: &str, k: usize) -> Vec<&ToolDoc> {
        if k == 0 || self.docs.is_empty() {
            return Vec::new();
        }
        let key = name_key(name);
        let stripped = self.strip_server_prefix(&key);
        let full: Vec<char> = key.chars().collect();
        let full_print = Fingerprint::of(&full);
        let part: Option<(Vec<char>, Fingerprint)> = stripped.map(|s| {
            let chars: Vec<char> = s.chars().collect();
            let print = Fingerprint::of(&chars);
            (chars, print)
        });
        let mut scratch = OsaScratch::default();
        let mut edits: Vec<(usize, u32, u32)> = Vec::new();
        for (doc_idx, prep) in self.prepared.iter().enumerate() {
            let mut best: Option<usize> = None;
            let budget = max_typos(full.len());
            for (target, print) in [
                (&prep.name_chars, &prep.name_print),
                (&prep.original_chars, &prep.original_print),
            ] {
                if full_print.lower_bound(print) <= budget
                    && let Some(d) = scratch.distance(&full, target, budget)
                {
                    best = Some(best.map_or(d, |b| b.min(d)));
                }
            }
            if let Some((chars, print)) = &part {
                let budget = max_typos(chars.len());
                if print.lower_bound(&prep.original_print) <= budget
                    && let Some(d) = scratch.distance(chars, &prep.original_chars, budget)
                {
                    best = Some(best.map_or(d, |b| b.min(d)));
                }
            }
            if let Some(d) = best {
                edits.push((d, prep.rank, to_u32(doc_idx)));
            }
        }
        edits.sort_unstable();
        let mut out: Vec<u32> = edits.iter().map(|e| e.2).take(k).collect();
        if out.len() < k {
            let words = stripped.unwrap_or(&key);
            if let Some(mut ranked) = self.ranked(words, None, true) {
                ranked.sort_unstable_by_key(|s| s.sort_key());
                for s in ranked {
                    if out.len() >= k {
                        break;
                    }
                    if !out.contains(&s.doc) {
                        out.push(s.doc);
                    }
                }
            }
        }
        out.into_iter().map(|id| &self.docs[id as usize]).collect()
    }

    /// The part of `key` after the longest server name followed by `_`, when there is one.
    fn strip_server_prefix<'k>(&self, key: &'k str) -> Option<&'k str> {
        self.server_keys.iter().find_map(|server| {
            key.strip_prefix(server.as_str())
                .and_then(|rest| rest.strip_prefix('_'))
                .filter(|rest| !rest.is_empty())
        })
    }
}

/// Allowed edit distance for a name of `len` characters.
fn max_typos(len: usize) -> usize {
    match len {
        0..=4 => 1,
        5..=9 => 2,
        _ => 3,
    }
}

/// Reusable rows for [`OsaScratch::distance`].
#[derive(Debug, Default)]
pub(super) struct OsaScratch {
    prev2: Vec<usize>,
    prev: Vec<usize>,
    cur: Vec<usize>,
}

impl OsaScratch {
    /// Optimal-string-alignment distance of `a` and `b` when it is at most `max`, computed in a band of width
    /// `2·max + 1` with an early exit.
    pub(super) fn distance(&mut self, a: &[char], b: &[char], max: usize) -> Option<usize> {
        let (n, m) = (a.len(), b.len());
        if n.abs_diff(m) > max {
            return None;
        }
        if n == 0 || m == 0 {
            return Some(n.max(m));
        }
        let inf = max + 1;
        for row in [&mut self.prev2, &mut self.prev, &mut self.cur] {
            row.clear();
            row.resize(m + 1, inf);
        }
        for (j, slot) in self.prev.iter_mut().enumerate().take(max.min(m) + 1) {
            *slot = j;
        }
        for i in 1..=n {
            self.cur.fill(inf);
            self.cur[0] = if i <= max { i } else { inf };
            let mut row_min = self.cur[0];
            let lo = i.saturating_sub(max).max(1);
            let hi = (i + max).min(m);
            for j in lo..=hi {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut v = (self.prev[j] + 1).min(self.cur[j - 1] + 1).min(self.prev[j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    v = v.min(self.prev2[j - 2] + 1);
                }
                let v = v.min(inf);
                self.cur[j] = v;
                row_min = row_min.min(v);
            }
            if row_min > max {
                return None;
            }
            std::mem::swap(&mut self.prev2, &mut self.prev);
            std::mem::swap(&mut self.prev, &mut self.cur);
        }
        let d = self.prev[m];
        (d <= max).then_some(d)
    }
}
