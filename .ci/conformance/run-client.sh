#!/usr/bin/env bash
# Runs the @modelcontextprotocol/conformance client scenarios against pimcp-conformance-client (the pimcp runtime
# behind a tiny binary), one scenario at a time (the suite's own --suite mode runs them in parallel, which a 2-core
# CI box turns into timeouts), with Node 22 from .ci/peers (installed by .ci/setup-peers).
#
# Results: target/conformance/<scenario>-<timestamp>/{checks.json,stdout.txt,stderr.txt} and target/conformance/summary.txt.
# A scenario passes when the suite says so (no FAILURE, no WARNING, client exit 0 unless the scenario allows an
# error, within the timeout). The baseline .ci/conformance/expected-failures.yml (the suite's --expected-failures
# format) is strict both ways: an unlisted failure fails the run, and so does a listed scenario that passes.
#
# Usage: .ci/conformance/run-client.sh [SCENARIO...]   (default: every scenario below; CONFORMANCE_BASELINE=FILE
# overrides the baseline)
set -euo pipefail
cd "$(dirname "$0")/../.."

PEERS=.ci/peers
CONFORMANCE="$PEERS/node_modules/.bin/conformance"
NODE22="$PEERS/node22/package/bin"
BASELINE="${CONFORMANCE_BASELINE:-.ci/conformance/expected-failures.yml}"
OUT=target/conformance
TIMEOUT_MS=30000

SCENARIOS=(
  initialize tools_call sse-retry elicitation-sep1034-client-defaults
  # auth, tier 1
  auth/metadata-default auth/metadata-var1 auth/metadata-var2 auth/metadata-var3 auth/basic-cimd
  auth/scope-from-www-authenticate auth/scope-from-scopes-supported auth/scope-omitted-when-undefined
  auth/scope-step-up auth/scope-retry-limit
  auth/token-endpoint-auth-basic auth/token-endpoint-auth-post auth/token-endpoint-auth-none auth/pre-registration
  # auth, backcompat (2025-03-26)
  auth/2025-03-26-oauth-metadata-backcompat auth/2025-03-26-oauth-endpoint-fallback
  # auth, draft
  auth/resource-mismatch auth/offline-access-scope auth/offline-access-not-supported
  # auth, extensions
  auth/client-credentials-jwt auth/client-credentials-basic auth/cross-app-access-complete-flow
)
if [ "$#" -gt 0 ]; then SCENARIOS=("$@"); fi

[ -x "$CONFORMANCE" ] && [ -x "$NODE22/node" ] || { echo "run-client: peers missing; run .ci/setup-peers first" >&2; exit 2; }
export PATH="$PWD/$NODE22:$PATH"
# The suite launches the client through `sh`; keep inherited settings from leaking into it.
unset MCP_OAUTH_CALLBACK_PORT MCP_OAUTH_DIR RUST_LOG

echo "run-client: building pimcp-conformance-client"
cargo build --quiet -p pimcp-conformance --bin pimcp-conformance-client
CLIENT="$PWD/target/debug/pimcp-conformance-client"

# Baseline: `client:` entries of the YAML list (`  - name  # why`).
mapfile -t EXPECTED < <(sed -n '/^client:/,/^[^ #-]/p' "$BASELINE" | sed -n 's/^[[:space:]]*-[[:space:]]*\([^[:space:]#]*\).*/\1/p')
expected() { local s; for s in "${EXPECTED[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
for s in "${EXPECTED[@]}"; do
  grep -q "# " <<<"$(grep -E "^[[:space:]]*-[[:space:]]*$s([[:space:]]|$)" "$BASELINE")" \
    || { echo "run-client: baseline entry $s has no reason (# why)" >&2; exit 2; }
done

rm -rf "$OUT" && mkdir -p "$OUT"
summary="$OUT/summary.txt"
: >"$summary"
unexpected=() stale=() started=$(date +%s)
for scenario in "${SCENARIOS[@]}"; do
  t0=$(date +%s%N)
  log="$OUT/$(tr '/' '_' <<<"$scenario").log"
  if "$CONFORMANCE" client --command "$CLIENT" --scenario "$scenario" --timeout "$TIMEOUT_MS" -o "$OUT" >"$log" 2>&1; then
    result=pass
  else
    result=fail
  fi
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  verdict=$result
  if [ "$result" = fail ] && ! expected "$scenario"; then verdict="FAIL (unexpected)"; unexpected+=("$scenario"); fi
  if [ "$result" = fail ] && expected "$scenario"; then verdict="fail (expected)"; fi
  if [ "$result" = pass ] && expected "$scenario"; then verdict="PASS (stale baseline entry)"; stale+=("$scenario"); fi
  printf '%-48s %-28s %6d ms\n' "$scenario" "$verdict" "$ms" | tee -a "$summary"
done
echo "run-client: ${#SCENARIOS[@]} scenarios in $(( $(date +%s) - started )) s; details in $OUT" | tee -a "$summary"

status=0
if [ "${#unexpected[@]}" -gt 0 ]; then
  echo "run-client: unexpected failures: ${unexpected[*]} (see $OUT/*.log)" >&2
  for s in "${unexpected[@]}"; do echo "--- $s" >&2; tail -n 25 "$OUT/$(tr '/' '_' <<<"$s").log" >&2; done
  status=1
fi
if [ "${#stale[@]}" -gt 0 ]; then
  echo "run-client: now passing, remove from $BASELINE: ${stale[*]}" >&2
  status=1
fi
exit "$status"
