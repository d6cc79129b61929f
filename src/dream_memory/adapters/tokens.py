"""Token counting for budgets: a real tokenizer that never touches the network.

tiktoken downloads its encodings on first use, which hangs or fails on an offline CI runner.
litellm ships the cl100k_base and o200k_base files in its package, named the way tiktoken's cache
names them, so pointing tiktoken's cache at that folder makes it work offline. We find the folder
with ``importlib.util.find_spec`` because importing litellm costs seconds and ~200 MB, and we only
call tiktoken when the encoding file is really there: tiktoken falls back to a download (with no
timeout) when its cache misses. Anything wrong gives the byte heuristic instead.

cl100k_base is not every model's tokenizer; budgets only need a count in the right ballpark.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import threading
from pathlib import Path
from typing import Any

from dream_memory.core.ports import TokenCounter

ENCODING = "cl100k_base"
# tiktoken's cache key for cl100k_base: the sha1 of the address it would download it from.
_CL100K_CACHE_KEY = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
BYTES_PER_TOKEN = 4

_env_lock = threading.Lock()
# Texts this long have their count kept (a memory file, not a history entry), up to this many.
_REMEMBERED_FROM = 2000
_REMEMBERED = 64
_REMEMBERED_CHARS = 4_000_000  # the kept texts stay alive: a few MB at most


def estimate_tokens(text: str) -> int:
    """About 4 UTF-8 bytes per token, rounded up: never 0 for non-empty text."""
    if not text:
        return 0
    return -(-len(text.encode("utf-8", "surrogatepass")) // BYTES_PER_TOKEN)


class HeuristicCounter:
    """The fallback: no tokenizer, just bytes / 4."""

    name = "heuristic"

    def count(self, text: str) -> int:
        return estimate_tokens(text)

    def __repr__(self) -> str:
        return "HeuristicCounter()"


class TiktokenCounter:
    """Counts with a tiktoken encoding. Special-token text in user data is counted as plain text."""

    def __init__(self, encoding: Any) -> None:
        self._encoding = encoding
        self.name = f"tiktoken:{encoding.name}"
        self._known: dict[str, int] = {}
        self._held = 0  # characters of the texts kept
        self._lock = threading.Lock()  # the process-wide counter may serve several threads

    def count(self, text: str) -> int:
        if not text:
            return 0
        if len(text) < _REMEMBERED_FROM:
            return len(self._encoding.encode(text, disallowed_special=()))
        # A memory file is counted for each prompt that shows it (both phases, every batch while
        # it does not change): a long text's count is kept, a hash costing far less than encoding.
        known = self._known.get(text)
        if known is None:
            known = len(self._encoding.encode(text, disallowed_special=()))
            with self._lock:
                if len(self._known) >= _REMEMBERED or self._held + len(text) > _REMEMBERED_CHARS:
                    self._known.clear()
                    self._held = 0
                if len(text) <= _REMEMBERED_CHARS:
                    self._known[text] = known
                    self._held += len(text)
        return known

    def __repr__(self) -> str:
        return f"TiktokenCounter({self._encoding.name!r})"


def bundled_tokenizer_dir() -> Path | None:
    """litellm's folder of tiktoken files, located without importing litellm."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        folder = Path(location) / "litellm_core_utils" / "tokenizers"
        if (folder / _CL100K_CACHE_KEY).is_file():
            return folder
    return None


def load_tiktoken_counter(cache_dir: Path | None = None) -> TiktokenCounter | None:
    """A tiktoken counter read from ``cache_dir`` (default: litellm's bundle), or None."""
    folder = cache_dir if cache_dir is not None else bundled_tokenizer_dir()
    if folder is None or not (folder / _CL100K_CACHE_KEY).is_file():
        return None
    try:
        import tiktoken
    except ImportError:
        return None
    # The variable is only read while the encoding loads (tiktoken keeps the result), so it is set
    # for that moment and put back: the process environment stays as the user left it.
    with _env_lock:
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
        try:
            encoding = tiktoken.get_encoding(ENCODING)
        except Exception:
            # A corrupt or mismatching file, or a tiktoken that names things differently.
            return None
        finally:
            if previous is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = previous
    return TiktokenCounter(encoding)


def load_counter() -> TokenCounter:
    """The best counter available offline: tiktoken with litellm's bundled files, else bytes / 4."""
    return load_tiktoken_counter() or HeuristicCounter()


@functools.cache
def default_counter() -> TokenCounter:
    """The process-wide counter (loading the encoding takes ~0.2 s, so it is done once)."""
    return load_counter()
