"""Held changes and the batches that made them: restoring a batch discards what it held, in the
same restore commit, so `dream review` never offers a change of a reverted batch; and the same
change asked for again is not held twice (offline engine, real git, the CLI)."""

from __future__ import annotations

from pathlib import Path

from dream_helpers import Cli, git, make_workspace

HAND_LINE = "- User's timezone is CET."
USER = "# User\n\n## Profile\n\n" + HAND_LINE + "\n\n## Preferences\n\n## Work Context\n"
FACT = "- [durable] User's timezone is EET (was CET) since moving to Helsinki."


def _held_once(isolated: Cli, also: str | None = None) -> tuple[Path, str]:
    """A hand-written timezone line, then a batch that would replace it (and, with ``also``, add
    that fact's line): the policy holds the replacement. Returns the workspace and the held
    change's id."""
    ws = make_workspace(isolated, [FACT, *([also] if also else [])])
    assert isolated.run("init").exit_code == 0
    (ws / "USER.md").write_text(USER, encoding="utf-8")
    code, report = isolated.run_json("run", "--model", "offline")
    assert code == 0 and len(report["held"]) == 1, report
    return ws, report["held"][0]["id"]


def test_restoring_a_batch_discards_what_it_held_in_the_same_commit(isolated: Cli) -> None:
    """`dream restore <the batch>` removes its held change (record and state entry) in the revert
    commit, says so, and `dream review` then lists nothing; accepting the old id is refused
    (exit 2) and the hand-written line stays."""
    ws, held_id = _held_once(isolated)
    batch = git(ws, "log", "-1", "--format=%H").strip()

    restored = isolated.run("restore", batch)
    assert restored.exit_code == 0, restored.output
    assert f"discarded the held change(s) {held_id} of the undone batch" in restored.stdout
    assert not (ws / "memory" / ".dream_held" / held_id).exists()
    body = git(ws, "log", "-1", "--format=%s%n%b")
    assert body.startswith(f"dream: revert {batch[:10]}") and f"Discarded-Held: {held_id}" in body
    assert git(ws, "status", "--porcelain") == ""
    code, listed = isolated.run_json("review", "--json")
    assert code == 0 and listed["count"] == 0, listed
    accepted = isolated.run("review", "accept", held_id)
    assert accepted.exit_code == 2
    assert HAND_LINE in (ws / "USER.md").read_text(encoding="utf-8")


def test_the_same_change_asked_for_again_is_not_held_twice(isolated: Cli) -> None:
    """The same fact appended and dreamt again: its change (same file, same lines removed and
    added) is already waiting, so review still lists one change, and the batch's notes name the
    one waiting."""
    ws, held_id = _held_once(isolated)
    assert isolated.run("append", FACT).exit_code == 0
    code, report = isolated.run_json("run", "--model", "offline")
    assert code == 0, report
    assert report["held"] == [] and report["cursor_after"] == 2, report
    notes = report["batches"][0]["notes"]
    assert any(f"already waiting for review as {held_id}" in n for n in notes), notes
    code, listed = isolated.run_json("review", "--json")
    assert code == 0 and [c["id"] for c in listed["changes"]] == [held_id], listed
    assert git(ws, "status", "--porcelain") == ""


def test_restoring_the_restore_brings_the_held_change_back(isolated: Cli) -> None:
    """A restore can be restored in turn, which brings the batch back: its held change too, which
    used to stay discarded while the batch's lines returned. Accepting it then works."""
    ws, held_id = _held_once(isolated)
    batch = git(ws, "log", "-1", "--format=%H").strip()
    assert isolated.run("restore", batch).exit_code == 0
    revert = git(ws, "log", "-1", "--format=%H").strip()

    back = isolated.run("restore", revert)
    assert back.exit_code == 0, back.output
    assert f"the held change(s) {held_id} that the undone commit settled wait for review again" in back.stdout
    assert (ws / "memory" / ".dream_held" / held_id / "change.json").is_file()
    assert git(ws, "status", "--porcelain") == ""
    code, listed = isolated.run_json("review", "--json")
    assert code == 0 and [c["id"] for c in listed["changes"]] == [held_id], listed
    accepted = isolated.run("review", "accept", held_id)
    assert accepted.exit_code == 0, accepted.output
    assert "EET" in (ws / "USER.md").read_text(encoding="utf-8")


def test_restoring_the_first_batch_keeps_a_change_a_later_batch_asked_for_again(isolated: Cli) -> None:
    """Batch 1 added a line and held a change; batch 2 asked for the same change, which was not held
    a second time. Restoring batch 1 discarded the change, and with it what batch 2 asked for, which
    no run would ask for again (its entries are consumed) (found by an independent review). It now
    waits for review still, and the restore says for which batch; undoing batch 2 as well
    discards it."""
    ws, held_id = _held_once(isolated, also="- [durable] User likes jazz.")
    first = git(ws, "log", "-1", "--format=%H").strip()
    assert isolated.run("append", FACT).exit_code == 0
    code, report = isolated.run_json("run", "--model", "offline")
    assert code == 0 and report["held"] == [], report
    second = git(ws, "log", "-1", "--format=%H").strip()
    assert f"Dream-Held-Again: {held_id}" in git(ws, "log", "-1", "--format=%b")

    restored = isolated.run("restore", first)
    assert restored.exit_code == 0, restored.output
    assert f"kept the held change {held_id} waiting for review: batch {second[:10]}, which stays" in restored.stdout
    assert "discarded" not in restored.stdout
    assert "jazz" not in (ws / "USER.md").read_text(encoding="utf-8")
    code, listed = isolated.run_json("review", "--json")
    assert code == 0 and [c["id"] for c in listed["changes"]] == [held_id], listed
    assert git(ws, "status", "--porcelain") == ""

    both = isolated.run("restore", second)  # nothing that stays asks for it now
    assert both.exit_code == 0, both.output
    assert f"discarded the held change(s) {held_id}" in both.stdout
    code, listed = isolated.run_json("review", "--json")
    assert code == 0 and listed["count"] == 0, listed
    assert git(ws, "status", "--porcelain") == ""


