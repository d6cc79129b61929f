#!/usr/bin/env bash
# MCP Inspector smoke test of `dream-mcp` (issue 6): the official Inspector CLI, pinned, drives the
# server over stdio the way a client application would.
#
#   1. tools/list names the five read tools, each annotated read-only and idempotent;
#   2. tools/call dream_search answers from a small store;
#   3. tools/call dream_entity on an entity in DREAM_MEMORY_EXCLUDE comes back as a tool error
#      (the Inspector exits 5 for isError); the index resource leaves that entity out.
#
# Run from the repository root with .venv ready (as .ci/run does): bash ci/steps/20-mcp-inspector.sh
# Installs the Inspector into a temporary prefix. When npm is missing or its registry cannot be
# reached, prints SKIP with the reason and exits 0; any other failure exits non-zero.
set -euo pipefail

INSPECTOR_VERSION="2.12.0"
PACKAGE="@modelcontextprotocol/inspector@${INSPECTOR_VERSION}"
ROOT="$(pwd)"
PY="$ROOT/.venv/bin/python"
SERVER="$ROOT/.venv/bin/dream-mcp"

say() { printf 'mcp-inspector: %s\n' "$*"; }
fail() { say "FAIL: $*" >&2; exit 1; }
skip() { say "SKIP: $*"; exit 0; }

[ -x "$SERVER" ] || fail "$SERVER not found: run from the repository root after the venv is built"
command -v npm >/dev/null 2>&1 || skip "npm is not installed, so the Inspector CLI cannot be installed"
command -v node >/dev/null 2>&1 || skip "node is not installed"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/dream-mcp-inspector.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
# The Inspector keeps a catalog under ~ by default; keep it (and nothing else) in the temp folder.
export MCP_CATALOG_PATH="$WORK/catalog.json"

# --- install, pinned, into a temporary prefix (its engines field asks for a newer Node; the CLI
# --- runs on Node 20, so engine-strict stays off) ---------------------------------------------------
say "installing $PACKAGE with npm $(npm --version) on node $(node --version)"
if ! npm install --prefix "$WORK/npm" --no-audit --no-fund --no-save --loglevel=error \
    --engine-strict=false "$PACKAGE" >"$WORK/npm.log" 2>&1; then
  if grep -Eq 'ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNREFUSED|ECONNRESET|ENETUNREACH|EHOSTUNREACH|network|proxy|certificate|CERT_|SELF_SIGNED|E407|E403' "$WORK/npm.log"; then
    tail -n 5 "$WORK/npm.log" | sed 's/^/  npm: /'
    skip "npm cannot reach its registry, so $PACKAGE cannot be installed"
  fi
  tail -n 20 "$WORK/npm.log" | sed 's/^/  npm: /' >&2
  fail "npm install $PACKAGE failed"
fi
INSPECTOR="$WORK/npm/node_modules/.bin/mcp-inspector"
[ -x "$INSPECTOR" ] || fail "the package did not provide node_modules/.bin/mcp-inspector"

# --- a small store ----------------------------------------------------------------------------------
STORE="$WORK/store"
mkdir -p "$STORE/entities" "$STORE/sections" "$STORE/memory"
cat >"$STORE/index.md" <<'EOF'
| Entity | File | Repos |
|---|---|---|
| nix-config | entities/nix-config.md | /home/u/system/nix-config (was nixos-system) |
| secret | entities/secret.md | /home/u/secret |
EOF
printf '# nix-config\n\n- uses flakes for every host\n- deploys with Colmena\n' >"$STORE/entities/nix-config.md"
printf '# secret\n\n- the vault password hint mentions flakes\n' >"$STORE/entities/secret.md"
printf '# Deploys\n\n## Colmena\n- flakes pinned weekly\n' >"$STORE/sections/deploys.md"
printf -- '- 2026-04-01 the user may prefer Colmena\n' >"$STORE/observations.md"

