#!/usr/bin/env python3
"""Symbol-ordering file for lld from callgrind profiles, and a check of where the listed symbols landed.

  order.py make BIN OUT CALLGRIND...   writes OUT: the mangled names of every function of BIN that ran in the
        profiles (callgrind --demangle=no), one a line. Functions of the profiles tagged `serve` come first (most
        instructions first), then those only the `cut` profile (a session the host left mid-call) ran, then those
        that only the other profiles (CLI subcommands) ran. Prints the counts; writes the served count to OUT.served.
  order.py native BIN ORDERFILE PERFDATA...   adds to ORDERFILE, right after its served block (ORDERFILE.served
        names), the functions of BIN whose first instruction fetch page-faulted in a PERFDATA (`session.py faults`
        on BIN laid out by ORDERFILE; several runs catch more of the timing-dependent paths) outside that block:
        code the native session runs that the callgrind training missed (SHA-NI, pidfd reaping, timer paths). Each
        such fault maps a 64-128 KiB window of code around it, of which the session uses little. Prints how many were
        added (0: nothing left to add).
  order.py cold BIN PERFDATA...   counts the instruction fetches that page-faulted (`session.py faults` on BIN) in
        BIN's `.text.cold`: BOLT's region for the blocks its profile never saw run (scripts/build-dist.sh step 3c).
        Each maps a 64-128 KiB window of code the session barely uses. Prints the count, then the faulting symbols.
  order.py data MAP OUT READS...   writes OUT, the .rodata input sections (as linker-script patterns) that overlap
        the ranges a served session read (`session.py reads`, on the link whose lld -Map file is MAP), and OUT.ld, a
        linker script that puts them first in .rodata, right after the dynamic linker's tables. A session reads ~14 KB
        of the 1.8 MB, but the kernel maps whole page-cache folios (64-128 KiB) around each fault, so spread reads
        keep ~1.1 MiB resident.
  order.py data-native BIN MAP OUT PERFDATA...   adds to OUT (and rewrites OUT.ld) the .rodata input sections of
        BIN (laid out by OUT.ld; MAP is its link's map) whose read page-faulted in a PERFDATA outside the hot block:
        native-only paths and the kernel's reads of user memory for a system call (a constant written to a pipe),
        which lackey does not see. Prints how many were added.
  order.py check BIN ORDERFILE [--min N]   reads BIN's symbol table and reports how many listed names it defines
        as functions and how large the address span they occupy is, against the sum of their sizes. Exits non-zero
        when fewer than N names were found, or when the span is more than 1.5x their total size (the functions
        were not placed together). --same-as PLAIN also requires BIN to define exactly PLAIN's function names;
        --data OUT --map MAP requires .rodata to start with OUT's sections.
"""
import argparse, bisect, collections, functools, os, re, subprocess, sys


def names_binary(binary):
    """A test of whether an object path in a profile names `binary` (the same file, or at least its file name)."""
    real, base = os.path.realpath(binary), os.path.basename(binary)
    # Cached: a profile repeats a handful of object paths on millions of cost lines.
    return functools.lru_cache(maxsize=None)(
        lambda path: os.path.realpath(path) == real or os.path.basename(path) == base)


def parse_callgrind(path, binary):
    """Instructions (exclusive) per function name of `binary`'s object in one callgrind output."""
    is_binary = names_binary(binary)
    names = {"ob": {}, "fn": {}}
    cost = collections.Counter()
    ob = fn = None
    in_call = False  # the cost line right after a `calls=` line is the call's inclusive cost, not fn's own
    comp = re.compile(r"^\((\d+)\)(?: (.*))?$")

    def name(kind, value):
        m = comp.match(value)
        if not m:
            return value
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
            return m.group(2)
        return names[kind][m.group(1)]

    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                if in_call:
                    in_call = False
                    continue
                if ob is not None and fn is not None and is_binary(ob):
                    parts = line.split()
                    if len(parts) >= 2:
                        cost[fn] += int(parts[1])
                continue
            key, _, value = line.partition("=")
            if key == "ob":
                ob = name("ob", value)
            elif key == "cob":
                name("ob", value)
            elif key == "fn":
                # callgrind names a recursive function's deeper levels `name'2`, `name'3`, ...
                fn = re.sub(r"'\d+$", "", name("fn", value))
            elif key == "cfn":
                name("fn", value)
            elif key == "calls":
                in_call = True
    return cost


