"""An argument of the wrong kind given to the Python API is an InputError (exit code 2) naming the
method, the argument, what was given and what is expected, and nothing is read or written.

Before, `ws.versions(limit="3")` was a TypeError from deep inside the service, `ws.search(None)`
an AttributeError, `limit=True` listed one version, and a string given for a list was iterated
as its characters. One rule, read from the methods' own annotations, judges every public method
(app/arguments.py); the table below samples each method, and the sweep after it gives every
annotated argument of every public method a value no annotation takes.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dream_memory import Workspace
from dream_memory.errors import InputError
from dream_memory.testing.clock import FrozenClock

Call = Callable[[Workspace], Any]

# (wrong call, what the message says, a right call of the same argument that still works)
CASES: list[tuple[str, Call, str, Call]] = [
    (
        "versions(limit=str)",
        lambda w: w.versions(limit="3"),
        "versions(limit=...): expected an integer, got str '3'",
        lambda w: w.versions(limit=3),
    ),
    (
        "versions(limit=True)",
        lambda w: w.versions(limit=True),
        "versions(limit=...): expected an integer, got bool True",
        lambda w: w.versions(limit=1),
    ),
    (
        "search(None)",
        lambda w: w.search(None),
        "search(query=...): expected a string, got None",
        lambda w: w.search("tea"),
    ),
    (
        "search(max_results=str)",
        lambda w: w.search("tea", max_results="5"),
        "search(max_results=...): expected an integer, got str '5'",
        lambda w: w.search("tea", max_results=5),
    ),
    (
        "search(history=1)",
        lambda w: w.search("tea", history=1),
        "search(history=...): expected True or False, got int 1",
        lambda w: w.search("tea", history=True),
    ),
    (
        "entity(int)",
        lambda w: w.entity(3),
        "entity(name=...): expected a string, got int 3",
        lambda w: w.section("user", offset_line=1),
    ),
    (
        "entity(offset_line=True)",
        lambda w: w.entity("x", offset_line=True),
        "entity(offset_line=...): expected an integer, got bool True",
        lambda w: w.section("user", offset_line=2),
    ),
    (
        "section(None)",
        lambda w: w.section(None),
        "section(name=...): expected a string, got None",
        lambda w: w.section("memory"),
    ),
    (
        "section(as_of=date)",
        lambda w: w.section("user", as_of=20260404),
        "section(as_of=...): expected a string or None, got int 20260404",
        lambda w: w.section("user", as_of=None),
    ),
    (
        "resolve(list)",
        lambda w: w.resolve(["/tmp"]),
        "resolve(path=...): expected a string, got list",
        lambda w: w.context(path="/tmp"),
    ),
    (
        "context(budget=str)",
        lambda w: w.context(budget="500"),
        "context(budget=...): expected an integer or None, got str '500'",
        lambda w: w.context(budget=500),
    ),
    (
        "context(scope=int)",
        lambda w: w.context(scope=1),
        "context(scope=...): expected a string or None, got int 1",
        lambda w: w.context(scope=None),
    ),
    (
        "log(int)",
        lambda w: w.log(1),
        "log(rev=...): expected a string or None, got int 1",
        lambda w: w.log(None),
    ),
    (
        "restore(None)",
        lambda w: w.restore(None),
        "restore(rev=...): expected a string, got None",
        lambda w: w.versions(),
    ),
    (
        "restore(force=str)",
        lambda w: w.restore("HEAD", force="yes"),
        "restore(force=...): expected True or False, got str 'yes'",
        lambda w: w.versions(),
    ),
    (
        "apply_held(int)",
        lambda w: w.apply_held(1),
        "apply_held(held_id=...): expected a string, got int 1",
        lambda w: w.review("list"),
    ),
    (
        "discard_held(None)",
        lambda w: w.discard_held(None),
        "discard_held(held_id=...): expected a string, got None",
        lambda w: w.review("list"),
    ),
    (
        "forget(bytes)",
        lambda w: w.forget(b"tea"),
        "forget(value=...): expected a string or None, got bytes",
        lambda w: w.forget("likes tea", dry_run=True),
    ),
    (
        "forget(entity=int)",
        lambda w: w.forget(entity=3),
        "forget(entity=...): expected a string or None, got int 3",
        lambda w: w.forget(entity="nix-config", dry_run=True),
    ),
    (
        "review(int)",
        lambda w: w.review(3),
        "review(action=...): expected a string, got int 3",
        lambda w: w.review("list"),
    ),
    (
        "review(ids int)",
        lambda w: w.review("accept", "abc", 3),
        "review(ids[1]=...): expected a string, got int 3",
        lambda w: w.review("list", every=False),
    ),
    (
        "append(None)",
        lambda w: w.append(None),
        "append(text=...): expected a string, got None",
        lambda w: w.append("- [durable] User likes cocoa"),
    ),
    (
        "append(session_key=int)",
        lambda w: w.append("- x", session_key=7),
        "append(session_key=...): expected a string or None, got int 7",
        lambda w: w.append("- [durable] User likes cocoa", session_key="cli:direct"),
    ),
    (
        "append_report(int)",
        lambda w: w.append_report(5),
        "append_report(text=...): expected a string, got int 5",
        lambda w: w.append_report("- [durable] User likes cocoa"),
    ),
    (
        "append_many(str)",
        lambda w: w.append_many("abc"),
        "append_many(entries=...): expected a list of NewEntry objects, dicts or strings, got str 'abc'",
        lambda w: w.append_many(["- [durable] User likes cocoa"]),
    ),
    (
        "append_many(list with int)",
        lambda w: w.append_many(["- fine", 5]),
        "append_many(entries=...): expected a list of NewEntry objects, dicts or strings, got list whose item [1] "
        "is int 5",
        lambda w: w.append_many(({"content": "- [durable] User likes cocoa"},)),
    ),
    (
        "dream(model=int)",
        lambda w: w.dream(model=3),
        "dream(model=...): expected a string, a ChatModel or None, got int 3",
        lambda w: w.dream(model="offline", dry_run=True),
    ),
    (
        "dream(dry_run=1)",
        lambda w: w.dream(model="offline", dry_run=1),
        "dream(dry_run=...): expected True or False, got int 1",
        lambda w: w.dream(model="offline", dry_run=True),
    ),
    (
        "dream(batch_size=True)",
        lambda w: w.dream(model="offline", batch_size=True),
        "dream(batch_size=...): expected an integer or None, got bool True",
        lambda w: w.dream(model="offline", batch_size=1, dry_run=True),
    ),
    (
        "dream(max_cost=str)",
        lambda w: w.dream(model="offline", max_cost="1"),
        "dream(max_cost=...): expected a number or None, got str '1'",
        lambda w: w.dream(model="offline", max_cost=1, max_seconds=30.5, dry_run=True),
    ),
    (
        "consolidate(sessions=str)",
        lambda w: w.consolidate(model="offline", sessions="sessions/cli_direct.jsonl"),
        "consolidate(sessions=...): expected a list of strings or paths, or None, got a str of 25 characters",
        lambda w: w.consolidate(model="offline", sessions=None, update_sessions=False, dry_run=True),
    ),
    (
        "consolidate(sessions=[int])",
        lambda w: w.consolidate(model="offline", sessions=[3]),
        "consolidate(sessions=...): expected a list of strings or paths, or None, got list whose item [0] is int 3",
        lambda w: w.consolidate(model="offline", sessions=None, dry_run=True),
    ),
    (
        "consolidate(budget=float)",
        lambda w: w.consolidate(model="offline", budget=2.5),
        "consolidate(budget=...): expected an integer or None, got float 2.5",
        lambda w: w.consolidate(model="offline", budget=4000, dry_run=True),
    ),
]


@pytest.fixture
def env(clean_env: dict[str, str]) -> dict[str, str]:
    return {"HOME": clean_env["HOME"]}


@pytest.fixture
def ws(tmp_path: Path, env: dict[str, str]) -> Workspace:
    workspace = Workspace(tmp_path / "ws", env=env)
    workspace.init()
    workspace.append("- [durable] User likes tea.", session_key="cli:direct")
    return workspace


def _state(ws: Workspace) -> dict[str, Any]:
    status = ws.status().to_json()
    return {"cursor": status["cursor"], "history": (ws.path / "memory" / "history.jsonl").read_bytes()}


@pytest.mark.parametrize(("wrong", "says", "right"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_wrong_kind_is_refused_naming_the_argument_and_a_right_one_works(
    ws: Workspace, wrong: Call, says: str, right: Call
) -> None:
    before = _state(ws)
    with pytest.raises(InputError) as raised:
        wrong(ws)
    assert says in raised.value.message, raised.value.message
    assert raised.value.exit_code == 2
    assert _state(ws) == before  # refused before anything was read or written
    right(ws)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda env: Workspace(3, env=env), "Workspace(path=...): expected a string, a path or None, got int 3"),
        (lambda env: Workspace(config=["a.json"], env=env), "Workspace(config=...): expected a string, a path or None"),
        (lambda env: Workspace(env=[("HOME", "/x")]), "Workspace(env=...): expected a dict of strings to strings"),
        (lambda env: Workspace(env={"HOME": 1}), "got dict whose value for 'HOME' is int 1"),
        (lambda env: Workspace(env=env, clock="2026-04-03"), "Workspace(clock=...): expected a Clock or None"),
    ],
    ids=["path", "config", "env", "env value", "clock"],
)
def test_the_constructor_refuses_a_wrong_kind(
    tmp_path: Path, env: dict[str, str], make: Callable[[dict[str, str]], Any], says: str
) -> None:
    with pytest.raises(InputError) as raised:
        make(env)
    assert says in raised.value.message, raised.value.message
    # the right kinds: a path object, a mapping other than dict, an object with the Clock's members
    ws = Workspace(tmp_path / "ws", env=dict(os.environ) | env, clock=FrozenClock())
    assert ws.init().created


def test_a_long_string_given_in_the_wrong_place_is_not_echoed(env: dict[str, str]) -> None:
    """Messages never echo a value that might be secret: a key passed as ``env`` is counted."""
    key = "sk-" + "q" * 40
    with pytest.raises(InputError) as raised:
        Workspace(env=key)  # type: ignore[arg-type]
    assert key not in str(raised.value) and "q" * 10 not in str(raised.value)
    assert "got a str of 43 characters" in raised.value.message


class _Nothing:
    """A value no annotation of the API takes."""


def _sweep() -> list[tuple[str, str]]:
    """Every annotated argument of every public method (``__init__`` as the constructor)."""
    found = []
    for name, member in vars(Workspace).items():
        if inspect.isfunction(member) and (name == "__init__" or not name.startswith("_")):
            for param in inspect.signature(member).parameters.values():
                if param.name != "self" and param.annotation is not param.empty:
                    found.append((name, param.name))
    return found


# A right value for each required argument, so the sweep's one wrong value is the only problem.
REQUIRED = {"text": "- x", "entries": ["- x"], "query": "tea", "name": "user", "path": "/tmp", "rev": "HEAD"}
REQUIRED |= {"held_id": "abc"}


@pytest.mark.parametrize(("method", "argument"), _sweep(), ids=[".".join(s) for s in _sweep()])
def test_every_argument_of_every_public_method_is_judged(
    ws: Workspace, env: dict[str, str], method: str, argument: str
) -> None:
    member = vars(Workspace)[method]
    args: list[Any] = []
    kwargs: dict[str, Any] = {"env": env} if method == "__init__" and argument != "env" else {}
    for param in list(inspect.signature(member).parameters.values())[1:]:
        value = _Nothing() if param.name == argument else REQUIRED.get(param.name, param.default)
        if param.kind is param.POSITIONAL_OR_KEYWORD:
            args.append(value)
        elif param.kind is param.VAR_POSITIONAL:
            args += [value] if param.name == argument else []
        elif param.name == argument:
            kwargs[param.name] = value
    before = _state(ws)
    with pytest.raises(InputError) as raised:
        (Workspace if method == "__init__" else getattr(ws, method))(*args, **kwargs)
    label = "Workspace" if method == "__init__" else method
    where = f"{label}({argument}[0]=...)" if argument == "ids" else f"{label}({argument}=...)"
    assert raised.value.message.startswith(f"{where}: expected "), raised.value.message
    assert raised.value.message.endswith("got _Nothing"), raised.value.message
    assert _state(ws) == before
