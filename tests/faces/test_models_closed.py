"""A model a run builds is closed when the run ends; a model the caller passes in is the caller's.

Before, the plain-HTTP model (an ``openai/...`` preset with an apiBase) kept its keep-alive socket
after the run, until the garbage collector found it and warned ``ResourceWarning: unclosed
<socket ...>``: one per ``Workspace.dream()`` / ``consolidate()`` in a host process, an error under
``-W error::ResourceWarning``, and noise landing in whatever test of ours was recording warnings
when the collector ran. The wire test below fails that way without the close.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from dream_memory import Workspace
from dream_memory.adapters.offline import OfflineModel
from dream_memory.app.doctor import DoctorInputs, diagnose
from dream_memory.app.evaluate import EvalRequest, evaluate
from dream_memory.app.runs import ConsolidateRequest, RunRequest, consolidate, dream
from dream_memory.app.runtime import Runtime
from dream_memory.core.chat import ChatReply, Message, ToolSpec
from dream_memory.errors import ModelError
from dream_memory.settings import ResolvedModel
from dream_memory.testing import build_workspace, write_session
from dream_memory.testing.llm_server import Fail, ScriptedLLMServer, from_chat_model


def session_messages(n: int) -> list[dict[str, str]]:
    return [
        {"role": role, "content": f"{role} turn {i}: the user now drinks green tea every morning", "timestamp": "t"}
        for i in range(n)
        for role in ("user", "assistant")
    ]


@pytest.fixture
def unclosed_sockets(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int], list[str]]]:
    """``unclosed_sockets(port)``: the sockets to ``port`` the garbage collector found unclosed
    since the fixture began, as a host running with ``-W error::ResourceWarning`` meets them (the
    warning raised inside a finalizer reaches ``sys.unraisablehook``; a recorded warning could
    be lost to a ``logging.captureWarnings`` in the process). Earlier tests' garbage is collected
    before, and only sockets to this test's server count."""
    gc.collect()
    found: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: found.append(f"{u.exc_type.__name__}: {u.exc_value}"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)

        def unclosed(port: int) -> list[str]:
            gc.collect()
            return [f for f in found if "unclosed" in f and f"('127.0.0.1', {port})" in f]

        yield unclosed


def test_repeated_runs_through_the_api_leave_no_socket_open(
    tmp_path: Path, unclosed_sockets: Callable[[int], list[str]]
) -> None:
    """Runs, consolidations and a run whose batch fails (a 400 is not retried), one after the
    other in one process against an endpoint named by address: each opened a connection, and
    none is left for the garbage collector to find."""
    with ScriptedLLMServer(responder=from_chat_model(OfflineModel())) as server:
        config = tmp_path / "dream.json"
        preset = {"model": "openai/local-model", "apiBase": server.base_url, "maxRetries": 0, "timeout": 10}
        config.write_text(json.dumps({"agents": {"defaults": {"model": "local"}}, "modelPresets": {"local": preset}}))
        root = build_workspace(tmp_path / "ws")
        ws = Workspace(root, config=config, env={"HOME": str(tmp_path)})
        for i in range(3):
            ws.append(f"- [durable] The user's favourite number is now {i}.")
            assert ws.dream().status == "ok"
        for i in range(2):
            path = write_session(root, f"cli:talk{i}", session_messages(3))
            assert ws.consolidate(sessions=[str(path)], force=True).status == "ok"
        server.add(Fail(400, "no such model"))
        ws.append("- [durable] The user moved to Lisbon.")
        assert ws.dream().status == "failed"
        assert len(server.completion_requests()) >= 6
        assert unclosed_sockets(server.port) == []


class OwnModel:
    """The offline engine as a model with a ``close`` that counts, and a count of any call made
    after it (a caller's own model, or the one a test runtime builds); ``fail``: every call is a
    400, which is never retried."""

    def __init__(self, *, fail: bool = False) -> None:
        self.inner, self.fail = OfflineModel(), fail
        self.calls = self.closed = self.calls_after_close = 0

    @property
    def name(self) -> str:
        return "own-model"

    def complete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] | None = None, purpose: str = ""
    ) -> ChatReply:
        self.calls += 1
        self.calls_after_close += bool(self.closed)
        if self.fail:
            raise ModelError("model own-model: HTTP 400 bad request", kind="bad_request", retryable=False)
        if purpose == "doctor":  # the offline engine answers only Dream's and the Consolidator's prompts
            return ChatReply("OK")
        return self.inner.complete(messages, tools=tools, purpose=purpose)

    def close(self) -> None:
        self.closed += 1


def test_a_callers_own_model_is_not_closed(workspace: Path, tmp_path: Path) -> None:
    """A ChatModel object given to the API belongs to the caller, who may go on using it."""
    own = OwnModel()
    ws = Workspace(workspace, env={"HOME": str(tmp_path)})
    ws.append("- [durable] The user prefers short answers.")
    assert ws.dream(model=own).status == "ok"
    path = write_session(workspace, "cli:talk", session_messages(3))
    assert ws.consolidate(model=own, sessions=[str(path)], force=True).status == "ok"
    assert own.calls >= 2 and own.closed == 0