def test_a_reject_or_an_accept_can_be_undone_and_the_change_waits_again(isolated: Cli) -> None:
    """`dream restore` listed a reject among Dream's commits but refused it ("changed no memory
    file"), so a change rejected by mistake was only in git history (found by an independent
    review). Undoing a reject, or an accept (with the lines it wrote), puts the change back to
    wait for review."""
    ws, held_id = _held_once(isolated)
    assert isolated.run("review", "reject", held_id).exit_code == 0
    reject = git(ws, "log", "-1", "--format=%H").strip()
    assert isolated.run_json("review", "--json")[1]["count"] == 0

    undone = isolated.run("restore", reject)
    assert undone.exit_code == 0, undone.output
    assert f"the held change(s) {held_id} that the undone commit settled wait for review again" in undone.stdout
    code, listed = isolated.run_json("review", "--json")
    assert code == 0 and [c["id"] for c in listed["changes"]] == [held_id], listed
    assert git(ws, "status", "--porcelain") == ""

    assert isolated.run("review", "accept", held_id).exit_code == 0
    assert "EET" in (ws / "USER.md").read_text(encoding="utf-8")
    accept = git(ws, "log", "-1", "--format=%H").strip()
    undone = isolated.run("restore", accept)
    assert undone.exit_code == 0, undone.output
    assert HAND_LINE in (ws / "USER.md").read_text(encoding="utf-8")
    assert "EET" not in (ws / "USER.md").read_text(encoding="utf-8")
    code, listed = isolated.run_json("review", "--json")
    assert code == 0 and [c["id"] for c in listed["changes"]] == [held_id], listed
    assert isolated.run("review", "accept", held_id).exit_code == 0  # and it can be decided again
    assert "EET" in (ws / "USER.md").read_text(encoding="utf-8")
    assert git(ws, "status", "--porcelain") == ""


def test_restoring_only_the_batch_that_asked_again_leaves_the_change_to_the_one_that_held_it(isolated: Cli) -> None:
    """Batch 2 only asked again for the change batch 1 holds: undoing batch 2 leaves it waiting, and
    says nothing about it (it said "kept ... the later batch <batch 1>") (found by a review)."""
    ws, held_id = _held_once(isolated)
    assert isolated.run("append", FACT).exit_code == 0
    assert isolated.run("append", "- [durable] User likes jazz.").exit_code == 0
    assert isolated.run_json("run", "--model", "offline")[0] == 0
    second = git(ws, "log", "-1", "--format=%H").strip()
    assert f"Dream-Held-Again: {held_id}" in git(ws, "log", "-1", "--format=%b")
    restored = isolated.run("restore", second)
    assert restored.exit_code == 0, restored.output
    assert held_id not in restored.stdout, restored.stdout
    code, listed = isolated.run_json("review", "--json")
    assert code == 0 and [c["id"] for c in listed["changes"]] == [held_id], listed


def test_undoing_a_reject_brings_back_no_duplicate_and_no_change_of_an_undone_batch(isolated: Cli) -> None:
    """Undoing a reject brings its change back only while the batch that held it stays, and not
    when the same change waits under another id: review listed it twice, or offered a change of
    an undone batch (found by a review)."""
    ws, held_id = _held_once(isolated, also="- [durable] User likes jazz.")
    batch = git(ws, "log", "-1", "--format=%H").strip()
    assert isolated.run("review", "reject", held_id).exit_code == 0
    reject = git(ws, "log", "-1", "--format=%H").strip()
    assert isolated.run("append", FACT).exit_code == 0
    code, report = isolated.run_json("run", "--model", "offline")
    assert code == 0 and len(report["held"]) == 1, report
    again = report["held"][0]["id"]

    undone = isolated.run("restore", reject)
    assert f"the held change {held_id} stays settled: the same change waits for review as {again}" in undone.stdout
    code, listed = isolated.run_json("review", "--json")
    assert [c["id"] for c in listed["changes"]] == [again], listed
    assert git(ws, "status", "--porcelain") == ""

    assert isolated.run("review", "reject", again).exit_code == 0
    assert isolated.run("restore", batch).exit_code == 0  # the batch that held the first one
    undone = isolated.run("restore", reject)
    assert f"the held change {held_id} stays settled: the batch that held it is undone" in undone.stdout
    code, listed = isolated.run_json("review", "--json")
    assert listed["count"] == 0, listed
