#!/usr/bin/env bash
# Builds pimcp-run with the functions it executes laid out together at the start of .text, so that the pages of
# code a running pimcp-run touches (most of its resident memory) are few and contiguous. See docs/benchmarks.md,
# "Session 5: code layout and RSS".
#
#   scripts/build-dist.sh            # profile `dist` (fat LTO, one codegen unit): slow, the smallest binary
#   PROFILE=release scripts/build-dist.sh
#
# Steps, each checked (any failure exits non-zero):
#   1. cargo builds mcp-fixture in release (the training server; FIXTURE=PATH uses that one instead), then
#      pimcp-run and pimcp-shim in the profile, with LLD_REPRODUCE set: lld saves every input of pimcp-run's
#      link (target/<profile>/pimcp-run.link.tar), so that link can be replayed exactly.
#   2. Training: bench/layout/session.py runs pimcp-run under valgrind's callgrind, as a host's stdio server
#      against mcp-fixture (initialize, tools/list, status, list, search, describe, calls) and for the CLI
#      subcommands (status, search, describe, call, config show, --help); bench/layout/order.py turns the
#      profiles into lld's symbol-ordering file (mangled names; the served session's functions first).
#   3. Relink: the saved link replayed by rust-lld with `--symbol-ordering-file` (no crate is recompiled, so
#      every name in the file is a name of this very link), and with `-z pack-relative-relocs` (RELR: the
#      dynamic loader reads a few KiB of relocations instead of ~1.4 MB) when this machine's glibc is 2.36 or newer:
#      such a binary needs glibc >= 2.36 to start, which the machine that builds it has (RELR=0 turns it off).
#      PIE=0 links a non-PIE executable instead: no relocations at all and ~0.4 MiB less resident, at the price of
#      address-space randomization of the executable's own code; off unless asked for.
#   3a. Read-only data (RODATA=1, the default): the relink is replayed once as a non-PIE executable, which serves the
#      session under valgrind's lackey (every load's address: session.py reads); order.py data names the .rodata
#      input sections it read (from lld's -Map of that link) and writes a linker script that puts them first in
#      .rodata (those every training session read, then those only some did), and .rodata right after the dynamic
#      linker's tables; every later relink uses it.
#   3b. Native passes (when perf works): the laid-out binary serves the session natively under `perf record -e
#      page-faults`; functions whose first instruction fetch faulted outside the laid-out block join it, and .rodata
#      sections whose read faulted outside the hot block join that (order.py data-native); relink; again until a pass
#      adds none (at most NATIVE_PASSES).
#   3c. BOLT (when llvm-bolt is installed: Debian's bolt-16): the link replayed with --emit-relocs, instrumented by
#      llvm-bolt, run natively through the training sessions (BOLT_RUNS times, BOLT_CALLS echo calls, each run
#      against another catalog of the like-everything upstream), then
#      rewritten: each function's blocks that ran stay in .text in the order file's order, the rest move to
#      .text.cold, so the resident code is what runs rather than whole functions. The DWARF line tables are
#      rewritten for the moved code (-update-debug-sections: backtraces keep file:line).
#   4. Check: order.py reads the laid-out binary's symbol table and fails when it does not define the same
#      functions as cargo's link, when fewer than MIN_PLACED_PCT % (default 95) of the listed functions are in it, or
#      when they do not sit together; the final binary then serves the same session once more, without valgrind
#      (and, after BOLT, once under perf, counting the instruction fetches that faulted in .text.cold).
# The result replaces target/<profile>/pimcp-run (next to its pimcp-shim); its path is printed last.
# Needs: cargo, python3, valgrind (perf for the native passes, llvm-bolt for 3c). Env: PROFILE (dist),
# CARGO_TARGET_DIR, FIXTURE, MIN_PLACED_PCT (95), TRAIN_CALLS (20), REUSE_LINK=1 (skip the build and replay the link
# archive a previous run left), RELR (auto), PIE (1), RODATA (1; 0 leaves .rodata in the linker's order),
# NATIVE_PASSES (6; 0 skips them; skipped too when perf cannot record page faults), BOLT (auto: when llvm-bolt is
# found; 1 requires it, 0 skips it), BOLT_RUNS (5), BOLT_CALLS (200), BOLT_LONG_CALLS (1100: the last BOLT run's calls).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROFILE=${PROFILE:-dist}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
case $TARGET in /*) ;; *) TARGET=$ROOT/$TARGET ;; esac
MIN_PLACED_PCT=${MIN_PLACED_PCT:-95}
TRAIN_CALLS=${TRAIN_CALLS:-20}
BOLT_RUNS=${BOLT_RUNS:-5}
BOLT_CALLS=${BOLT_CALLS:-200}
BOLT_LONG_CALLS=${BOLT_LONG_CALLS:-1100}
NATIVE_PASSES=${NATIVE_PASSES:-6}
OUT=$TARGET/$PROFILE
WORK=$TARGET/layout-$PROFILE
die() { echo "build-dist: $*" >&2; exit 1; }
say() { echo "build-dist: $*" >&2; }

command -v valgrind >/dev/null || die "valgrind is needed for the training run (apt-get install valgrind)"
command -v python3 >/dev/null || die "python3 is needed"
HOST=$(rustc -vV | sed -n 's/^host: //p')
LLD=$(rustc --print sysroot)/lib/rustlib/$HOST/bin/rust-lld
[ -x "$LLD" ] || die "no rust-lld at $LLD (the toolchain's self-contained linker)"

# The link's options, checked before anything is built: a bad value fails here, not after the build.
# RELR needs the loader's support (glibc 2.36, GLIBC_ABI_DT_RELR); lld records that need in the binary, so an older
# glibc refuses to start it with a clear error rather than misbehaving.
glibc_at_least() {  # MAJOR MINOR
  local v
  v=$(getconf GNU_LIBC_VERSION 2>/dev/null | sed -n 's/^glibc \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
  [ -n "$v" ] && set -- $v "$1" "$2" && { [ "$1" -gt "$3" ] || { [ "$1" -eq "$3" ] && [ "$2" -ge "$4" ]; }; }
}
LINK_EXTRA=()
RELR=${RELR:-auto}
PIE=${PIE:-1}
case $PIE in
  0) LINK_EXTRA+=(-no-pie) ;;
  1) ;;
  *) die "PIE=$PIE: expected 1 (default) or 0" ;;
esac
case $RELR in
  auto) if [ "$PIE" = 1 ] && glibc_at_least 2 36; then RELR=1; else RELR=0; fi ;;
  0) ;;
  1) glibc_at_least 2 36 || die "RELR=1 needs glibc 2.36 or newer here ($(getconf GNU_LIBC_VERSION 2>&1))" ;;
  *) die "RELR=$RELR: expected auto (default), 1 or 0" ;;
esac
[ "$RELR" = 1 ] && LINK_EXTRA+=(-z pack-relative-relocs)
# llvm-bolt from PATH or Debian's llvm-N packages (bolt-16: apt-get install bolt-16), newest first.
LLVM_BOLT=$(command -v llvm-bolt || ls -d /usr/lib/llvm-*/bin/llvm-bolt 2>/dev/null | sort -V | tail -1 || true)
MERGE_FDATA=$(dirname "${LLVM_BOLT:-.}")/merge-fdata
RODATA=${RODATA:-1}
case $RODATA in 0 | 1) ;; *) die "RODATA=$RODATA: expected 1 (default) or 0" ;; esac
BOLT=${BOLT:-auto}
HAVE_BOLT=0
[ -x "$LLVM_BOLT" ] && [ -x "$MERGE_FDATA" ] && HAVE_BOLT=1
case $BOLT in
  auto)
    BOLT=$HAVE_BOLT
    [ "$BOLT" = 1 ] ||
      say "no llvm-bolt found: step 3c (hot/cold splitting) will be skipped (apt-get install bolt-16)" ;;
  0) ;;
  1) [ "$HAVE_BOLT" = 1 ] || die "BOLT=1 but no llvm-bolt and merge-fdata found (apt-get install bolt-16)" ;;
  *) die "BOLT=$BOLT: expected auto (default), 1 or 0" ;;
