"""The retention evaluation behind ``dream eval``: does a model keep what matters, and only that?

A scenario (``data/eval/scenarios/<name>/scenario.json`` plus its session files) is a few dated
conversations and the questions a good memory answers afterwards, LongMemEval-style. For each day,
in order, the day's sessions are copied into a fresh workspace, consolidated (``--force``: every
message up to the last user turn, which stays in the session like a live agent's tail) and
Dreamt, exactly as a nightly job would. Then the memory is checked, deterministically, with no
model in the loop:

- ``runs``: every consolidation and Dream run finished cleanly (not failed, locked, held, set aside,
  and no slice archived raw because the model could not summarize it);
- ``kept``: each expected answer is in the memory files;
- ``right_file``: ... in the file it belongs to (USER.md, SOUL.md or memory/MEMORY.md);
- ``no_duplicates``: ... on exactly one line;
- ``superseded_gone``: each superseded or forgotten value is gone from every memory file;
- ``superseded_in_history``: ... yet still in the git history (it was remembered, then replaced);
- ``noise_left_out``: small talk and one-off requests never reached memory;
- ``no_secret``: the planted secret is in no commit (any file, any message), no memory file and
  not in history.jsonl or its archive.

The score is the share of passed items; a scenario passes when its score reaches the scenario's
``threshold`` and every check it lists as ``required`` passes in full.

The use case receives a factory that opens a workspace (the entrypoint builds it from the wiring)
and one that opens a workspace's repository to read it, so it never builds adapters itself.
Modules: ``scenarios`` (reading them), ``run``, ``checks``, ``report``.
"""

from dream_memory.app.evaluation.checks import GitHistory, baseline_items, check_memory, check_workspace, memory_files
from dream_memory.app.evaluation.report import EvalReport, Item, Run, ScenarioResult
from dream_memory.app.evaluation.run import EvalWorkspace, OpenWorkspace, run_evaluation, run_scenario
from dream_memory.app.evaluation.scenarios import (
    CHECK_IDS,
    CHECKS,
    FILES,
    QUESTION_KINDS,
    SCENARIO_FILE,
    SESSIONS_FOLDER,
    CanarySpec,
    Day,
    Question,
    Scenario,
    builtin_scenarios_root,
    canary_value,
    load_scenario,
    load_scenarios,
)

__all__ = [
    "CHECKS",
    "CHECK_IDS",
    "FILES",
    "QUESTION_KINDS",
    "SCENARIO_FILE",
    "SESSIONS_FOLDER",
    "CanarySpec",
    "Day",
    "EvalReport",
    "EvalWorkspace",
    "GitHistory",
    "Item",
    "OpenWorkspace",
    "Question",
    "Run",
    "Scenario",
    "ScenarioResult",
    "baseline_items",
    "builtin_scenarios_root",
    "canary_value",
    "check_memory",
    "check_workspace",
    "load_scenario",
    "load_scenarios",
    "memory_files",
    "run_evaluation",
    "run_scenario",
]