def cmd_make(a):
    serve, cut, other = collections.Counter(), collections.Counter(), collections.Counter()
    for p in a.profiles:
        c = parse_callgrind(p, a.bin)
        base = os.path.basename(p)
        (serve if ".serve." in base else cut if ".cut." in base else other).update(c)
    # Only names the binary's symbol table defines as functions can be ordered (callgrind may also name a
    # function "0x..." when it found no symbol).
    syms = function_symbols(a.bin)
    first = [n for n, _ in serve.most_common() if n in syms]
    # A served session's other ending (the host gone mid-call) right after it, then what only the CLI runs ran.
    ending = [n for n, _ in cut.most_common() if n in syms and n not in serve]
    rest = [n for n, _ in other.most_common() if n in syms and n not in serve and n not in cut]
    unknown = len([n for n in list(serve) + list(cut) + list(other) if n not in syms])
    with open(a.out, "w") as f:
        for n in first + ending + rest:
            f.write(n + "\n")
    size = sum(syms[n] for n in first + ending + rest)
    with open(a.out + ".served", "w") as f:
        f.write(f"{len(first)}\n")
    print(f"{a.out}: {len(first)} functions ran in the served session, {len(ending)} more only when it was cut "
          f"mid-call, {len(rest)} more only in the CLI runs; {size / 1e6:.2f} MB of code; {unknown} profiled names "
          "not in the symbol table (skipped)")


def process_faults(binary, data):
    """[(address, ip, symbol, offset)] of the page faults in one `perf record -e page-faults -d` file that the recorded
    process itself took (the first to fault; not a child it forked, whose faults between fork and exec are the child's
    memory), in order; symbol and offset say where ip lies in `binary`'s code (None, 0 when elsewhere). An instruction
    fetch has address == ip; a fault the kernel took reading user memory for a system call has a kernel ip."""
    is_binary = names_binary(binary)

    def script(fields, *extra):
        return subprocess.run(["perf", "script", "-i", data, "-F", fields, *extra], capture_output=True,
                              text=True, check=True).stdout.splitlines()

    # Two listings of the same events in the same order: the fault's address and ip, and the ip's symbol and object.
    faults = []
    own = None
    for pair, where in zip(script("pid,addr,ip"), script("ip,sym,symoff,dso", "--no-demangle")):
        parts, w = pair.split(), where.split()
        own = own or parts[0]
        if len(parts) != 3 or parts[0] != own:
            continue
        name, off = None, 0
        if len(w) >= 3 and is_binary(w[-1].strip("()")):
            name, _, hexoff = w[1].rpartition("+0x")
            name, off = (name, int(hexoff, 16)) if name else (None, 0)
        faults.append((int(parts[1], 16), int(parts[2], 16), name, off))
    return faults


def fetch_faults(binary, perfdata):
    """(symbol, offset in it) of every instruction fetch in `binary`'s own code that page-faulted in `perfdata`
    (the recorded process's own faults), in order."""
    return [(name, off) for data in perfdata for addr, ip, name, off in process_faults(binary, data)
            if addr == ip and name]


def data_faults(binary, perfdata):
    """The link-time addresses of the data accesses (not instruction fetches) that page-faulted in `perfdata`, the
    kernel's reads of user memory included. The runtime address of `binary` (position-independent: loaded anywhere)
    comes from its instruction fetches, whose symbol perf names."""
    address = {name: copies[0][0] for name, copies in function_copies(binary).items() if len(copies) == 1}
    out = []
    for data in perfdata:
        faults = process_faults(binary, data)
        bases = collections.Counter(ip - address[name] - off for _, ip, name, off in faults if name in address)
        if not bases:
            sys.exit(f"{data}: no instruction fetch in {binary} faulted, so where it was loaded is unknown")
        base = bases.most_common(1)[0][0]
        out += [addr - base for addr, ip, _, _ in faults if addr != ip]
    return out


