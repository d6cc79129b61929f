"""Where a memory line comes from, as values: who wrote a commit (its kind), and the record that
ties the lines a Dream batch wrote to the facts that asked for them and the history entries the
facts were learnt from (docs/provenance.md).
"""

from __future__ import annotations

import re

KIND_DREAM = "dream"
KIND_MANUAL = "manual"
KIND_INIT = "init"
KIND_OTHER = "other"

INIT_SUBJECT = "memory: init"
MANUAL_SUBJECT = "memory: manual edits"

# The commits whose content Dream wrote: a batch (``dream: 12..18: USER.md +2 -0``), or a held
# batch a person accepted (``dream: apply held ...``: the lines are still the model's).
_DREAM_SUBJECT = re.compile(r"^dream: (?:\d+\.\.\d+: |apply held )")
# Every other commit dream-memory makes starts with one of these (reverts, compaction, nothing
# new, set aside, discarded holds): bookkeeping, not lines anyone learnt.
_OURS = ("dream: ", "memory: ")


def commit_kind(message: str) -> str:
    """ "init", "manual", "dream" or "other" for a commit message.

    A commit dream-memory did not make (a person's own ``git commit``, an agent on another
    platform) counts as a hand edit, as ``memory: manual edits`` does.
    """
    subject = message.split("\n", 1)[0].strip()
    if subject == INIT_SUBJECT:
        return KIND_INIT
    if subject == MANUAL_SUBJECT:
        return KIND_MANUAL
    if _DREAM_SUBJECT.match(subject):
        return KIND_DREAM
    if subject.startswith(_OURS):
        return KIND_OTHER
    return KIND_MANUAL