inspect() {
  # inspect OUTFILE ARGS...: one Inspector CLI call against dream-mcp; prints its exit code
  local out="$1"
  shift
  local rc=0
  # --connect-timeout: the Inspector gives a server 15 s to answer `initialize` by default, and
  # dream-mcp spends ~1.5 CPU s starting (the MCP SDK's types alone ~0.9 s). At nice 5 beside
  # four test workers and two other lanes it got less than a tenth of a core and missed the 15 s
  # once (a fresh-clone run here); the outer `timeout 120` still bounds a server that hangs.
  timeout 120 "$INSPECTOR" --cli --format json --connect-timeout 110000 \
    -e "DREAM_MEMORY_STORE=$STORE" -e "DREAM_MEMORY_EXCLUDE=secret" -e "HOME=$WORK" \
    "$SERVER" "$@" >"$out" 2>"$out.err" || rc=$?
  echo "$rc"
}

check() {
  # check NAME FILE PYTHON-EXPR: evaluate an assertion over the JSON result `r`
  "$PY" - "$2" "$3" "$1" <<'PYEOF' || exit 1
import json, sys
path, expr, name = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    with open(path, encoding="utf-8") as handle:
        r = json.load(handle)
except ValueError as exc:
    sys.exit(f"mcp-inspector: FAIL: {name}: output is not JSON ({exc}): {open(path).read()[:400]!r}")
if not eval(expr, {"r": r, "json": json}):  # the expressions are the fixed ones below
    sys.exit(f"mcp-inspector: FAIL: {name}: {expr} does not hold for {json.dumps(r)[:800]}")
print(f"mcp-inspector: ok: {name}")
PYEOF
}

# 1. tools/list
rc=$(inspect "$WORK/list.json" --method tools/list)
[ "$rc" = 0 ] || { cat "$WORK/list.json.err" >&2; fail "tools/list exited $rc"; }
check "tools/list names the five tools" "$WORK/list.json" \
  "sorted(t['name'] for t in r['result']['tools']) == ['dream_entity', 'dream_resolve', 'dream_search', 'dream_section', 'dream_why']"
check "every tool is read-only and idempotent" "$WORK/list.json" \
  "all(t['annotations']['readOnlyHint'] and t['annotations']['idempotentHint'] for t in r['result']['tools'])"
check "dream_search limits maxResults to 1..50" "$WORK/list.json" \
  "[(p['minimum'], p['maximum']) for t in r['result']['tools'] if t['name'] == 'dream_search' for k, p in t['inputSchema']['properties'].items() if k == 'maxResults'] == [(1, 50)]"

# 2. a search
rc=$(inspect "$WORK/search.json" --method tools/call --tool-name dream_search \
  --tool-args-json '{"query": "colmena flakes", "maxResults": 5}')
[ "$rc" = 0 ] || { cat "$WORK/search.json.err" >&2; fail "dream_search exited $rc"; }
check "dream_search succeeds" "$WORK/search.json" "r['result'].get('isError') is not True"
check "dream_search ranks the section first" "$WORK/search.json" \
  "r['result']['content'][0]['text'].startswith('sections/deploys.md')"
check "dream_search skips the excluded entity" "$WORK/search.json" \
  "all(x['path'] != 'entities/secret.md' for x in r['result']['structuredContent']['results'])"
check "observation hits are framed as provisional" "$WORK/search.json" \
  "'> Provisional:' in r['result']['content'][0]['text']"

# 3. an excluded entity: a tool error, which the Inspector reports with exit code 5
rc=$(inspect "$WORK/excluded.json" --method tools/call --tool-name dream_entity --tool-args-json '{"name": "secret"}')
[ "$rc" = 5 ] || { cat "$WORK/excluded.json" "$WORK/excluded.json.err" >&2; fail "dream_entity on an excluded entity exited $rc, expected 5 (tool error)"; }
check "the refusal is an isError result that says why" "$WORK/excluded.json" \
  "r['result']['isError'] is True and 'DREAM_MEMORY_EXCLUDE' in r['result']['content'][0]['text']"

rc=$(inspect "$WORK/index.json" --method resources/read --uri memory://index)
[ "$rc" = 0 ] || { cat "$WORK/index.json.err" >&2; fail "resources/read memory://index exited $rc"; }
check "the index resource leaves the excluded entity out" "$WORK/index.json" \
  "'nix-config' in r['result']['contents'][0]['text'] and 'secret' not in r['result']['contents'][0]['text']"

say "passed (Inspector $INSPECTOR_VERSION)"
