"""The settings every command gets without pydantic are the settings pydantic would give.

A command with no config file takes ``schema.Config()``; a plainly valid file is read by
``settings.quick``; everything else goes to pydantic (``settings.validation``). These tests compare
the cheap paths with the full validation over generated files, environments and flags, and check
that a plain `dream status` really starts without pydantic.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from settings_strategies import ODD_VALUES, configs, leaf_paths, nested

from dream_memory.app.runtime import Runtime
from dream_memory.errors import ConfigError
from dream_memory.settings import load_settings, schema
from dream_memory.settings.loading import _unknown_keys, config_warnings, parse_config
from dream_memory.settings.quick import Unsure, camel, check_config
from dream_memory.settings.validation import validate

REPO = Path(__file__).resolve().parents[2]


def tree(value: Any) -> Any:
    """A settings value as plain data, with each scalar's type (1 and 1.0 differ here)."""
    if dataclasses.is_dataclass(value):
        return {f.name: tree(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [tree(v) for v in value]
    return (type(value).__name__, value)


def config_messages(caught: list[warnings.WarningMessage]) -> list[str]:
    """The config's own warnings. A ResourceWarning for a socket another test on this worker left
    open can land here when the collector happens to run (it failed a CI run): not the config's."""
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def outcome(data: dict[str, Any]) -> tuple[Any, ...]:
    """What a command sees from a config file: the settings or the error, and the warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result: tuple[Any, ...] = ("ok", tree(parse_config(data, "dream.json")))
        except ConfigError as exc:
            result = ("error", str(exc), exc.hint)
    return (*result, config_messages(caught))


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(configs())
def test_the_quick_check_accepts_only_what_pydantic_reads_the_same(data: dict[str, Any]) -> None:
    try:
        quick, quick_extras = check_config(data)
    except Unsure:
        return
    full, full_extras = validate(data, "dream.json")  # a ConfigError here: quick let a bad file pass
    assert tree(quick) == tree(full)
    assert _unknown_keys(quick, quick_extras) == _unknown_keys(full, full_extras)


def test_each_field_with_each_odd_value_is_read_as_pydantic_reads_it() -> None:
    """Every field alone, set to each of the odd values (wrong types, edges, values pydantic
    coerces): where the quick check accepts, pydantic accepts the same settings."""
    paths = leaf_paths()
    assert len(paths) > 60 and ("agents", "defaults", "dream", "deletionGuard", "maxShare") in paths
    accepted = 0
    for path in paths:
        for value in ODD_VALUES:
            data = nested(path, value)
            try:
                quick, _ = check_config(data)
            except Unsure:
                continue
            accepted += 1
            assert tree(quick) == tree(validate(data, "dream.json")[0]), data
    assert accepted > len(paths)  # the quick path does read most plain values


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(configs())
def test_a_file_quick_cannot_read_gets_pydantics_verdict(data: dict[str, Any]) -> None:
    """parse_config (quick, else pydantic) answers exactly what pydantic alone answers."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            config, extras = validate(data, "dream.json")
            full: tuple[Any, ...] = ("ok", tree(config))
        except ConfigError as exc:
            full, extras, config = ("error", str(exc), exc.hint), {}, None
    expected = config_warnings(config, extras, "dream.json") if config else []
    assert not config_messages(caught)
    assert outcome(data) == (*full, expected)


def _documented_configs() -> list[dict[str, Any]]:
    text = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, re.S)]


@pytest.mark.parametrize("data", _documented_configs())
def test_the_documented_configs_take_the_quick_path(data: dict[str, Any]) -> None:
    """The files people write (docs/configuration.md's examples) need no pydantic to be read."""
    quick, _ = check_config(data)
    assert tree(quick) == tree(validate(data, "dream.json")[0])


def test_the_defaults_without_a_file_are_the_validated_empty_file() -> None:
    assert tree(schema.Config()) == tree(validate({}, "dream.json")[0])
    assert tree(check_config({})[0]) == tree(schema.Config())


def test_every_field_has_the_camelcase_key_pydantic_accepts() -> None:
    from pydantic.alias_generators import to_camel

    sections_ = [c for c in vars(schema).values() if isinstance(c, type) and dataclasses.is_dataclass(c)]
    names = {f.name for c in sections_ if c not in (schema.Range, schema.Check) for f in dataclasses.fields(c)}
    assert {"max_batch_size", "retry_base_seconds", "dream_age_days"} <= names
    assert {n: camel(n) for n in names} == {n: to_camel(n) for n in names}