def cmd_native(a):
    served = int(open(a.order + ".served").read())
    order = [l.strip() for l in open(a.order) if l.strip()]
    in_block = set(order[:served])
    syms = function_symbols(a.bin)
    added = []
    for name, _ in fetch_faults(a.bin, a.perfdata):
        if name in syms and name not in in_block and name not in added:
            added.append(name)
    rest = [n for n in order[served:] if n not in added]
    with open(a.order, "w") as f:
        for n in order[:served] + added + rest:
            f.write(n + "\n")
    with open(a.order + ".served", "w") as f:
        f.write(f"{served + len(added)}\n")
    print(len(added))


def cmd_cold(a):
    cold = section_ranges(a.bin, ".text.cold")
    if not cold:
        sys.exit(f"{a.bin} has no .text.cold section (not a binary BOLT split)")
    address = {name: copies[0][0] for name, copies in function_copies(a.bin).items()}
    hits = [(name, off) for name, off in fetch_faults(a.bin, a.perfdata) if name in address and
            any(start <= address[name] + off < start + size for start, size in cold)]
    print(len(hits))
    for name, off in hits:
        print(f"  {name}+0x{off:x}")


def function_copies(binary):
    """name -> [(address, size)] of the function symbols (local and global) in `binary`'s .symtab, in nm's order (a
    local name can be defined more than once)."""
    out = subprocess.run(["nm", "--defined-only", "-S", binary], capture_output=True, text=True, check=True).stdout
    copies = collections.defaultdict(list)
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwW":
            copies[parts[3]].append((int(parts[0], 16), int(parts[1], 16)))
    return copies


def function_symbols(binary):
    """name -> size (of its largest copy) of the function symbols in `binary`'s .symtab."""
    return {name: max(size for _, size in c) for name, c in function_copies(binary).items()}


def section_ranges(binary, name):
    """[(address, size)] of `binary`'s sections called `name` (readelf's section headers)."""
    text = subprocess.run(["readelf", "-SW", binary], capture_output=True, text=True, check=True).stdout
    return [(int(m.group(1), 16), int(m.group(2), 16)) for m in
            re.finditer(rf"\]\s+{re.escape(name)}\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", text)]


def map_input_sections(path, output):
    """[(address, size, file, section)] of the input sections that lld's -Map file `path` lists in the output section
    `output`, in address order. Its lines: VMA LMA Size Align, then the output section (one space in), an input
    section `file:(name)` (nine) or a symbol (seventeen)."""
    rows, inside = [], False
    line_re = re.compile(r"^\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+( +)(\S.*)$")
    with open(path) as f:
        for line in f:
            m = line_re.match(line)
            if not m:
                continue
            indent, what = len(m.group(3)), m.group(4)
            if indent == 1:
                if inside:
                    break
                inside = what == output
            elif inside and indent == 9 and what.endswith(")") and ":(" in what:
                file, _, section = what[:-1].rpartition(":(")
                rows.append((int(m.group(1), 16), int(m.group(2), 16), file, section))
    if not rows:
        sys.exit(f"{path} lists no input sections in {output}")
    return rows


MERGED_STRINGS = re.compile(r"\.str\d+\.\d+$")


def section_pattern(file, section):
    """The linker-script input section description for one input section: by name alone when the name is the
    section's own (`.rodata.<symbol>`, and lld's merged sections, listed as file `<internal>`), otherwise by archive
    member or object file and name (a C object's plain `.rodata`)."""
    if file == "<internal>" or (section.startswith(".rodata.") and not re.match(r"\.rodata\.cst\d+$", section)
                                and not MERGED_STRINGS.search(section)):
        return f"*({section})"
    archive, member = re.fullmatch(r"(.*?)(?:\((.*)\))?", file).groups()
    where = f"*{os.path.basename(archive)}:{member}" if member else f"*{os.path.basename(archive)}"
    return f"{where}({section})"


