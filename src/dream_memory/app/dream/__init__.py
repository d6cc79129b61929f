"""Dream, the batch job that turns history.jsonl into memory files: one package, one module per
seam (``run`` the loop over batches, ``phases`` and ``protocols`` the two model phases,
``landing`` how a batch ends in git, ``report``, ``budget``, ``prompting``, ``options``).

The faces import from here: ``run_dream``, ``DreamContext``, ``DreamOptions``, ``DreamReport``.
"""

from dream_memory.app.dream.budget import BudgetExceeded, MeteredModel
from dream_memory.app.dream.options import EDIT_PROTOCOLS, DreamContext, DreamOptions
from dream_memory.app.dream.phases import ModelSaid
from dream_memory.app.dream.prompting import (
    GUIDE_MAX_CHARS,
    GUIDE_TRUNCATED,
    builtin_guide,
    guide_in_use,
    guide_note,
)
from dream_memory.app.dream.report import (
    STATUS_BUDGET,
    STATUS_DRY_RUN,
    STATUS_FAILED,
    STATUS_HELD,
    STATUS_LOCKED,
    STATUS_NOTHING,
    STATUS_OK,
    STATUS_SET_ASIDE,
    BatchRecord,
    DreamReport,
)
from dream_memory.app.dream.run import run_dream

__all__ = [
    "EDIT_PROTOCOLS",
    "GUIDE_MAX_CHARS",
    "GUIDE_TRUNCATED",
    "STATUS_BUDGET",
    "STATUS_DRY_RUN",
    "STATUS_FAILED",
    "STATUS_HELD",
    "STATUS_LOCKED",
    "STATUS_NOTHING",
    "STATUS_OK",
    "STATUS_SET_ASIDE",
    "BatchRecord",
    "BudgetExceeded",
    "DreamContext",
    "DreamOptions",
    "DreamReport",
    "MeteredModel",
    "ModelSaid",
    "builtin_guide",
    "guide_in_use",
    "guide_note",
    "run_dream",
]
