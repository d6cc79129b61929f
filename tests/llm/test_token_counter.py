"""Token counting: a real tokenizer offline, a byte heuristic when there is none."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from dream_memory.adapters.tokens import (
    HeuristicCounter,
    default_counter,
    estimate_tokens,
    load_tiktoken_counter,
)

# Runs in a fresh interpreter where every outbound connection fails loudly, proxies point
# nowhere, and the tokenizer cache variable is unset: only the bundled files can make it work.
_OFFLINE_PROBE = """
import json, os, socket, sys
attempts = []
def refuse(self, address, *args, **kwargs):
    attempts.append(repr(address))
    raise OSError("network disabled in this test")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
from dream_memory.adapters.tokens import default_counter
counter = default_counter()
print(json.dumps({
    "name": counter.name,
    "hello": counter.count("hello world"),
    "attempts": attempts,
    "litellm_imported": "litellm" in sys.modules,
    "cache_env_left": os.environ.get("TIKTOKEN_CACHE_DIR"),
}))
"""


def test_the_real_tokenizer_works_with_no_network():
    """On a machine with no network, token counts still come from tiktoken's cl100k_base (read
    from the copy bundled with litellm), with no connection attempted, litellm left unimported
    and the environment left as it was."""
    env = {k: v for k, v in os.environ.items() if k != "TIKTOKEN_CACHE_DIR"}
    env.update(HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9", ALL_PROXY="http://127.0.0.1:9")

    out = subprocess.run(
        [sys.executable, "-c", _OFFLINE_PROBE], capture_output=True, text=True, env=env, check=True, timeout=60
    )
    result = json.loads(out.stdout)

    assert result == {
        "name": "tiktoken:cl100k_base",
        "hello": 2,
        "attempts": [],
        "litellm_imported": False,
        "cache_env_left": None,
    }


def test_counts_are_real_token_counts():
    """Counts match the tokenizer, not a character ratio, and text that looks like a special
    token is counted as plain text instead of raising."""
    counter = default_counter()

    assert counter.count("") == 0
    assert counter.count("The user prefers dark mode.") == 6
    assert counter.count("<|endoftext|>") > 1


def test_the_counter_is_built_once():
    """default_counter() is cached: loading the encoding is paid once per process."""
    assert default_counter() is default_counter()


def test_without_the_tokenizer_files_the_byte_heuristic_is_used(tmp_path):
    """When the tokenizer files are missing, no download is tried (there is nothing to load) and
    counting falls back to about four bytes per token."""
    assert load_tiktoken_counter(tmp_path) is None

    counter = HeuristicCounter()
    assert counter.name == "heuristic"
    assert counter.count("") == 0
    assert counter.count("a") == 1
    assert counter.count("abcdefgh") == 2
    assert counter.count("ééééé") == 3  # 10 bytes of UTF-8


def test_the_heuristic_never_says_zero_for_text():
    """Any non-empty text, even one byte, counts as at least one token, so budgets always move."""
    assert all(estimate_tokens(text) >= 1 for text in [" ", "\n", "x", "日"])


def test_the_encoding_is_tiktokens_own_cl100k_base(monkeypatch):
    """The encoding built from the bundled file is the one tiktoken builds from it: the same
    pattern, ranks and special tokens, and the same counts on mixed text (so a tiktoken that
    changes cl100k_base fails here, not silently in reports)."""
    import tiktoken

    from dream_memory.adapters.tokens import bundled_tokenizer_dir

    folder = bundled_tokenizer_dir()
    assert folder is not None
    ours = load_tiktoken_counter(folder)
    assert ours is not None
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(folder))
    theirs = tiktoken.get_encoding("cl100k_base")
    built = ours._encoding
    assert (built._pat_str, built._special_tokens) == (theirs._pat_str, theirs._special_tokens)
    assert built._mergeable_ranks == theirs._mergeable_ranks
    samples = [
        "The user prefers dark mode.",
        "naïve café 日本語 🙂",
        "x = 0x1F; print(f'{x!r}')\n\n\t- item",
        "<|endoftext|>",
    ]
    for text in samples:
        assert ours.count(text) == len(theirs.encode(text, disallowed_special=()))


def test_a_tokenizer_file_that_is_not_cl100k_base_is_not_used(tmp_path):
    """A truncated or altered file gives the byte heuristic's fallback (None here), never a
    wrong encoding and never a download."""
    from dream_memory.adapters.tokens import _CL100K_CACHE_KEY, bundled_tokenizer_dir

    folder = bundled_tokenizer_dir()
    assert folder is not None
    data = (folder / _CL100K_CACHE_KEY).read_bytes()
    (tmp_path / _CL100K_CACHE_KEY).write_bytes(data[: len(data) // 2])
    assert load_tiktoken_counter(tmp_path) is None


def test_a_tiktoken_that_refuses_the_encoding_gives_the_fallback(monkeypatch):
    """A tiktoken that no longer takes this encoding (a renamed argument, a pattern it rejects)
    means the byte heuristic, not a crash of every command that counts."""
    import tiktoken

    def refuse(*args, **kwargs):
        raise ValueError("unsupported pattern")

    monkeypatch.setattr(tiktoken, "Encoding", refuse)
    assert load_tiktoken_counter() is None


def test_a_run_with_nothing_to_dream_never_builds_the_tokenizer(tmp_path) -> None:
    """Most scheduled runs find nothing new: they answer without loading tiktoken."""
    import subprocess
    import sys

    ws = tmp_path / "ws"
    script = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from dream_memory.entrypoints.cli import cli\n"
        f"r = CliRunner().invoke(cli, ['init', '-w', {str(ws)!r}])\n"
        f"r = CliRunner().invoke(cli, ['run', '--model', 'offline', '-w', {str(ws)!r}, '--json'])\n"
        "print(r.exit_code, '\"nothing_to_do\"' in r.stdout, 'tiktoken' in sys.modules)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == ["0", "True", "False"], out
