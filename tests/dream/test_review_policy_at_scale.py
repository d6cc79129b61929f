"""The default write policy at scale: 50 scripted destructive changes to hand-written lines
(replace, delete, move) over 10 batches, none lands unreviewed, and the 50 additions made in the
same batches all land; a pinned section is never edited whatever the model asks."""

from __future__ import annotations

import json
from typing import Any

from dream_helpers import Cli, make_workspace, use_server

from dream_memory.testing.llm_server import Reply, ScriptedLLMServer, tool_call

BATCHES = 10
PER_BATCH = 5
HAND = [f"- hand line {i:03d}: the user wrote this about topic {i}" for i in range(2 * BATCHES * PER_BATCH)]
# After each batch's ten lines, one no batch touches: the changes of two batches never touch each
# other, which the merge rule would call a conflict when both are accepted (core.merge).
SPACER = "- spacer line {}: nobody edits this"
PROFILE = [line for b in range(BATCHES) for line in (*HAND[10 * b : 10 * b + 10], SPACER.format(b))]
USER = "# User\n\n## Profile\n\n" + "".join(line + "\n" for line in PROFILE) + "\n## Notes\n\n- notes start here\n"


class Destroyer:
    """Per batch: five destructive edits of hand-written lines (cycling replace, delete, move =
    swap with the next line) and five additions at the end of the file, in one tool round."""

    def __init__(self) -> None:
        self.batch = 0
        self.additions: list[str] = []
        self.targets: list[str] = []
        self.touched: list[set[str]] = []  # per change, the lines one of which a held change must remove

    def __call__(self, request: dict[str, Any]) -> Reply:
        if not request.get("tools"):
            return Reply(f"[USER] fact of batch {self.batch}")
        if any(m.get("role") == "tool" for m in request.get("messages") or []):
            return Reply("Done.")
        calls = []
        for i in range(PER_BATCH):
            n = self.batch * PER_BATCH + i
            target, neighbour = HAND[2 * n], HAND[2 * n + 1]
            self.targets.append(target)
            kind = n % 3
            # A swap is a move of either line: the diff may keep one in place and move the other.
            self.touched.append({target, neighbour} if kind == 2 else {target})
            if kind == 0:
                calls.append(tool_call("edit_file", path="USER.md", old_text=target, new_text=target + " (rewritten)"))
            elif kind == 1:
                calls.append(tool_call("edit_file", path="USER.md", old_text=target + "\n", new_text=""))
            else:
                swapped = f"{neighbour}\n{target}"
                calls.append(
                    tool_call("edit_file", path="USER.md", old_text=f"{target}\n{neighbour}", new_text=swapped)
                )
        added = [f"- added fact {self.batch}.{i}" for i in range(PER_BATCH)]
        self.additions += added
        last = "- notes start here" if self.batch == 0 else self.additions[-PER_BATCH - 1]
        calls.append(tool_call("edit_file", path="USER.md", old_text=last, new_text="\n".join([last, *added])))
        self.batch += 1
        return Reply(tool_calls=calls)


def test_no_destructive_change_to_hand_lines_lands_and_every_addition_does(isolated: Cli) -> None:
    """0 of 50 destructive changes to hand-written lines land without review; 50 of 50 additions
    land; every destroyed line is named in a held change's removed lines (a move: one of the two
    swapped lines). `dream review accept --all` then merges every one of them in."""
    ws = make_workspace(isolated, [f"- entry {i}" for i in range(BATCHES)])
    assert isolated.run("init").exit_code == 0
    (ws / "USER.md").write_text(USER, encoding="utf-8")
    model = Destroyer()
    with ScriptedLLMServer(responder=model) as server:
        use_server(isolated, server)
        code, report = isolated.run_json("run", "--batch-size", "1")
    assert code == 0, report["errors"]
    assert report["cursor_after"] == BATCHES and len(report["batches"]) == BATCHES
    assert len(model.targets) == BATCHES * PER_BATCH
    text = (ws / "USER.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert [line for line in lines if line.startswith("- hand line")] == HAND  # none changed, gone or moved
    assert all(a in lines for a in model.additions) and len(model.additions) == BATCHES * PER_BATCH
    _, listed = isolated.run_json("review", "--json")
    removed = {line for change in listed["changes"] for line in change["removed"]}
    assert all(lines & removed for lines in model.touched)
    # Neighbouring edits of one batch wait as one change (one diff hunk): fewer records than edits.
    assert listed["count"] == len(report["held"]) and all(c["path"] == "USER.md" for c in listed["changes"])

    accepted = isolated.run("review", "accept", "--all")
    assert accepted.exit_code == 0, accepted.output
    lines = (ws / "USER.md").read_text(encoding="utf-8").splitlines()
    assert [line for line in lines if line.startswith("- hand line")] == _intended()
    assert all(a in lines for a in model.additions)


def _intended() -> list[str]:
    """The hand lines as the model meant to leave them: every destructive change applied."""
    result = list(HAND)
    for n in reversed(range(BATCHES * PER_BATCH)):
        at = 2 * n
        if n % 3 == 0:
            result[at] += " (rewritten)"
        elif n % 3 == 1:
            del result[at]
        else:
            result[at], result[at + 1] = result[at + 1], result[at]
    return result


def test_a_pinned_section_is_never_edited_whatever_the_model_asks(isolated: Cli) -> None:
    """USER.md's "Profile" pinned: an edit inside it, one appending to it, one removing its
    heading and a write over the file are each refused with a tool error the model reads
    ("pinned"); the model's edit of another section lands."""
    ws = make_workspace(isolated, ["- the user likes jazz"])
    assert isolated.run("init").exit_code == 0
    (ws / "USER.md").write_text(USER, encoding="utf-8")
    attempts = [
        tool_call("edit_file", path="USER.md", old_text=HAND[3], new_text="- rewritten"),
        tool_call("edit_file", path="USER.md", old_text=HAND[-1], new_text=HAND[-1] + "\n- appended to profile"),
        tool_call("edit_file", path="USER.md", old_text="## Profile\n", new_text=""),
        tool_call("edit_file", path="USER.md", old_text="- notes start here", new_text="- notes start here\n- jazz"),
    ]

    def respond(request: dict[str, Any]) -> Reply:
        if not request.get("tools"):
            return Reply("[USER] likes jazz")
        if any(m.get("role") == "tool" for m in request.get("messages") or []):
            return Reply("Done.")
        return Reply(tool_calls=attempts)

    with ScriptedLLMServer(responder=respond) as server:
        config = use_server(isolated, server)
        data = json.loads(config.read_text(encoding="utf-8"))
        pin = {"files": {"USER.md": {"sections": {"Profile": {"pin": True}}}}}
        data["agents"]["defaults"]["dream"] = {"writePolicy": pin}
        config.write_text(json.dumps(data), encoding="utf-8")
        code, report = isolated.run_json("run")
        tool_results = [
            m["content"] for r in server.requests for m in r.body.get("messages", []) if m.get("role") == "tool"
        ]
    assert code == 0 and report["held"] == [], report
    refused = [t for t in tool_results if "is pinned: Dream never edits it" in t]
    assert len(refused) == 3, tool_results
    assert "'Profile'" in refused[0]
    text = (ws / "USER.md").read_text(encoding="utf-8")
    assert text == USER.replace("- notes start here\n", "- notes start here\n- jazz\n")