esac

cd "$ROOT"
rm -rf "$WORK"
mkdir -p "$WORK"
export CARGO_TARGET_DIR=$TARGET

say "1/4 building pimcp-run and pimcp-shim (profile $PROFILE)"
if [ -n "${FIXTURE:-}" ]; then
  [ -x "$FIXTURE" ] || die "FIXTURE=$FIXTURE is not an executable"
else
  cargo build --release -p mcp-fixture --bin mcp-fixture
  FIXTURE=$TARGET/release/mcp-fixture
fi
# lld saves every input of a link it makes while LLD_REPRODUCE names a file. Removing pimcp-run's outputs makes cargo
# link it again (recompiling only the pimcp-run crate; with fat LTO that is the whole LTO step); it is the last link
# of the build (it waits for pimcp-proxy and pimcp-cli), and the archive is checked to be its own below. (On a fresh
# target directory every earlier link, build scripts and proc macros too, also writes the archive: a little slower.)
TAR=$OUT/pimcp-run.link.tar
if [ "${REUSE_LINK:-0}" = 1 ] && [ -s "$TAR" ]; then
  say "REUSE_LINK=1: replaying the link saved in $TAR (no build)"
else
  rm -f "$TAR" "$OUT/pimcp-run" "$OUT"/deps/pimcp_run-*
  LLD_REPRODUCE=$TAR cargo build --profile "$PROFILE" -p pimcp-cli --bin pimcp-run -p pimcp-actors --bin pimcp-shim
