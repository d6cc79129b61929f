"""Slim the image's venv (the Dockerfile's builder stage runs this once, after `pip install .`).

What goes, and why it may (docs/deploy-docker.md, "What the image weighs"):
- packages no code path of dream-memory imports: boto3/botocore/s3transfer/jmespath (litellm's AWS
  providers: Bedrock, SageMaker) and tokenizers/huggingface_hub/hf_xet/fsspec (litellm treats
  Hugging Face tokenizers as optional and counts tokens natively); DREAM_SLIM=0 at build keeps them;
- litellm's proxy server UI and API pages (static files), test folders, type stubs, READMEs and C
  sources of dependencies, install records, pip, setuptools and wheel;
- symbols in shared objects (strip --strip-unneeded, when binutils' strip is there).
Then everything is byte-compiled as unchecked-hash pycs (the root filesystem is read-only at run
time and the image never changes: no stat of a source at import, no stale pyc after a COPY) and the
dependencies keep only their bytecode, next to where the source was (`compileall -b`): Python
imports it as it is, tracebacks inside a dependency show file and line without the source text.
Two exceptions keep their source: dream-memory itself (readable tracebacks in bug reports), and the
modules of litellm's proxy server that `import litellm` does not load (source only, no bytecode:
a code path that needs one still works, compiled in memory when imported).

Standard library only: it runs with the venv's interpreter before anything else is installed.
"""

from __future__ import annotations

import compileall
import json
import os
import py_compile
import re
import shutil
import subprocess
import sys
from pathlib import Path

UNUSED = ("boto3", "botocore", "s3transfer", "jmespath", "tokenizers", "huggingface-hub", "hf-xet", "fsspec")
TOOLS = ("pip", "setuptools", "wheel")
# The proxy server's web UI, its Swagger page and its OpenAPI snapshot: static files for a server
# dream-memory never starts.
DROP_DIRS = ("litellm/proxy/_experimental/out", "litellm/proxy/swagger", "litellm/proxy/_lazy_openapi_snapshot.json")
TEST_DIRS = ("tests", "test")
# HF tokenizer files only the `tokenizers` package (uninstalled with UNUSED) reads; litellm's token
# counter falls back to tiktoken without them. anthropic_tokenizer.json stays: `import litellm`
# opens it.
UNUSED_FILES = (
    "litellm/litellm_core_utils/tokenizers/deepseek_tokenizer.json",
    "litellm/litellm_core_utils/tokenizers/deepseek_tokenizer_LICENSE",
)
# Developer notes of dependencies (docs, never read by code); other .md files can be data.
DOC_NAMES = ("readme.md", "agents.md", "architecture.md", "claude.md", "changelog.md", "contributing.md")
# Sources of compiled extensions, left in some wheels; the built .so is what is imported.
BUILD_SOURCES = (".c", ".h", ".pyx", ".pxd")
# Byte-compiled only where `import litellm` loads a module (it loads a handful of these).
SOURCE_ONLY_UNLESS_LOADED = ("litellm/proxy",)
KEEP_SOURCE = ("dream_memory",)
# The image never changes after the build: a pyc that is not checked against its source costs no
# stat of the .py at import, and is never rewritten (or found stale after a COPY changed mtimes).
UNCHECKED = py_compile.PycInvalidationMode.UNCHECKED_HASH


def site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if len(found) != 1:
        raise SystemExit(f"slim_venv: expected one site-packages under {venv}, found {found}")
    return found[0]


