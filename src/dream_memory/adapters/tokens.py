"""Token counting for budgets: a real tokenizer that never touches the network.

tiktoken downloads its encodings on first use, which hangs or fails on an offline CI runner (and
falls back to a download, with no timeout, whenever its cache misses). litellm ships the
cl100k_base file in its package, named the way tiktoken's cache names it; we find the folder with
``importlib.util.find_spec`` (importing litellm costs seconds and ~200 MB), check the file's
sha256, and build the encoding from it with tiktoken's public ``Encoding`` class, so no code path
can reach the network. Anything wrong gives the byte heuristic instead.

Why not ``tiktoken.get_encoding`` on that folder: its loader decodes the file's 100,256 base64
lines one Python call at a time. Splitting the file once and decoding with ``binascii`` takes
half as long (0.085 CPU s against 0.165), so building the encoding costs every process that
counts (each ``dream run``, ``consolidate``, ``context``) 0.16-0.17 s instead of 0.21-0.23; the
rest is tiktoken's own ``Encoding`` (0.08 s). tests/llm/test_token_counter.py checks the result
against ``tiktoken.get_encoding`` (pattern, ranks, special tokens, counts).

cl100k_base is not every model's tokenizer; budgets only need a count in the right ballpark.
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import importlib.util
import threading
from pathlib import Path
from typing import Any

from dream_memory.core.ports import TokenCounter

ENCODING = "cl100k_base"
# tiktoken's cache key for cl100k_base: the sha1 of the address it would download it from.
_CL100K_CACHE_KEY = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
# What tiktoken_ext.openai_public.cl100k_base() gives tiktoken: the file's sha256 (a file that
# does not match is not used) and the pre-tokenizing pattern.
_CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
BYTES_PER_TOKEN = 4

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
    """A tiktoken counter read from ``cache_dir`` (default: litellm's bundle), or None when the
    file is missing, is not cl100k_base, or tiktoken cannot be imported."""
    folder = cache_dir if cache_dir is not None else bundled_tokenizer_dir()
    if folder is None:
        return None
    try:
        data = (folder / _CL100K_CACHE_KEY).read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != _CL100K_SHA256:
        return None  # a corrupt or different file
    try:
        import tiktoken
        from tiktoken_ext import openai_public

        # The file is lines of "<token in base64> <rank>": split once into alternating fields.
        fields = data.split()
        ranks = dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2]), strict=True))
        special = {
            openai_public.ENDOFTEXT: 100257,
            openai_public.FIM_PREFIX: 100258,
            openai_public.FIM_MIDDLE: 100259,
            openai_public.FIM_SUFFIX: 100260,
            openai_public.ENDOFPROMPT: 100276,
        }
        encoding = tiktoken.Encoding(ENCODING, pat_str=_CL100K_PATTERN, mergeable_ranks=ranks, special_tokens=special)
    except Exception:
        # A tiktoken without these names or that refuses the encoding: counting still works.
        return None
    return TiktokenCounter(encoding)


def load_counter() -> TokenCounter:
    """The best counter available offline: tiktoken with litellm's bundled files, else bytes / 4."""
    return load_tiktoken_counter() or HeuristicCounter()


class DeferredCounter:
    """The process-wide counter, built on the first count: a scheduled run with nothing new to
    dream never pays for the tokenizer (0.18 CPU s, a third of such a run)."""

    def count(self, text: str) -> int:
        return default_counter().count(text)

    def __repr__(self) -> str:
        return "DeferredCounter()"


@functools.cache
def default_counter() -> TokenCounter:
    """The process-wide counter (building the encoding takes ~0.16 CPU s, so it is done once)."""
    return load_counter()