fi
[ -s "$TAR" ] || die "the link left no archive at $TAR (is the linker rust-lld? readelf -p .comment $OUT/pimcp-run)"
PLAIN=$(ls "$OUT"/deps/pimcp_run-* | grep -v '\.d$' | head -1)
[ -x "$PLAIN" ] || die "no linked pimcp-run under $OUT/deps"
tar -xOf "$TAR" --wildcards '*/response.txt' >"$WORK/response.txt" || die "no response.txt in $TAR"
grep -qE -- "-o ([^ ]*/)?$(basename "$PLAIN")( |\$)" "$WORK/response.txt" ||
  die "$TAR is not the archive of pimcp-run's link ($(basename "$PLAIN")); run again"
cp "$PLAIN" "$WORK/pimcp-run.plain"

say "2/4 training run under callgrind"
# A directory of its own: pimcp-run runs the pimcp-shim next to it as the guardian shim, which is not traced.
mkdir -p "$WORK/train"
cp "$WORK/pimcp-run.plain" "$WORK/train/pimcp-run"
cp "$OUT/pimcp-shim" "$WORK/train/pimcp-shim"
FIXTURE=$FIXTURE python3 bench/layout/session.py train "$WORK/train/pimcp-run" "$WORK/profiles" \
  --calls "$TRAIN_CALLS" || die "training run failed"
python3 bench/layout/order.py make "$WORK/train/pimcp-run" "$WORK/order.txt" "$WORK"/profiles/callgrind.* ||
  die "could not make the ordering file"
LISTED=$(wc -l <"$WORK/order.txt")
[ "$LISTED" -ge 1000 ] || die "the training run executed only $LISTED functions of pimcp-run; expected thousands"

say "3/4 relinking with $LISTED functions ordered (RELR=$RELR PIE=$PIE)"
tar -xf "$TAR" -C "$WORK"
tar -tf "$TAR" >"$WORK/link.list"
REPRO=$WORK/$(head -1 "$WORK/link.list" | cut -d/ -f1)  # lld's archive holds one directory
[ -f "$REPRO/response.txt" ] || die "no response.txt in $TAR"
# response.txt starts with `--chroot .`: lld reads absolute input paths inside the extracted archive. For PIE=0 its
# `-pie` line goes (lld's last -pie/-no-pie wins anyway; removing it keeps the command plain).
if [ "$PIE" = 0 ]; then
  grep -qx -- '-pie' "$REPRO/response.txt" || die "PIE=0: the saved link has no -pie line to drop"
  sed -i '/^-pie$/d' "$REPRO/response.txt"