def installed(python: Path, names: tuple[str, ...]) -> list[str]:
    code = (
        "import importlib.metadata as m, json, sys\n"
        "have = []\n"
        "for n in sys.argv[1:]:\n"
        "    try: m.distribution(n); have.append(n)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(have))"
    )
    out = subprocess.run([str(python), "-c", code, *names], capture_output=True, text=True, check=True).stdout
    return list(json.loads(out))


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def main(argv: list[str]) -> int:
    venv = Path(argv[1] if len(argv) > 1 else "/opt/dream")
    python = venv / "bin" / "python"
    sp = site_packages(venv)
    before = du(venv)
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "--no-input"]
    if os.environ.get("DREAM_SLIM", "1") != "0":
        unused = installed(python, UNUSED)
        if unused:
            subprocess.run([*pip, "uninstall", "-y", "-q", *unused], check=True)
            print(f"slim_venv: uninstalled {' '.join(unused)}")
        for rel in UNUSED_FILES:
            (sp / rel).unlink(missing_ok=True)
    for rel in DROP_DIRS:
        if (sp / rel).is_file():
            (sp / rel).unlink()
        shutil.rmtree(sp / rel, ignore_errors=True)
    for folder in sorted(p for p in sp.rglob("*") if p.is_dir() and p.name in TEST_DIRS and p.parent != sp):
        if folder.exists() and not (folder.parent / f"{folder.name}.py").exists():
            shutil.rmtree(folder)
    for cache in list(sp.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)
    for leftover in [p for p in sp.rglob("*") if p.is_file() and not p.is_relative_to(sp / "dream_memory")]:
        is_doc = leftover.name.lower() in DOC_NAMES or leftover.suffix in BUILD_SOURCES
        if is_doc and not leftover.parent.name.endswith(".dist-info"):
            leftover.unlink()
    strip = shutil.which("strip")
    if strip:
        objects = [str(p) for p in sp.rglob("*.so*") if p.is_file() and not p.is_symlink()]
        subprocess.run([strip, "--strip-unneeded", *objects], check=True)
    tools = installed(python, TOOLS)
    if tools:
        subprocess.run([*pip, "uninstall", "-y", "-q", *tools], check=True)
    for leftover in ("distutils-precedence.pth", "_distutils_hack", "pkg_resources"):
        target = sp / leftover
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    # The source-only trees are left out here; the modules `import litellm` loads from them are
    # compiled below, once they are known.
    skip = "|".join(re.escape(str(sp / rel)) for rel in SOURCE_ONLY_UNLESS_LOADED)
    compiled_ok = compileall.compile_dir(
        str(venv / "lib"), quiet=1, workers=0, rx=re.compile(skip), invalidation_mode=UNCHECKED
    )
    if not compiled_ok:
        raise SystemExit("slim_venv: byte-compiling the venv failed")
    keep_source = [sp / rel for rel in (*KEEP_SOURCE, *SOURCE_ONLY_UNLESS_LOADED)]
    loaded = subprocess.run(
        [
            str(python),
            "-c",
            "import sys, litellm, dream_memory.adapters.llm, dream_memory.entrypoints.cli\n"
            "print('\\n'.join(sorted({getattr(m, '__file__', None) or '' for m in list(sys.modules.values())})))",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    ).stdout.split()
    compiled = 0
    for rel in SOURCE_ONLY_UNLESS_LOADED:
        root = str(sp / rel) + os.sep
        for source in sorted(p for p in set(loaded) if p.startswith(root) and p.endswith(".py")):
            py_compile.compile(source, doraise=True, invalidation_mode=UNCHECKED)
            compiled += 1
    pruned = sum(1 for rel in SOURCE_ONLY_UNLESS_LOADED for _ in (sp / rel).rglob("*.py")) - compiled
    # Bytecode only for the rest: each module's .pyc moves to where its .py was, and the .py goes.
    sourceless = 0
    for cache in list(sp.rglob("__pycache__")):
        module_dir = cache.parent
        if any(module_dir == k or module_dir.is_relative_to(k) for k in keep_source):
            continue
        for pyc in cache.glob("*.pyc"):
            name = pyc.name.split(".", 1)[0]
            source = module_dir / f"{name}.py"
            if source.is_file():
                pyc.replace(module_dir / f"{name}.pyc")
                source.unlink()
                sourceless += 1
        shutil.rmtree(cache)
    for stub in sp.rglob("*.pyi"):
        stub.unlink()
    # Install records and bills of materials serve pip (gone) and auditors of the wheel, not a run;
    # METADATA and entry points stay for importlib.metadata.
    for record in sp.glob("*.dist-info/RECORD"):
        record.unlink()
    for sbom in sp.glob("*.dist-info/sboms"):
        shutil.rmtree(sbom)
    after = du(venv)
    print(
        f"slim_venv: {before / 1e6:.0f} MB -> {after / 1e6:.0f} MB "
        f"({sourceless} modules bytecode-only, {pruned} proxy modules source-only, "
        f"strip {'yes' if strip else 'not available'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
