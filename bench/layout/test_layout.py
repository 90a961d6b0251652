"""Unit tests of the layout scripts' parsing and bookkeeping (order.py, session.py): no binary, valgrind or perf needed.

Run: python3 -m unittest discover -s bench/layout -p 'test_*.py' (tests/layout_scripts.rs runs it under cargo test).
"""
import json, os, sys, tempfile, unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import order  # noqa: E402
import session  # noqa: E402


def read(path):
    with open(path) as f:
        return f.read()


def write(directory, name, text):
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(text)
    return path


class ParseCallgrind(unittest.TestCase):
    # callgrind's compressed names: `(id) name` defines, `(id)` refers; a `calls=` line's next cost line is the
    # call's inclusive cost, not the caller's own; a recursive function's deeper levels are `name'2`.
    PROFILE = """\
version: 1
events: Ir
ob=(1) /opt/bin/pimcp-run
fn=(1) main
0 10
cfn=(2) helper
calls=1 0
0 500
fn=(2)
0 7
fn=(3) rec'2
0 3
fn=(4) rec
0 4
ob=(2) /lib/libc.so.6
fn=(5) memcpy
0 1000
ob=(1)
fn=(1)
0 5
"""

    def test_own_costs_of_the_binarys_functions_only(self):
        with tempfile.TemporaryDirectory() as d:
            path = write(d, "callgrind.serve.1", self.PROFILE)
            cost = order.parse_callgrind(path, "/elsewhere/pimcp-run")
        self.assertEqual(cost, {"main": 15, "helper": 7, "rec": 7})


class MapInputSections(unittest.TestCase):
    MAP = """\
             VMA              LMA     Size Align Out     In      Symbol
          2000c8           2000c8       40     8 .rela.dyn
          200100           200100      420    16 .rodata
          200100           200100       10     1         <internal>:(.rodata.str1.1)
          200110           200110        8     8         /t/libfoo.a(x.o):(.rodata.cst8)
          200110           200110        0     1                 some_symbol
          200118           200118      100    16         /t/a.o:(.rodata._ZN3foo3BARE)
          201000           201000      100    16 .text
          201000           201000      100    16         /t/a.o:(.text.main)
"""

    def test_rows_of_one_output_section_in_address_order(self):
        with tempfile.TemporaryDirectory() as d:
            path = write(d, "link.map", self.MAP)
            rows = order.map_input_sections(path, ".rodata")
            self.assertEqual(rows, [
                (0x200100, 0x10, "<internal>", ".rodata.str1.1"),
                (0x200110, 0x8, "/t/libfoo.a(x.o)", ".rodata.cst8"),
                (0x200118, 0x100, "/t/a.o", ".rodata._ZN3foo3BARE"),
            ])
            with self.assertRaises(SystemExit):
                order.map_input_sections(path, ".data.rel.ro")


class DataOrder(unittest.TestCase):
    def test_patterns_by_section_name_or_by_file(self):
        self.assertEqual(order.section_pattern("/t/a.o", ".rodata._ZN3foo3BARE"), "*(.rodata._ZN3foo3BARE)")
        self.assertEqual(order.section_pattern("<internal>", ".rodata.str1.1"), "*(.rodata.str1.1)")
        self.assertEqual(order.section_pattern("/t/libfoo.a(x.o)", ".rodata.cst8"), "*libfoo.a:x.o(.rodata.cst8)")
        self.assertEqual(order.section_pattern("/t/c.o", ".rodata"), "*c.o(.rodata)")

    def test_ranks_put_merged_constants_first_and_merged_strings_last(self):
        patterns = ["*(.rodata.str1.1)", "*c.o(.rodata)", "*(.rodata.x)", "*(.rodata.cst16)"]
        self.assertEqual(sorted(patterns, key=order.pattern_rank),
                         ["*(.rodata.cst16)", "*(.rodata.x)", "*c.o(.rodata)", "*(.rodata.str1.1)"])

    def test_written_lists_read_back_and_the_script_keeps_their_order(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "rodata.txt")
            order.write_data_order(path, ["*c.o(.rodata)", "*(.rodata.cst8)"], some=["*(.rodata.y)"])
            self.assertEqual(order.read_data_order(path), (["*(.rodata.cst8)", "*c.o(.rodata)"], ["*(.rodata.y)"]))
            script = read(path + ".ld")
            self.assertLess(script.index("*(.rodata.cst8)"), script.index("*c.o(.rodata)"))
            self.assertLess(script.index("*c.o(.rodata)"), script.index("*(.rodata.y)"))
            self.assertTrue(script.rstrip().endswith("INSERT AFTER .rela.plt;"))
            order.write_data_order(path, ["*(.rodata.z)"])
            self.assertEqual(order.read_data_order(path), (["*(.rodata.z)"], []))

    def test_containing_and_read_ranges(self):
        rows = [(0x100, 0x10, "a", "s1"), (0x200, 0x8, "b", "s2")]
        starts = [r[0] for r in rows]
        self.assertEqual(order.containing(rows, starts, 0x10f), rows[0])
        self.assertIsNone(order.containing(rows, starts, 0x110))
        self.assertIsNone(order.containing(rows, starts, 0xff))
        self.assertEqual(order.containing(rows, starts, 0x200), rows[1])
        with tempfile.TemporaryDirectory() as d:
            a = write(d, "a", "200 208 3\n100 104\n")
            self.assertEqual(order.read_ranges([a]), [(0x100, 0x104, 1), (0x200, 0x208, 3)])


