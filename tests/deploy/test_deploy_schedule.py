"""`dream schedule` and core.schedule: intervalH/cron to one portable cron expression."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml
from deploy_helpers import BIN, REPO
from hypothesis import given, settings
from hypothesis import strategies as st

from dream_memory.core.schedule import (
    CronError,
    effective_schedule,
    interval_to_cron,
    render_github_workflow,
    validate_cron,
)

BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))


def expand(field: str, low: int, high: int) -> set[int]:
    """Enough of cron's semantics for the forms interval_to_cron produces and the strategies build."""
    out: set[int] = set()
    for item in field.split(","):
        base, _, step = item.partition("/")
        if base == "*":
            first, last = low, high
        elif "-" in base:
            first, last = (int(x) for x in base.split("-"))
        else:
            first = last = int(base)
        out.update(range(first, last + 1, int(step) if step else 1))
    return out


def run_times(expression: str, start: datetime, days: int) -> list[datetime]:
    minute, hour, dom, month, dow = (expand(f, lo, hi) for f, (lo, hi) in zip(expression.split(), BOUNDS, strict=True))
    dom_any, dow_any = expression.split()[2] == "*", expression.split()[4] == "*"
    times = []
    for d in range(days):
        day = start + timedelta(days=d)
        if day.month not in month:
            continue
        dom_ok, dow_ok = day.day in dom, (day.isoweekday() % 7) in dow
        if dom_any or dow_any:
            if not (dom_ok and dow_ok):
                continue
        elif not (dom_ok or dow_ok):
            continue
        times += [day.replace(hour=h, minute=m) for h in sorted(hour) for m in sorted(minute)]
    return times


def max_gap_hours(expression: str, days: int) -> float:
    times = run_times(expression, datetime(2027, 1, 1), days)
    return max((b - a).total_seconds() / 3600 for a, b in itertools.pairwise(times))


def test_examples_from_the_issue() -> None:
    """2 hours is `0 */2 * * *`; hours dividing 24 are exact; other hours round down."""
    assert interval_to_cron(2) == ("0 */2 * * *", True)
    assert interval_to_cron(1) == ("0 * * * *", True)
    assert interval_to_cron(24) == ("0 0 * * *", True)
    assert interval_to_cron(5) == ("0 */4 * * *", False)
    assert interval_to_cron(7) == ("0 */6 * * *", False)
    assert interval_to_cron(0.5) == ("*/30 * * * *", True)
    assert interval_to_cron(1.5) == ("0 * * * *", False)
    assert interval_to_cron(48) == ("0 0 */2 * *", False)
    assert interval_to_cron(24 * 40) == ("0 0 1 * *", False)


@settings(max_examples=60, deadline=None)
@given(st.floats(min_value=0.02, max_value=24 * 45, allow_nan=False, allow_infinity=False))
def test_interval_never_waits_longer_than_asked(hours: float) -> None:
    """Every intervalH gives a valid expression whose runs are never further apart than intervalH
    (checked over real calendar days, month ends included), and `exact` means exactly that often."""
    expression, exact = interval_to_cron(hours)
    assert validate_cron(expression) == expression
    days = 3 if hours < 1 else 70 if hours < 24 * 20 else 130
    gap = max_gap_hours(expression, days)
    assert gap <= max(hours, 1 / 60) + 1e-9
    if exact:
        assert gap == pytest.approx(hours)


def _item(low: int, high: int) -> st.SearchStrategy[str]:
    value = st.integers(low, high)
    return st.one_of(
        st.just("*"),
        value.map(str),
        st.tuples(value, value).map(lambda p: f"{min(p)}-{max(p)}"),
        st.integers(1, high - low + 1).map(lambda s: f"*/{s}"),
    )


@st.composite
def cron_expressions(draw: st.DrawFn) -> str:
    fields = []
    for low, high in BOUNDS:
        items = draw(st.lists(_item(low, high), min_size=1, max_size=3))
        fields.append(",".join(items))
    return " ".join(fields)


@settings(max_examples=200, deadline=None)
@given(cron_expressions())
def test_valid_expressions_pass_unchanged(expression: str) -> None:
    """Anything built from *, N, N-M, */S within range is accepted as written (normalised once)."""
    assert validate_cron(expression) == expression
    assert validate_cron("  " + expression.replace(" ", "   ") + " ") == expression


