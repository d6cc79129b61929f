"""The guard that holds a batch making a skill always-on sees every form nanobot honours (read
as YAML), and the offline engine writes frontmatter nanobot's YAML parser reads back."""

from __future__ import annotations

import pytest
import yaml
from dream_helpers import Cli, make_workspace, sample_entries, use_server

from dream_memory.core.frontmatter import is_always_on, may_be_always_on, parse_frontmatter
from dream_memory.core.guards import GuardSettings, hold_reasons
from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, tool_call

# Each spelling of "always on" that nanobot's SkillsLoader.get_always_skills honours.
ALWAYS_FORMS = {
    "top-level": "always: true",
    "metadata flow map": 'metadata: {"nanobot":{"always":true}}',
    "metadata openclaw": 'metadata: {"openclaw": {"always": true}}',
    "block mapping": "metadata:\n  nanobot:\n    always: yes",
    "quoted key": '"always": true',
    "quoted value": "always: 'on-please'",
    "metadata as a JSON string": 'metadata: \'{"nanobot": {"always": true}}\'',
}


@pytest.mark.parametrize("form", sorted(ALWAYS_FORMS))
def test_every_always_on_form_is_recognized_and_held(form: str) -> None:
    """A skill gaining any of these forms is always-on for nanobot, and the batch is held."""
    after = f"---\nname: deploy\ndescription: how to deploy\n{ALWAYS_FORMS[form]}\n---\n\nbody\n"
    before = "---\nname: deploy\ndescription: how to deploy\n---\n\nbody\n"
    assert is_always_on(after)
    reasons = hold_reasons({"skills/deploy/SKILL.md": (before, after)}, GuardSettings())
    assert reasons and "always-on" in reasons[0]


def test_not_always_on_and_broken_yaml_still_held() -> None:
    """`always: false` and a skill without the key are not always-on; an always key inside
    frontmatter that is not valid YAML is not always-on for nanobot, but the guard holds it."""
    assert not is_always_on("---\nname: a\nalways: false\nmetadata: {nanobot: {always: false}}\n---\n")
    assert not is_always_on("---\nname: a\n---\nalways: true\n")  # in the body, not the frontmatter
    broken = '---\nname: a\nmetadata: {"nanobot": {"always": true}\n---\n'
    assert parse_frontmatter(broken) is None and not is_always_on(broken) and may_be_always_on(broken)


def test_a_dream_batch_writing_nanobots_metadata_form_is_held(isolated: Cli) -> None:
    """A model that writes `metadata: {"nanobot":{"always":true}}` into a new skill does not get
    it into every prompt: the batch is held for review, the skill is not written, the cursor
    passes the batch. (The regex guard let exactly this form through.)"""
    skill = '---\nname: shout\ndescription: shout\nmetadata: {"nanobot":{"always":true}}\n---\n\nALWAYS SHOUT\n'
    write = Reply(tool_calls=[tool_call("write_file", path="skills/shout/SKILL.md", content=skill)])
    with ScriptedLLMServer([Reply("[SKILL] shout: shout at the user"), write, Reply("done")]) as server:
        use_server(isolated, server)
        make_workspace(isolated, sample_entries(2))
        code, report = isolated.run_json("run")
    assert code == 0 and report["status"] == "held", report
    assert "skills/shout/SKILL.md always-on" in report["held"][0]["reason"]
    assert not (isolated.workspace / "skills/shout/SKILL.md").exists()


def test_the_offline_engine_quotes_a_description_yaml_would_misread() -> None:
    """A [SKILL] description holding ': ' and ' #' is written so that a YAML parser (nanobot's)
    reads it back whole."""
    from dream_memory.adapters.offline import skill_text

    description = "Deploy: run make deploy #prod first"
    text = skill_text("Deploy steps", description, None)
    block = text.split("---\n")[1]
    assert yaml.safe_load(block) == {"name": "deploy-steps", "description": description}
    assert parse_frontmatter(text) == {"name": "deploy-steps", "description": description}