class TrainingSessions(unittest.TestCase):
    def test_each_variant_writes_its_catalog_under_its_server_name(self):
        with tempfile.TemporaryDirectory() as home:
            seen = set()
            for variant, (tools, seed, name, sorted_lists) in enumerate(session.VARIANTS):
                cfg = session.upstream_like_everything(home, variant)
                servers = json.loads(read(cfg))["mcpServers"]
                self.assertEqual(list(servers), [name])
                self.assertEqual(session.variant_server(variant), name)
                args = servers[name]["args"]
                self.assertEqual(args[args.index("--tools") + 1], str(tools))
                self.assertEqual(args[args.index("--seed") + 1], str(seed))
                self.assertEqual("--sorted-lists" in args, sorted_lists)
                for flag in ("--wire-like-everything", "--roots-on-call", "--no-discover"):
                    self.assertIn(flag, args)
                seen.add((tools > 20, sorted_lists))
            # Both sides of the sort's small-list cut-off, sorted and not, appear among the variants.
            self.assertEqual(seen, {(False, False), (False, True), (True, False), (True, True)})

    def test_serve_runs_cover_every_protocol_with_the_variants_upstream_once(self):
        with tempfile.TemporaryDirectory() as home:
            env, cfg = session.setup(home)
            runs = session.serve_runs(home, cfg, variant=1)
            self.assertEqual([v for v, _, _ in runs], ["2025-06-18", "2025-11-25", session.STATELESS,
                                                       session.STATELESS])
            self.assertEqual([s for _, _, s in runs], ["fixture", "fixture", session.variant_server(1), "fixture"])
            self.assertEqual(json.loads(read(runs[2][1]))["mcpServers"].keys(), {session.variant_server(1)})

    def test_catalog_change_searches_until_the_tool_is_gone(self):
        class FakeSession:
            def __init__(self, listed_for, under_valgrind=False):
                self.calls, self.listed_for = [], listed_for
                self.under_valgrind = under_valgrind

            def mcp(self, args):
                self.calls.append(args)
                searches = sum(1 for c in self.calls if "search" in c)
                hit = searches <= self.listed_for
                return {"content": [{"type": "text", "text": "fx_whoami" if hit else "no match"}]}

        s = FakeSession(listed_for=2)
        with mock.patch.object(session.time, "sleep"):
            session.catalog_change(s, "fx")
        self.assertEqual(s.calls[0], {"tool": "fx_remove_tool", "args": {"name": "whoami"}})
        self.assertEqual(len(s.calls), 4)  # the removal, two searches that still find it, one that does not
        with mock.patch.object(session.time, "sleep"), self.assertRaises(RuntimeError):
            session.catalog_change(FakeSession(listed_for=10 ** 9), "fx", timeout=0.01)
        # 50 s a search: natively that is past the 10 s deadline; under valgrind it is within its 600 s.
        for under_valgrind, fails in ((False, True), (True, False)):
            clock = iter(range(0, 10 ** 6, 50))
            with mock.patch.object(session.time, "sleep"), \
                    mock.patch.object(session.time, "monotonic", lambda: float(next(clock))):
                s = FakeSession(listed_for=3, under_valgrind=under_valgrind)
                if fails:
                    with self.assertRaises(RuntimeError):
                        session.catalog_change(s, "fx")
                else:
                    session.catalog_change(s, "fx")
                    self.assertEqual(len(s.calls), 5)


if __name__ == "__main__":
    unittest.main()
