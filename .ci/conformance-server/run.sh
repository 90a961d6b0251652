#!/usr/bin/env bash
# Runs the @modelcontextprotocol/conformance SERVER scenarios that apply to a proxy (no fixture-named tools) against
# `pimcp-run serve --http` fronting one mcp-fixture server, then checks that SIGTERM stops it with exit 0.
# Strict both ways: a scenario listed in baseline.txt must fail and every other one must pass.
# Needs `.ci/setup-peers` (Node 22 + the conformance package). Logs: target/conformance-server/.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
HERE="$ROOT/.ci/conformance-server"
PEERS="$ROOT/.ci/peers"
NODE_BIN="$PEERS/node22/package/bin"
CONFORMANCE="$PEERS/node_modules/.bin/conformance"
for need in "$NODE_BIN/node" "$CONFORMANCE"; do
  [ -x "$need" ] || { echo "conformance-server: missing $need — run .ci/setup-peers" >&2; exit 1; }
done

SCENARIOS=(server-initialize ping tools-list logging-set-level server-sse-multiple-streams dns-rebinding-protection
           resources-list prompts-list)

cargo build --quiet -p pimcp-cli --bin pimcp-run -p mcp-fixture --bin mcp-fixture
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
PIMCP_RUN="$TARGET_DIR/debug/pimcp-run"
FIXTURE="$TARGET_DIR/debug/mcp-fixture"

OUT="$TARGET_DIR/conformance-server"
rm -rf "$OUT" && mkdir -p "$OUT/home" "$OUT/data" "$OUT/results"
cat > "$OUT/mcp.json" <<JSON
{ "mcpServers": { "fixture": { "command": "$FIXTURE", "args": ["--event-log", "$OUT/fixture-events.jsonl"] } } }
JSON

env -i PATH="$PATH" HOME="$OUT/home" PIMCP_DATA_DIR="$OUT/data" PIMCP_CONFIG_MODE=exclusive PIMCP_LOG=info \
  "$PIMCP_RUN" --config "$OUT/mcp.json" serve --http 127.0.0.1:0 >"$OUT/pimcp-run.log" 2>&1 &
SERVE_PID=$!
trap 'kill -KILL "$SERVE_PID" 2>/dev/null || true' EXIT

URL=""
for _ in $(seq 1 300); do
  URL=$(grep -o 'serving MCP on http://[^ ]*' "$OUT/pimcp-run.log" | head -n1 | sed 's/^serving MCP on //') || true
  [ -n "$URL" ] && break
  kill -0 "$SERVE_PID" 2>/dev/null || { cat "$OUT/pimcp-run.log" >&2; echo "conformance-server: pimcp-run exited" >&2; exit 1; }
  sleep 0.1
done
[ -n "$URL" ] || { cat "$OUT/pimcp-run.log" >&2; echo "conformance-server: no URL within 30 s" >&2; exit 1; }
echo "conformance-server: pimcp-run serve at $URL"

declare -A EXPECTED_FAIL=()
while read -r name _; do
  [ -n "$name" ] && EXPECTED_FAIL[$name]=1
done < <(grep -v '^\s*#' "$HERE/baseline.txt" | grep -v '^\s*$')

status=0
for scenario in "${SCENARIOS[@]}"; do
  if PATH="$NODE_BIN:$PATH" timeout 120 "$CONFORMANCE" server --url "$URL" --scenario "$scenario" \
       -o "$OUT/results" >"$OUT/results/$scenario.log" 2>&1; then
    outcome=pass
  else
    outcome=fail
  fi
  if [ -n "${EXPECTED_FAIL[$scenario]:-}" ]; then
    if [ "$outcome" = pass ]; then
      echo "STALE   $scenario passes but is listed in baseline.txt: remove it"; status=1
    else
      echo "BASELINE $scenario (expected failure)"
    fi
  elif [ "$outcome" = pass ]; then
    echo "PASS    $scenario"
  else
    echo "FAIL    $scenario"; sed 's/^/    /' "$OUT/results/$scenario.log" | tail -n 25; status=1
  fi
done
for name in "${!EXPECTED_FAIL[@]}"; do
  printf '%s\n' "${SCENARIOS[@]}" | grep -qx "$name" || { echo "STALE   baseline.txt lists $name, which is not run"; status=1; }
done

# Graceful shutdown: SIGTERM → exit 0, and the fixture it started is gone.
kill -TERM "$SERVE_PID"
code=0
wait "$SERVE_PID" || code=$?
trap - EXIT
if [ "$code" -ne 0 ]; then
  echo "FAIL    pimcp-run exited with $code after SIGTERM"; tail -n 20 "$OUT/pimcp-run.log"; status=1
else
  echo "PASS    SIGTERM → exit 0"
fi
STARTED=$(python3 -c 'import json,sys; print(" ".join(str(e["pid"]) for e in map(json.loads, open(sys.argv[1])) if e.get("event") == "start"))' \
  "$OUT/fixture-events.jsonl" 2>/dev/null || true)
for pid in $STARTED; do
  if [ -e "/proc/$pid" ] && ! grep -q ') Z' "/proc/$pid/stat" 2>/dev/null; then
    echo "FAIL    fixture pid $pid outlived pimcp-run"; status=1
  fi
done
exit "$status"