@settings(max_examples=200, deadline=None)
@given(cron_expressions(), st.integers(0, 4), st.integers(1, 200))
def test_out_of_range_names_the_field(expression: str, index: int, excess: int) -> None:
    fields = expression.split()
    fields[index] = str(BOUNDS[index][1] + excess)
    with pytest.raises(CronError) as caught:
        validate_cron(" ".join(fields))
    assert caught.value.field == index
    assert f"field {index + 1} (" in str(caught.value)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("* * * *", "has 4 fields"),
        ("0 0 * * * *", "has 6 fields"),
        ("61 * * * *", "field 1 (minute): 61 is out of range 0-59"),
        ("0 24 * * *", "field 2 (hour): 24 is out of range 0-23"),
        ("0 0 0 * *", "field 3 (day of month): 0 is out of range 1-31"),
        ("0 0 * 13 *", "field 4 (month): 13 is out of range 1-12"),
        ("0 0 * * 7", "field 5 (day of week): 7 is out of range 0-6 (use 0 for Sunday)"),
        ("0 0 ? * *", "field 3 (day of month)"),
        ("0 0 L * *", "field 3 (day of month)"),
        ("5/15 * * * *", "a step needs * or a range"),
        ("*/0 * * * *", "step 0"),
        ("0 5-2 * * *", "runs backwards"),
        ("0 0 * foo *", "neither a number nor one of jan"),
        ("@reboot", "@reboot"),
        ("@often", "unknown macro"),
        ("CRON_TZ=UTC 0 0 * * *", "time-zone prefix"),
        ("", "is empty"),
    ],
)
def test_bad_expressions_are_refused_with_the_reason(expression: str, fragment: str) -> None:
    with pytest.raises(CronError) as caught:
        validate_cron(expression)
    assert fragment in str(caught.value)
    assert str(caught.value).startswith("agents.defaults.dream.cron: ")


def test_names_and_macros() -> None:
    assert validate_cron("30 3 * JAN-mar MON-fri") == "30 3 * jan-mar mon-fri"
    assert validate_cron("@daily") == "0 0 * * *"
    assert validate_cron("@HOURLY") == "0 * * * *"


def test_cron_wins_over_interval() -> None:
    chosen = effective_schedule("15 4 * * *", 2)
    assert chosen.expression == "15 4 * * *"
    assert chosen.source == "agents.defaults.dream.cron"
    assert effective_schedule(None, 2).source == "agents.defaults.dream.intervalH"
    assert effective_schedule("  ", 3).expression == "0 */3 * * *"
    rounded = effective_schedule(None, 5)
    assert not rounded.exact
    assert rounded.note is not None
    assert "never more than 5 hours apart" in rounded.note
    assert effective_schedule("@weekly", 2).note is not None


def _dream(tmp_path: Path, *args: str, config: dict | None = None) -> subprocess.CompletedProcess[str]:
    argv = [str(BIN / "dream"), "schedule", "--workspace", str(tmp_path / "ws"), *args]
    if config is not None:
        path = tmp_path / "dream.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        argv += ["--config", str(path)]
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)


def _dream_config(**dream: object) -> dict:
    return {"agents": {"defaults": {"dream": dream}}}


