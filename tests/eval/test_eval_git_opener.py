"""The evaluation reads a workspace's git history through the opener it is given (the runtime's),
and opens the repository itself only when it is given none."""

from __future__ import annotations

import subprocess
from pathlib import Path

from dream_memory.adapters.git import GitStore
from dream_memory.app.evaluation import builtin_scenarios_root, canary_value, check_workspace, load_scenario


def _committed_secret(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    scenario = load_scenario(builtin_scenarios_root() / "project")
    value = canary_value(scenario, scenario.canaries[0])
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "MEMORY.md").write_text(f"# Memory\n\n- bucket key {value}\n", encoding="utf-8")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@localhost"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "memory: init"], check=True)
    (root / "memory" / "MEMORY.md").write_text("# Memory\n\n- bucket key [REDACTED:aws_access_key]\n", encoding="utf-8")
    return root, {spec.placeholder: value for spec in scenario.canaries}


def test_the_history_checks_read_git_through_the_given_opener(tmp_path: Path) -> None:
    """A secret committed once is found in git by the default opener; an opener that finds no
    repository is the one asked (once, for this workspace), and then the commit is not seen."""
    root, secrets = _committed_secret(tmp_path)
    scenario = load_scenario(builtin_scenarios_root() / "project")
    by_default = {i.check: i for i in check_workspace(scenario, root, [], secrets) if i.check == "no_secret"}
    assert not by_default["no_secret"].passed

    asked: list[Path] = []

    def no_repository(path: Path) -> GitStore | None:
        asked.append(path)
        return None

    items = check_workspace(scenario, root, [], secrets, open_git=no_repository)
    (secret,) = [i for i in items if i.check == "no_secret"]
    assert asked == [root]
    assert secret.passed  # the only copy left is in the commit the opener did not show