def pattern_rank(pattern):
    """Where a pattern goes in the hot block: merged constants, sections of their own, per-file sections, and the
    merged strings last (one large section, read sparsely)."""
    if pattern.startswith("*(") and MERGED_STRINGS.search(pattern[2:-1]):
        return 3
    if re.fullmatch(r"\*\(\.rodata\.cst\d+\)", pattern):
        return 0
    return 1 if pattern.startswith("*(") else 2


# In a hot-section list, the line between the sections every training session read and those only some read.
SOME_SESSIONS = "# read by some training sessions only"


def read_data_order(path):
    """(common, some): the two groups of a list `write_data_order` wrote."""
    with open(path) as f:
        lines = [l.strip() for l in f if l.strip()]
    if SOME_SESSIONS in lines:
        i = lines.index(SOME_SESSIONS)
        return lines[:i], [l for l in lines[i + 1:] if not l.startswith("#")]
    return [l for l in lines if not l.startswith("#")], []


def write_data_order(path, patterns, some=()):
    """Writes the hot `.rodata` input sections to `path` (one pattern a line: those every session read, then those
    only some did) and the linker script that places them first in `.rodata`, in that order, to `path`.ld. The
    sections every session reads go first, so that a session's reads end as early in the file as they can: the
    block after the loader's tables spans as few 128 KiB folios as possible for the kinds of session that matter."""
    patterns = sorted(patterns, key=pattern_rank)  # stable: each rank keeps its order
    some = list(some)
    with open(path, "w") as f:
        f.writelines(p + "\n" for p in patterns)
        if some:
            f.write(SOME_SESSIONS + "\n")
            f.writelines(p + "\n" for p in some)
    patterns = patterns + some
    with open(path + ".ld", "w") as f:
        # Right after the dynamic linker's tables (read at every start, at the file's start): the hot block shares
        # their folio. .debug_gdb_scripts comes along (main reads it, to keep the section) rather than be a folio
        # of its own.
        f.write("/* bench/layout/order.py: the .rodata input sections a served session reads, then the rest. */\n"
                "SECTIONS {\n  .debug_gdb_scripts : { *(.debug_gdb_scripts) }\n  .rodata : {\n")
        f.writelines(f"    {p}\n" for p in patterns)
        f.write("    *(.rodata .rodata.* .gnu.linkonce.r.*)\n  }\n} INSERT AFTER .rela.plt;\n")


def containing(rows, starts, addr):
    """The row of `rows` (address-sorted map rows; `starts` their addresses) whose bytes include `addr`, or None."""
    i = bisect.bisect_right(starts, addr) - 1
    return rows[i] if i >= 0 and addr < rows[i][0] + rows[i][1] else None


def read_ranges(paths):
    """[(start, end, sessions)] from `session.py reads` files, sorted; sessions is a bit set (1 when not given)."""
    out = []
    for path in paths:
        with open(path) as f:
            for line in f:
                parts = [int(x, 16) for x in line.split()]
                if parts:
                    out.append((parts[0], parts[1], parts[2] if len(parts) > 2 else 1))
    return sorted(out)


def cmd_data(a):
    rows = map_input_sections(a.map, ".rodata")
    reads = read_ranges(a.reads)
    every = 0
    for r in reads:
        every |= r[2]
    hot, who, j = [], {}, 0
    for addr, size, file, section in rows:  # both sorted: one walk
        while j < len(reads) and reads[j][1] <= addr:
            j += 1
        k, sessions = j, 0
        while k < len(reads) and reads[k][0] < addr + size:
            sessions |= reads[k][2]
            k += 1
        if sessions:
            pattern = section_pattern(file, section)
            if pattern not in who:
                hot.append(pattern)
            who[pattern] = who.get(pattern, 0) | sessions
    common = [p for p in hot if who[p] == every]
    # Those read by more sessions first; among equals, those the first session (the common initialize host) read.
    some = sorted((p for p in hot if who[p] != every), key=lambda p: (-bin(who[p]).count("1"), not who[p] & 1))
    write_data_order(a.out, common, some)
    sizes = {}
    for _, size, file, section in rows:
        pattern = section_pattern(file, section)
        if pattern in who:
            sizes[pattern] = sizes.get(pattern, 0) + size
    print(f"{a.out}: {len(hot)} of {len(rows)} .rodata input sections read ({sum(sizes.values()) / 1e3:.0f} of "
          f"{sum(r[1] for r in rows) / 1e3:.0f} KB; by every session {len(common)}, "
          f"{sum(sizes[p] for p in common) / 1e3:.0f} KB); linker script {a.out}.ld")