fi
relink() {  # [OUTPUT [EXTRA LLD ARGS...]]; lld's map of the link goes to OUTPUT.map
  local out=${1:-$WORK/pimcp-run.ordered} script=()
  cp "$WORK/order.txt" "$REPRO/order.txt"
  if [ -s "$WORK/rodata.txt.ld" ]; then
    cp "$WORK/rodata.txt.ld" "$REPRO/rodata.ld"
    script=(-T rodata.ld)
  fi
  (cd "$REPRO" && "$LLD" -flavor gnu @response.txt --symbol-ordering-file=order.txt \
    --no-warn-symbol-ordering "${script[@]}" -Map="$out.map" "${LINK_EXTRA[@]}" "${@:2}" -o "$out") ||
    die "the relink failed"
}
# Read-only data: a session reads ~14 KB of .rodata's 1.8 MB, spread over a quarter of its pages, and the kernel maps
# 64 KiB or more of the file around each fault. The sections it reads (valgrind's lackey, every load, on a non-PIE
# link whose addresses are the map's) go first in .rodata through a linker script (order.py data).
if [ "$RODATA" = 1 ]; then
  say "3/4 the .rodata a served session reads, under valgrind's lackey"
  relink "$WORK/pimcp-run.reads" -no-pie
  mkdir -p "$WORK/reads"
  cp "$WORK/pimcp-run.reads" "$WORK/reads/pimcp-run"
  cp "$OUT/pimcp-shim" "$WORK/reads/pimcp-shim"
  FIXTURE=$FIXTURE python3 bench/layout/session.py reads "$WORK/reads/pimcp-run" "$WORK/reads/reads.txt" \
    --calls "$TRAIN_CALLS" >&2 || die "the session under lackey failed"
  python3 bench/layout/order.py data "$WORK/pimcp-run.reads.map" "$WORK/rodata.txt" "$WORK/reads/reads.txt" >&2 ||
    die "could not make the .rodata linker script"
  rm -rf "$WORK/reads" "$WORK/pimcp-run.reads" "$WORK/pimcp-run.reads.map"
fi
relink
if [ "$RELR" = 1 ]; then
  readelf -d "$WORK/pimcp-run.ordered" | grep -q '(RELR)' || die "RELR was asked for but the binary has no DT_RELR"
fi
if [ "$PIE" = 0 ]; then
  readelf -h "$WORK/pimcp-run.ordered" | grep -q 'EXEC (Executable' || die "PIE=0 but the binary is still PIE"
fi

# Native passes: the training ran under callgrind, which lacks some CPU features (SHA-NI) and syscalls (pidfd_open)
# and runs 50x slower, so the native session takes paths it never saw. Each first fetch of such code faults in a
# 64–128 KiB window around it (the page-cache folio). A pass runs the session natively under `perf record -e
# page-faults`, adds the functions whose fetch faulted outside the laid-out block to that block (order.py native) and
# relinks; it stops when a pass finds none or after NATIVE_PASSES (session 7: release 8, 3, 4, 2, 0 functions, -0.3
# to -0.9 MiB peak RSS; dist 9, 3, 0).
if [ "$NATIVE_PASSES" -gt 0 ] && ! perf record -q -e page-faults -o /dev/null -- true >/dev/null 2>&1; then
  say "3/4 perf cannot record page faults here (not installed, or perf_event_paranoid): no native passes"
  NATIVE_PASSES=0