ENVIRONMENTS = st.fixed_dictionaries(
    {},
    optional={
        "DREAM_MODEL": st.sampled_from(["", "offline", "openai/gpt-4o-mini", "anthropic/claude", "night"]),
        "DREAM_API_KEY": st.sampled_from(["", "sk-test"]),
        "DREAM_API_BASE": st.sampled_from(["", "http://127.0.0.1:9/v1"]),
        "OPENAI_API_KEY": st.sampled_from(["", "sk-openai"]),
        "DREAM_MEMORY_EXCLUDE": st.sampled_from(["", "Bob, alice", ","]),
        "DREAM_MEMORY_STORE": st.sampled_from(["", "/tmp/elsewhere", "~/store"]),
    },
)


def _effective(settings_: Any, cli_model: str | None) -> tuple[Any, ...]:
    """Everything a command takes from its settings (the model, or the error choosing it)."""
    try:
        model: Any = settings_.model(cli_model)
    except ConfigError as exc:
        model = ("error", str(exc), exc.hint)
    rt = Runtime(settings_)
    options = rt.dream_options(batch_size=None, resolved=model if not isinstance(model, tuple) else None)
    return (
        tree(settings_.config),
        settings_.workspace,
        settings_.store,
        settings_.excludes,
        settings_.scope_rules,
        repr(model),
        repr(options),
        settings_.context.budget_tokens,
        settings_.consolidate.budget_tokens,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(env=ENVIRONMENTS, cli_model=st.sampled_from([None, "", "offline", "openai/gpt-4o", "ollama/qwen"]))
def test_no_file_and_an_empty_file_give_the_same_settings(
    tmp_path_factory: pytest.TempPathFactory, env: dict[str, str], cli_model: str | None
) -> None:
    """With no config file (defaults from schema.Config(), no pydantic) and with a `{}` file that
    pydantic validates, every flag and variable resolves to the same effective settings."""
    home = tmp_path_factory.mktemp("home")
    empty = home / "empty.json"
    empty.write_text("{}", encoding="utf-8")
    environ = {"HOME": str(home), **env}
    cheap = load_settings(home / "ws", None, environ)
    full = dataclasses.replace(cheap, config=validate({}, str(empty))[0])
    from_file = load_settings(home / "ws", empty, environ)
    assert cheap.config_path is None and from_file.config_path == empty
    assert _effective(cheap, cli_model) == _effective(full, cli_model) == _effective(from_file, cli_model)


PROBE = (
    "import sys\n"
    "sys.argv = ['dream', *sys.argv[1:]]\n"
    "from dream_memory.entrypoints.cli import main\n"
    "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
    "print('PYDANTIC', 'pydantic' in sys.modules, code, file=sys.stderr)\n"
)


def _status(clean_env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE, "status", *args], capture_output=True, text=True, env=clean_env, timeout=60
    )


def test_a_plain_status_starts_without_pydantic(workspace: Path, clean_env: dict[str, str], tmp_path: Path) -> None:
    """No config file, or a plainly valid one: no pydantic. A file with a mistake: pydantic
    judges it, and the command stops with its message (exit 2)."""
    proc = _status(clean_env, "-w", str(workspace))
    assert "pending" in proc.stdout and "PYDANTIC False 0" in proc.stderr, proc.stderr
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"agents": {"defaults": {"dream": {"maxBatchSize": 5, "zzz": 1}}}}), encoding="utf-8")
    proc = _status(clean_env, "-w", str(workspace), "--config", str(good))
    assert "PYDANTIC False 0" in proc.stderr, proc.stderr
    assert "unknown setting agents.defaults.dream.zzz is ignored" in proc.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"agents": {"defaults": {"dream": {"maxBatchSize": 0}}}}), encoding="utf-8")
    proc = _status(clean_env, "-w", str(workspace), "--config", str(bad))
    assert "PYDANTIC True 2" in proc.stderr, proc.stderr
    assert "agents.defaults.dream.maxBatchSize: Input should be greater than or equal to 1" in proc.stderr
