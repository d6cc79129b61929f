"""Skills as nanobot's own SkillsLoader reads them: the same always-on set as `dream context`,
and the frontmatter our offline engine writes reads back with its description whole."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from nanobot_driver import Nanobot

from dream_memory.testing import build_workspace

pytestmark = pytest.mark.nanobot

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dream"))
from test_always_on_guard import ALWAYS_FORMS  # noqa: E402

ALWAYS_SKILLS = """
import json, sys, tempfile
from pathlib import Path
from nanobot.agent.skills import SkillsLoader
loader = SkillsLoader(Path(sys.argv[1]), builtin_skills_dir=Path(tempfile.mkdtemp()))
names = sorted(loader.get_always_skills())
print(json.dumps({"always": names, "descriptions": {n: loader.get_skill_description(n) for n in sys.argv[2:]}}))
"""


def test_nanobots_always_on_skills_are_the_ones_dream_context_includes(
    nanobot: Nanobot, dream: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """One skill per always-on form, one with `always: false`, one without the key: nanobot's
    SkillsLoader.get_always_skills() and `dream context` pick the same skills; and a skill the
    offline engine wrote with a description holding ': ' and ' #' reads back whole in nanobot."""
    from dream_memory.adapters.offline import skill_text

    files = {
        f"skills/s{i}/SKILL.md": f"---\nname: s{i}\ndescription: form {form}\n{ALWAYS_FORMS[form]}\n---\n\nbody {i}\n"
        for i, form in enumerate(sorted(ALWAYS_FORMS))
    }
    files["skills/off/SKILL.md"] = "---\nname: off\ndescription: no\nalways: false\n---\n\nbody\n"
    files["skills/plain/SKILL.md"] = "---\nname: plain\ndescription: plain\n---\n\nbody\n"
    description = "Deploy: run make deploy #prod first"
    files["skills/deploy-steps/SKILL.md"] = skill_text("Deploy steps", description, None)
    ws = build_workspace(tmp_path / "ws", files=files)
    theirs = nanobot.run(ALWAYS_SKILLS, str(ws), "deploy-steps")
    assert theirs["always"] == sorted(f"s{i}" for i in range(len(ALWAYS_FORMS)))
    assert theirs["descriptions"] == {"deploy-steps": description}
    block = json.loads(dream("context", "--json", "--budget", "60000", "--workspace", str(ws)).stdout)["text"]
    ours = sorted(
        name for name in ["off", "plain", "deploy-steps", *theirs["always"]] if f"Skill: {name} (always on)" in block
    )
    assert ours == theirs["always"]