fi
mkdir -p "$WORK/native"
cp "$OUT/pimcp-shim" "$WORK/native/pimcp-shim"
for pass in $(seq 1 "$NATIVE_PASSES"); do
  cp "$WORK/pimcp-run.ordered" "$WORK/native/pimcp-run"
  # This pass's records only (perf keeps an existing output as NAME.old: the previous pass's binary's faults).
  rm -f "$WORK/native"/faults.*
  # Three runs (the timing-dependent paths differ from run to run: a read seen in one run of four is still a folio
  # in a quarter of the sessions), per kind of host: initialize twice, and the 2026-07-28 stateless protocol
  # (against an upstream that behaves as server-everything does).
  for run in 2025-06-18.1 2025-06-18.2 2026-07-28; do
    FIXTURE=$FIXTURE python3 bench/layout/session.py faults "$WORK/native/pimcp-run" \
      "$WORK/native/faults.$run" --version "${run%.[0-9]}" || die "native pass $pass: the session under perf failed"
  done
  ADDED=$(python3 bench/layout/order.py native "$WORK/native/pimcp-run" "$WORK/order.txt" \
    "$WORK/native"/faults.*) || die "native pass $pass: order.py native failed"
  # The data it read outside the hot .rodata block: native-only paths, and the kernel's reads for system calls
  # (a constant written to a pipe), which lackey does not see.
  DADDED=0
  if [ "$RODATA" = 1 ]; then
    DADDED=$(python3 bench/layout/order.py data-native "$WORK/native/pimcp-run" "$WORK/pimcp-run.ordered.map" \
      "$WORK/rodata.txt" "$WORK/native"/faults.*) || die "native pass $pass: order.py data-native failed"
  fi
  say "3/4 native pass $pass: $ADDED functions and $DADDED .rodata sections the native session used outside the" \
    "laid-out blocks"
  [ "$ADDED" -gt 0 ] || [ "$DADDED" -gt 0 ] || break
  relink
done
rm -rf "$WORK/native"
LISTED=$(wc -l <"$WORK/order.txt")

# BOLT: within the laid-out functions, most code never runs (error paths, other enum variants, serde fields a session
# never sees), yet each function's pages are resident whole. llvm-bolt splits every profiled function into the blocks
# the profile saw run (laid out in .text in the order file's order) and the rest (.text.cold). Its profile comes from
# the binary itself, instrumented by llvm-bolt, serving the training sessions natively BOLT_RUNS times (session.py
# train --native, --calls BOLT_CALLS); the link is replayed once more with --emit-relocs, which BOLT needs to move
# code. A block the training never ran but a real session does costs a 64–128 KiB window of .text.cold: step 4 counts
# them for the session. Session 8: peak RSS 8.1 -> 6.4 MiB (docs/benchmarks.md, "Session 8").
if [ "$BOLT" = 1 ]; then
  say "3c/4 BOLT ($LLVM_BOLT): instrumenting, $BOLT_RUNS native training runs, splitting hot from cold blocks"
  relink "$WORK/pimcp-run.relocs" --emit-relocs
  # The instrumented binary runs from a directory with 1- and 2-character components: std's path parsing compares
  # such components with `.` and `..`, a branch an installed binary's path can take (`/opt/x/bin`, `/srv/d2`), which
  # pimcp-run walks at start to find the pimcp-shim next to it (a cold fetch in every session otherwise).
  rm -rf "$WORK/bolt" && mkdir -p "$WORK/bolt/t/x2" "$WORK/bolt/profile"
  "$LLVM_BOLT" "$WORK/pimcp-run.relocs" -o "$WORK/bolt/t/x2/pimcp-run" -instrument \
    -instrumentation-file="$WORK/bolt/profile/prof" -instrumentation-file-append-pid \
    >"$WORK/bolt/instrument.log" 2>&1 || die "llvm-bolt -instrument failed (log: $WORK/bolt/instrument.log)"
  cp "$OUT/pimcp-shim" "$WORK/bolt/t/x2/pimcp-shim"
  for run in $(seq 1 "$BOLT_RUNS"); do
    # Each run with another environment size (the paths its sort and growth take at start depend on it): the six
    # variables an MCP SDK passes a stdio server by default, this shell's, then 80 more per further run.
    case $run in 1) ENV_ARGS=(--minimal-env) ;; *) ENV_ARGS=(--env-pad $(((run - 2) * 80))) ;; esac
    # The last run makes BOLT_LONG_CALLS calls a session, so request ids and counters reach four digits: integer
    # formatting has a branch per digit count, and 200 calls never take the four-digit one (session 11: a cold fetch
    # in every 1,000-call session).
    CALLS=$BOLT_CALLS
    if [ "$run" = "$BOLT_RUNS" ]; then CALLS=$BOLT_LONG_CALLS; fi
    # Each run also serves another catalog from the like-everything upstream (session.py VARIANTS: list sizes,
    # seeds, sorted or not, server names): branches taken by a catalog's sizes and order run in some run.
    FIXTURE=$FIXTURE python3 bench/layout/session.py train --native "$WORK/bolt/t/x2/pimcp-run" "$WORK/bolt/out" \
      --calls "$CALLS" --variant $((run - 1)) "${ENV_ARGS[@]}" || die "BOLT training run $run failed"
  done
  ls "$WORK"/bolt/profile/prof.*.fdata >/dev/null 2>&1 || die "the instrumented pimcp-run wrote no profile"
  "$MERGE_FDATA" "$WORK"/bolt/profile/prof.*.fdata >"$WORK/bolt/profile.fdata" 2>"$WORK/bolt/merge.log" ||
    die "merge-fdata failed (log: $WORK/bolt/merge.log)"
  "$LLVM_BOLT" "$WORK/pimcp-run.relocs" -o "$WORK/pimcp-run.bolt" -data="$WORK/bolt/profile.fdata" \
    -reorder-blocks=ext-tsp -reorder-functions=user -function-order="$WORK/order.txt" \
    -split-functions -split-all-cold -split-eh -update-debug-sections >"$WORK/bolt/optimize.log" 2>&1 ||
    die "llvm-bolt failed (log: $WORK/bolt/optimize.log)"
  grep -E "functions in the binary .* have non-empty execution profile|setting __hot_(start|end)" \
    "$WORK/bolt/optimize.log" | sed 's/^/build-dist:   /' >&2 || true
  rm -rf "$WORK/bolt/t" "$WORK/bolt/profile" "$WORK/bolt/out" "$WORK/pimcp-run.relocs" \
    "$WORK/pimcp-run.relocs.map"