class HookedModel(OwnModel):
    """A caller's model with a retry hook named as our adapters name theirs (``on_retry``): each
    call tells the hook of one failed attempt before it answers."""

    def __init__(self) -> None:
        super().__init__()
        self.on_retry: Callable[[int, int, float, str], None] | None = None

    def complete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] | None = None, purpose: str = ""
    ) -> ChatReply:
        if self.on_retry is not None:
            self.on_retry(1, 2, 0.0, "overloaded")
        return super().complete(messages, tools=tools, purpose=purpose)


def test_a_callers_own_retry_hook_is_left_as_it_was(workspace: Path, tmp_path: Path) -> None:
    """A run with a listener hears the retries of its model's calls; after it the caller's model
    has its own hook back, and a later run without a listener sends nothing to the first one's
    (before, the run's hook stayed on the model: the first listener heard the second run)."""
    own = HookedModel()
    caller_heard: list[str] = []

    def callers_hook(attempt: int, attempts: int, wait: float, reason: str) -> None:
        caller_heard.append(reason)

    own.on_retry = callers_hook
    rt = Runtime.load(workspace, env={"HOME": str(tmp_path)}, log=lambda message: None)
    heard: list[object] = []
    ws = Workspace(workspace, env={"HOME": str(tmp_path)})
    ws.append("- [durable] The user prefers short answers.")
    assert dream(rt, RunRequest(model=own), progress=heard.append).status == "ok"
    retries = [e for e in heard if type(e).__name__ == "Retry"]
    assert len(retries) == own.calls and caller_heard == []
    assert own.on_retry is callers_hook
    ws.append("- [durable] The user moved to Lisbon.")
    calls = own.calls
    assert dream(rt, RunRequest(model=own)).status == "ok"
    assert [type(e).__name__ for e in heard].count("Retry") == len(retries)
    assert len(caller_heard) == own.calls - calls > 0


@dataclasses.dataclass
class BuildsOwnModels(Runtime):
    """A runtime whose models are OwnModels, kept to see what the use case did with them."""

    fail: bool = False
    built: list[OwnModel] = dataclasses.field(default_factory=list)

    def chat_model(self, resolved: ResolvedModel) -> OwnModel:
        self.built.append(OwnModel(fail=self.fail))
        return self.built[-1]


def runtime(root: Path, home: Path, *, fail: bool = False) -> BuildsOwnModels:
    env = {"HOME": str(home), "DREAM_MODEL": "openai/own-model", "DREAM_API_BASE": "http://127.0.0.1:9/v1"}
    loaded = Runtime.load(root, env=env, log=lambda message: None)
    return BuildsOwnModels(loaded.settings, log=loaded.log, fail=fail)


def refuse() -> None:
    raise ValueError("the face's own check refused")


def dream_refused(rt: Runtime, root: Path) -> None:
    """A run the face's own last check (the CLI's --report file) stops after the model is built."""
    with pytest.raises(ValueError, match="refused"):
        dream(rt, RunRequest(), before_start=refuse)


USE_CASES: dict[str, Callable[[Runtime, Path], Any]] = {
    "dream": lambda rt, root: dream(rt, RunRequest()),
    "consolidate": lambda rt, root: consolidate(
        rt, ConsolidateRequest(sessions=[write_session(root, "cli:talk", session_messages(3))], force=True)
    ),
    "eval, one model for all its runs": lambda rt, root: evaluate(
        rt, EvalRequest(base=root.parent / "eval", names=("personal",))
    ),
    "dream, refused before it starts": dream_refused,
}


@pytest.mark.parametrize("use_case", sorted(USE_CASES))
@pytest.mark.parametrize("fail", [False, True], ids=["answering", "failing"])
def test_a_model_a_use_case_builds_is_closed_once_when_it_ends(
    workspace: Path, tmp_path: Path, use_case: str, fail: bool
) -> None:
    """Closed once, after its last call, whether the run went well or its model failed it."""
    rt = runtime(workspace, tmp_path, fail=fail)
    Workspace(workspace, env={"HOME": str(tmp_path)}).append("- [durable] The user prefers short answers.")
    USE_CASES[use_case](rt, workspace)
    (model,) = rt.built
    assert (model.closed, model.calls_after_close) == (1, 0)
    assert model.calls > 0 or use_case.endswith("before it starts")


@pytest.mark.parametrize("fail", [False, True], ids=["answering", "refusing"])
def test_the_doctors_probe_model_is_closed(workspace: Path, tmp_path: Path, fail: bool) -> None:
    rt = runtime(workspace, tmp_path, fail=fail)
    report = diagnose(
        DoctorInputs(
            root=workspace,
            settings=rt.settings,
            config_error=None,
            config_path=None,
            env=rt.settings.env,
            history=lambda: rt.history,
            git=lambda: rt.git(create=False),
            chat_model=rt.chat_model,
            check_model=True,
        )
    )
    (check,) = [c for c in report.checks if c.name == "model-call"]
    assert check.status == ("problem" if fail else "ok"), check
    (model,) = rt.built
    assert (model.calls, model.closed) == (1, 1)
