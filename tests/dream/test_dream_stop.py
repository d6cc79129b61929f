"""A stop request (what SIGTERM / SIGINT set) ends a Dream run between model calls: the batch in
flight is never half-landed, every committed batch is in the `interrupted` report (issue 17).
In process, with the offline engine behind a model that requests the stop on a chosen call."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from dream_helpers import git, sample_entries

from dream_memory.adapters.offline import OfflineModel
from dream_memory.app import outcome
from dream_memory.app.dream.stopping import StopFlag, stop_on_signals
from dream_memory.app.runs import RunRequest, dream
from dream_memory.app.runtime import Runtime
from dream_memory.core.chat import ChatReply
from dream_memory.testing import build_workspace

CALLS_PER_BATCH = 3  # the offline engine: one analysis call, two edit calls


class StopsOnCall:
    """The offline engine; during call number ``on_call`` a stop is requested (as a signal
    arriving while the model thinks would)."""

    name = "offline-stopping"

    def __init__(self, flag: StopFlag, on_call: int, signum: int = signal.SIGTERM) -> None:
        self.inner, self.flag, self.on_call, self.signum = OfflineModel(), flag, on_call, signum
        self.calls = 0

    def complete(self, messages: Any, *, tools: Any = None, purpose: str = "") -> ChatReply:
        self.calls += 1
        if self.calls == self.on_call:
            self.flag.request(self.signum)
        return self.inner.complete(messages, tools=tools, purpose=purpose)


def _run(root: Path, model: Any = None, stop: StopFlag | None = None) -> Any:
    return dream(Runtime.load(str(root), None), RunRequest(model=model or OfflineModel(), batch_size=2), stop=stop)


def _cursor(root: Path) -> int:
    path = root / "memory" / ".dream_cursor"
    return int(path.read_text().strip() or 0) if path.exists() else 0


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    for name in ("DREAM_CONFIG", "DREAM_MODEL", "DREAM_WORKSPACE"):
        monkeypatch.delenv(name, raising=False)
    return build_workspace(tmp_path / "ws", history=sample_entries(6))


def test_a_stop_during_a_batch_rolls_it_back_and_keeps_the_ones_before(root: Path) -> None:
    """Requested during batch 2's first call: that call finishes, no further call is made, batch 2
    is not landed (cursor at batch 1's end, HEAD batch 1's commit), the report is `interrupted`
    with batch 1 committed and batch 2 `interrupted`, and the exit code is 143 for SIGTERM."""
    flag = StopFlag()
    model = StopsOnCall(flag, on_call=CALLS_PER_BATCH + 1)
    report = _run(root, model, flag)
    assert model.calls == CALLS_PER_BATCH + 1
    assert report.status == "interrupted"
    assert [b.outcome for b in report.batches] == ["committed", "interrupted"]
    assert report.commits == [report.batches[0].commit]
    assert report.cursor_after == 2 == _cursor(root)
    assert git(root, "rev-parse", "HEAD").strip() == report.batches[0].commit
    assert git(root, "status", "--porcelain") == ""
    assert outcome.exit_code(report) == 143
    assert any("SIGTERM" in note for note in report.notes)


def test_a_stop_during_a_batchs_last_call_lets_it_land(root: Path) -> None:
    """Requested during batch 1's last model call: batch 1 lands whole, batch 2 never starts."""
    flag = StopFlag()
    model = StopsOnCall(flag, on_call=CALLS_PER_BATCH, signum=signal.SIGINT)
    report = _run(root, model, flag)
    assert model.calls == CALLS_PER_BATCH
    assert [b.outcome for b in report.batches] == ["committed"]
    assert report.status == "interrupted"
    assert _cursor(root) == 2
    assert outcome.exit_code(report) == 130


def test_an_interrupted_run_then_a_full_one_equal_an_uninterrupted_run(root: Path, tmp_path: Path) -> None:
    """Stopped in the middle of batch 1 (nothing committed, nothing half-written), the next run
    ends with exactly the memory one uninterrupted run produces."""
    reference = build_workspace(tmp_path / "reference", history=sample_entries(6))
    assert _run(reference).status == "ok"
    flag = StopFlag()
    report = _run(root, StopsOnCall(flag, on_call=2), flag)
    assert report.status == "interrupted"
    assert report.commits == [] and _cursor(root) == 0
    assert [b.outcome for b in report.batches] == ["interrupted"]
    assert _run(root).status == "ok"
    for name in ("USER.md", "SOUL.md", "memory/MEMORY.md", "memory/.dream_cursor"):
        assert (root / name).read_text() == (reference / name).read_text(), name


def test_the_handler_turns_a_signal_into_a_stop_request_and_is_removed_after() -> None:
    """Inside stop_on_signals a SIGTERM sets the flag instead of ending the process; afterwards
    the handler that was there before is back."""
    before = signal.getsignal(signal.SIGTERM)
    with stop_on_signals() as flag:
        os.kill(os.getpid(), signal.SIGTERM)
        assert flag.requested and flag.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == before