def cmd_data_native(a):
    rows = map_input_sections(a.map, ".rodata")
    starts = [r[0] for r in rows]
    common, some = read_data_order(a.hot)
    hot = common + some
    (lo, size), = section_ranges(a.bin, ".rodata")
    added = []
    for addr in data_faults(a.bin, a.perfdata):
        row = containing(rows, starts, addr) if lo <= addr < lo + size else None
        if row:
            pattern = section_pattern(row[2], row[3])
            if pattern not in hot and pattern not in added:
                added.append(pattern)
    # Native runs of both kinds of session read these: with the sections every session reads.
    write_data_order(a.hot, common + added, some)
    print(len(added))


def cmd_check(a):
    if a.same_as:
        mine, theirs = set(function_symbols(a.bin)), set(function_symbols(a.same_as))
        if mine != theirs:
            sys.exit(f"{a.bin} and {a.same_as} define different functions ({len(mine - theirs)} only in the first, "
                     f"{len(theirs - mine)} only in the second): not the same link")
    where = function_copies(a.bin)
    wanted = [l.strip() for l in open(a.order) if l.strip()]
    found = [n for n in wanted if n in where]
    spans = [(addr, addr + size) for n in found for addr, size in where[n]]
    total = sum(e - s for s, e in spans)
    lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
    tsize = sum(size for _, size in section_ranges(a.bin, ".text"))
    print(f"{a.bin}: {len(found)} of {len(wanted)} ordered names found; their {len(spans)} copies "
          f"({total / 1e6:.2f} MB) span {(hi - lo) / 1e6:.2f} MB at 0x{lo:x}-0x{hi:x}; .text {tsize / 1e6:.2f} MB")
    if len(found) < a.min:
        sys.exit(f"only {len(found)} ordered functions found in {a.bin} (need at least {a.min})")
    if hi - lo > 1.5 * total:
        sys.exit(f"the ordered functions are spread over {(hi - lo) / 1e6:.2f} MB for {total / 1e6:.2f} MB of code: "
                 "the ordering file was not applied")
    if a.data:
        hot = set(sum(read_data_order(a.data), []))
        is_hot = [section_pattern(file, section) in hot for _, _, file, section in map_input_sections(a.map, ".rodata")]
        first_cold = is_hot.index(False) if False in is_hot else len(is_hot)
        print(f"{a.bin}: .rodata starts with {first_cold} of the {sum(is_hot)} input sections {a.data} lists")
        if any(is_hot[first_cold:]):
            sys.exit(f"{sum(is_hot[first_cold:])} input sections {a.data} lists lie after the first one it does not "
                     "list: the linker script was not applied")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def command(name, run, *positional, many):
        p = sub.add_parser(name)
        p.set_defaults(run=run)
        for arg in positional:
            p.add_argument(arg)
        if many:
            p.add_argument(many, nargs="+")
        return p

    command("make", cmd_make, "bin", "out", many="profiles")
    c = command("check", cmd_check, "bin", "order", many=None)
    c.add_argument("--min", type=int, default=1)
    c.add_argument("--same-as", help="a binary that must define exactly the same function names (the plain link)")
    c.add_argument("--data", help="the hot .rodata sections (order.py data) that must open .rodata (with --map)")
    c.add_argument("--map", help="lld's -Map file of BIN's link")
    command("native", cmd_native, "bin", "order", many="perfdata")
    command("cold", cmd_cold, "bin", many="perfdata")
    command("data", cmd_data, "map", "out", many="reads")
    command("data-native", cmd_data_native, "bin", "map", "hot", many="perfdata")
    a = ap.parse_args()
    a.run(a)


if __name__ == "__main__":
    main()