fi
rm -rf "$REPRO"

say "4/4 checking the ordered binary"
MIN=$((LISTED * MIN_PLACED_PCT / 100))
DATA_CHECK=()
[ "$RODATA" = 1 ] && DATA_CHECK=(--data "$WORK/rodata.txt" --map "$WORK/pimcp-run.ordered.map")
python3 bench/layout/order.py check "$WORK/pimcp-run.ordered" "$WORK/order.txt" --min "$MIN" \
  --same-as "$WORK/pimcp-run.plain" "${DATA_CHECK[@]}" ||
  die "the ordering was not applied"
FINAL=$WORK/pimcp-run.ordered
[ "$BOLT" = 1 ] && FINAL=$WORK/pimcp-run.bolt
mkdir -p "$WORK/smoke"
cp "$FINAL" "$WORK/smoke/pimcp-run"
cp "$OUT/pimcp-shim" "$WORK/smoke/pimcp-shim"
FIXTURE=$FIXTURE python3 bench/layout/session.py rss "$WORK/smoke/pimcp-run" --rounds 1 --calls 20 >&2 ||
  die "the final binary failed the session"
# A panic must unwind to its catch (a task's panic stays the task's), and BOLT moved the landing pads. A binary that
# cannot unwind aborts or crashes here (session 9: with the unwinder linked in statically, libgcc_eh.a instead of
# libgcc_s.so.1, every BOLT-rewritten binary crashed in _Unwind_Find_FDE; that link was dropped).
"$WORK/smoke/pimcp-run" __pimcp_unwind_check__ || die "the final binary does not unwind a panic (exit $?)"
if [ "$BOLT" = 1 ] && [ "$NATIVE_PASSES" -gt 0 ]; then
  # How well the profile covered the native session: each fetch fault in .text.cold maps a 64–128 KiB window.
  FIXTURE=$FIXTURE python3 bench/layout/session.py faults "$WORK/smoke/pimcp-run" "$WORK/smoke/faults" ||
    die "the BOLT binary failed the session under perf"
  COLD=$(python3 bench/layout/order.py cold "$WORK/smoke/pimcp-run" "$WORK/smoke/faults" | head -1)
  say "4/4 the session's instruction fetches that faulted in BOLT's cold region: $COLD"
fi
rm -rf "$WORK/smoke" "$WORK/train"

cp "$FINAL" "$OUT/pimcp-run.tmp"
mv -f "$OUT/pimcp-run.tmp" "$OUT/pimcp-run"
say "done; plain link kept at $WORK/pimcp-run.plain, ordering file $WORK/order.txt"
echo "$OUT/pimcp-run"
