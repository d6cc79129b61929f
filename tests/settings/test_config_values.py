"""Config values are judged as they are written: a value of the wrong type is exit 2 (never
quietly coerced: `"5"` or `true` read as 5 or 1, `"no"` as False), a number that would break
every run (a timeout of 1e12, a NaN temperature) is exit 2 naming the field and its range, and a
key given in both spellings is reported as that, not as unknown. Real files, real commands."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from dream_memory.errors import ConfigError
from dream_memory.settings.loading import parse_config

Dream = Callable[..., subprocess.CompletedProcess[str]]


def _run(dream: Dream, tmp_path: Path, text: str, *args: str) -> tuple[int, str]:
    ws = tmp_path / "ws"
    if not ws.exists():
        assert dream("init", "-w", str(ws)).returncode == 0
    config = tmp_path / "dream.json"
    config.write_text(text, encoding="utf-8")
    done = dream(*(args or ("status",)), "-w", str(ws), "--config", str(config))
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout + done.stderr


PRESET = '{"agents": {"defaults": {"modelPreset": "loc"}}, "modelPresets": {"loc": {"model": "openai/m", "apiBase": "http://127.0.0.1:9/v1", %s}}}'


@pytest.mark.parametrize(
    ("text", "field", "allowed"),
    [
        (PRESET % '"timeout": 1e12', "modelPresets.loc.timeout", "more than 0 and at most 86400"),
        (PRESET % '"timeout": 1e999', "modelPresets.loc.timeout", "more than 0 and at most 86400"),
        (PRESET % '"timeout": Infinity', "modelPresets.loc.timeout", "more than 0 and at most 86400"),
        (PRESET % '"temperature": NaN', "modelPresets.loc.temperature", "0..2"),
        ('{"agents": {"defaults": {"model": "openai/m", "temperature": NaN}}}', "agents.defaults.temperature", "0..2"),
        ('{"agents": {"defaults": {"dream": {"intervalH": 1e999}}}}', "agents.defaults.dream.intervalH", "more than 0"),
    ],
)
def test_a_number_that_breaks_every_run_is_refused_at_load(
    dream: Dream, tmp_path: Path, text: str, field: str, allowed: str
) -> None:
    """`dream run` stops with exit 2 naming the field and what it allows (it used to end in an
    OverflowError traceback, or every batch failing as a bad request); `dream doctor` says so too."""
    code, err = _run(dream, tmp_path, text, "run", "--dry-run")
    assert code == 2 and field in err and f"(allowed: {allowed})" in err, err
    code, err = _run(dream, tmp_path, text, "doctor")
    assert code == 1 and field in err, err


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("maxBatchSize", "true"),
        ("maxBatchSize", '"5"'),
        ("maxBatchSize", "5.0"),
        ("enabled", '"no"'),
        ("enabled", "1"),
        ("intervalH", '"2"'),
        ("datedTrail", '"false"'),
    ],
)
def test_a_value_of_the_wrong_type_is_exit_2(dream: Dream, tmp_path: Path, key: str, value: str) -> None:
    code, err = _run(dream, tmp_path, '{"agents": {"defaults": {"dream": {"' + key + '": ' + value + "}}}}")
    assert code == 2 and f"agents.defaults.dream.{key}: Input should be a valid" in err, err


def test_an_integer_is_a_number_for_a_decimal_setting() -> None:
    config = parse_config({"agents": {"defaults": {"dream": {"intervalH": 3, "maxCostUsd": 0}}}}, "dream.json")
    assert config.dream.interval_h == 3.0 and config.dream.max_cost_usd == 0.0


def test_a_key_in_both_spellings_is_reported_as_given_twice(dream: Dream, tmp_path: Path) -> None:
    code, err = _run(
        dream, tmp_path, json.dumps({"agents": {"defaults": {"dream": {"max_batch_size": 3, "maxBatchSize": 4}}}})
    )
    assert code == 0, err
    assert "agents.defaults.dream.maxBatchSize is given twice, as max_batch_size and maxBatchSize" in err, err
    assert "maxBatchSize wins" in err and "unknown setting" not in err, err
    assert (
        parse_config(
            {"agents": {"defaults": {"dream": {"maxBatchSize": 4, "max_batch_size": 3}}}}, "f"
        ).dream.max_batch_size
        == 4
    )


def test_the_config_error_names_no_value() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({"modelPresets": {"x": {"model": "m", "temperature": "sk-secret-value"}}}, "f")
    assert "sk-secret-value" not in str(raised.value) and raised.value.exit_code == 2