def test_cli_default_interval_and_no_workspace_created(tmp_path: Path) -> None:
    """No config: the default intervalH 2; the command reads only and creates nothing."""
    proc = _dream(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "0 */2 * * *\n"
    assert not (tmp_path / "ws").exists()


def test_cli_json_and_rounding_note(tmp_path: Path) -> None:
    proc = _dream(tmp_path, "--json", config=_dream_config(intervalH=5))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["expression"] == "0 */4 * * *"
    assert data["exact"] is False
    assert data["source"] == "agents.defaults.dream.intervalH"
    assert "note:" in proc.stderr


def test_cli_cron_wins_and_snake_case_keys(tmp_path: Path) -> None:
    proc = _dream(tmp_path, config=_dream_config(interval_h=6, cron="30 3 * * 1-5"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "30 3 * * 1-5\n"


def test_cli_bad_cron_is_exit_2_naming_the_field(tmp_path: Path) -> None:
    proc = _dream(tmp_path, config=_dream_config(cron="0 25 * * *"))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "agents.defaults.dream.cron: field 2 (hour): 25 is out of range 0-23" in proc.stderr


def test_cli_bad_interval_is_exit_2(tmp_path: Path) -> None:
    proc = _dream(tmp_path, config=_dream_config(intervalH=0))
    assert proc.returncode == 2
    assert "intervalH" in proc.stderr


def test_cli_bad_format_is_exit_2(tmp_path: Path) -> None:
    assert _dream(tmp_path, "--format", "yaml").returncode == 2


def test_cli_github_is_the_example_workflow_with_the_schedule(tmp_path: Path) -> None:
    """`--format github` prints docs/examples/dream-pr.yml with the configured expression."""
    example = (REPO / "docs/examples/dream-pr.yml").read_text(encoding="utf-8")
    assert _dream(tmp_path, "--format", "github").stdout == example
    proc = _dream(tmp_path, "--format", "github", config=_dream_config(cron="17 3 * * *"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == example.replace('- cron: "0 */2 * * *"', '- cron: "17 3 * * *"')


def test_cli_github_with_a_pinned_action_has_no_ignore_comment(tmp_path: Path) -> None:
    sha = "0123456789abcdef0123456789abcdef01234567"
    proc = _dream(tmp_path, "--format", "github", "--action", f"me/dream-memory@{sha}")
    assert f"uses: me/dream-memory@{sha}\n" in proc.stdout
    assert "zizmor: ignore[unpinned-uses]" not in proc.stdout
    assert "zizmor: ignore[unpinned-uses]" in render_github_workflow("0 * * * *", "me/dream-memory@v1")


def test_cli_k8s_is_the_pvc_cronjob_with_the_schedule(tmp_path: Path) -> None:
    manifest = (REPO / "deploy/kubernetes/cronjob-pvc.yaml").read_text(encoding="utf-8")
    assert _dream(tmp_path, "--format", "k8s").stdout == manifest
    proc = _dream(tmp_path, "--format", "k8s", "--image", "reg/dream:1", config=_dream_config(intervalH=12))
    assert proc.returncode == 0, proc.stderr
    expected = manifest.replace('schedule: "0 */2 * * *"', 'schedule: "0 */12 * * *"')
    assert proc.stdout == expected.replace("image: dream-memory:0.1.0", "image: reg/dream:1")


def test_help_and_the_command_import_no_litellm(tmp_path: Path) -> None:
    """`dream schedule` (and its --help) stays light: litellm is never imported."""
    code = (
        "import sys\n"
        "from dream_memory.entrypoints.cli import cli\n"
        "for args in (['schedule', '--help'], ['schedule', '--workspace', sys.argv[1]]):\n"
        "    try:\n"
        "        cli.main(args, prog_name='dream', standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "assert 'litellm' not in sys.modules, 'litellm was imported'\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "ws")], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "intervalH" in proc.stdout
    assert "0 */2 * * *" in proc.stdout


def test_a_sub_minute_interval_says_what_cron_can_do() -> None:
    """intervalH below a minute: the note must not promise a gap that every-minute cannot keep."""
    chosen = effective_schedule(None, 0.001)
    assert chosen.expression == "* * * * *"
    assert chosen.note is not None
    assert "never more than 0.001 hours" not in chosen.note
    assert "once a minute" in chosen.note
    assert "0.0167 hours" in chosen.note


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--format", "k8s", "--image", "reg/x:1 # comment"), "--image 'reg/x:1 # comment' is not a container image"),
        (("--format", "k8s", "--image", "x\n  hostNetwork: true"), "--image 'x\\n  hostNetwork: true' is not"),
        (("--format", "k8s", "--image", "Reg/Dream:1"), "is not a container image reference"),
        (("--format", "k8s", "--image", ""), "is not a container image reference"),
        (("--format", "github", "--action", "not a ref"), "--action 'not a ref' is not an action reference"),
        (("--format", "github", "--action", "me/dream-memory"), "is not an action reference"),
        (("--format", "github", "--action", "me/x@v1\n  - run: id"), "is not an action reference"),
        (("--format", "cron", "--image", "foo"), "--image is for --format k8s; --format cron has no place"),
        (("--format", "github", "--image", "foo"), "--image is for --format k8s"),
        (("--format", "k8s", "--action", "me/x@v1"), "--action is for --format github"),
        (("--action", "me/x@v1"), "--action is for --format github; --format cron"),
    ],
)
def test_cli_bad_image_or_action_is_exit_2_and_prints_nothing(
    tmp_path: Path, args: tuple[str, ...], fragment: str
) -> None:
    """A value that would break or inject into the YAML, or an option the format drops, is refused
    before anything is printed, with what a good value looks like."""
    proc = _dream(tmp_path, *args)
    assert proc.returncode == 2, proc.stdout
    assert proc.stdout == ""
    assert fragment in proc.stderr
    assert "hint: " in proc.stderr


@pytest.mark.parametrize(
    "image",
    ["1.0", "true", "reg.example.com:5000/team/dream-memory:1.2", "dream@sha256:" + "ab" * 32, "localhost/x__y:V_1"],
)
def test_cli_k8s_image_reaches_the_manifest_as_that_string(tmp_path: Path, image: str) -> None:
    """Any valid reference comes out as exactly that string, quoted where YAML would read it as
    something else (1.0 is a float, true a boolean)."""
    proc = _dream(tmp_path, "--format", "k8s", "--image", image)
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    cronjob = next(d for d in docs if d["kind"] == "CronJob")
    containers = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert [c["image"] for c in containers] == [image]


def test_cli_github_action_reaches_the_workflow_as_that_string(tmp_path: Path) -> None:
    proc = _dream(tmp_path, "--format", "github", "--action", "me/dream-memory/sub@release/v1.2+b")
    assert proc.returncode == 0, proc.stderr
    workflow = yaml.safe_load(proc.stdout)
    uses = [s["uses"] for s in workflow["jobs"]["dream"]["steps"] if "dream-memory/sub" in s.get("uses", "")]
    assert uses == ["me/dream-memory/sub@release/v1.2+b"]
