"""Every default a user can change (a config key, a flag or a variable), and the ranges that the
config schema and the services share. A leaf: it imports nothing of ours.

Adding a setting touches this file (its value and range) and ``settings/schema.py`` (its field);
``docs/reference/config.md`` is generated from the schema (``scripts/gen_reference.py``).
Limits no setting changes (lines per read, results per search at most, ...) are contract rules
and stay named in ``core``.
"""

from __future__ import annotations

from typing import Final

# --- the model (modelPresets.<name>) -------------------------------------------------------------
OFFLINE_MODEL: Final = "offline"  # the built-in deterministic engine's model name
MODEL_TEMPERATURE: Final = 0.0
MODEL_TEMPERATURE_MAX: Final = 2.0  # the providers' own ceiling (OpenAI's; most others are lower)
MODEL_MAX_TOKENS: Final = 4096  # the reply's token limit (maxTokens)
MODEL_TIMEOUT_S: Final = 120.0
# A day: longer than any answer is worth waiting for, and far below what a thread's join accepts
# (threading.TIMEOUT_MAX, about 292 years), which a timeout of 1e12 overflowed on every call.
MODEL_TIMEOUT_MAX_S: Final = 86_400.0
MODEL_MAX_RETRIES: Final = 3
MODEL_MAX_RETRIES_MAX: Final = 10
MODEL_RETRY_BASE_S: Final = 1.0
MODEL_EDIT_PROTOCOL: Final = "tools"  # tools | text | auto | facts
# A model whose context window is not configured is assumed to hold this many tokens: the common
# 64K class, and the nanobot agents' own default.
MODEL_CONTEXT_WINDOW_FALLBACK: Final = 65_536

# --- Dream (agents.defaults.dream) ---------------------------------------------------------------
INTERVAL_H: Final = 2
BATCH_SIZE: Final = 20  # history entries per batch
BATCH_SIZE_MAX: Final = 20
MAX_ITERATIONS: Final = 10  # tool-call rounds per batch
MAX_ITERATIONS_MAX: Final = 200
FILE_CONTEXT_TOKENS: Final = 6000
FILE_CONTEXT_TOKENS_MIN: Final = 200
BATCH_TOKENS: Final = 12000
BATCH_TOKENS_MIN: Final = 500
MAX_HISTORY_ENTRIES: Final = 1000
MAX_HISTORY_ENTRIES_MIN: Final = 10
GIT_AUTHOR: Final = "dream-memory <dream-memory@localhost>"
DELETION_GUARD_MAX_SHARE: Final = 0.3
DELETION_GUARD_MIN_LINES: Final = 10
DELETION_GUARD_WINDOW_BATCHES: Final = 10
DELETION_GUARD_WINDOW_BATCHES_MAX: Final = 1000
# writePolicy: what each kind of change does ("apply" lands it, "hold" waits for `dream review`)
WRITE_POLICY_ADD: Final = "apply"  # new lines
WRITE_POLICY_MANUAL: Final = "hold"  # replacing or removing a line a person wrote
WRITE_POLICY_DREAM: Final = "apply"  # replacing or removing a recent Dream line
WRITE_POLICY_DREAM_OLD: Final = "apply"  # ... a Dream line older than dreamAgeDays
WRITE_POLICY_DREAM_AGE_DAYS: Final = 30

# --- the Consolidator (agents.defaults.consolidate) ----------------------------------------------
# Any positive budget: a small one only folds a session often (examples/agent.py folds a
# three-turn demo at 40), and the command line and the API always took one that small.
CONSOLIDATE_BUDGET_MIN: Final = 1

# --- the context block (agents.defaults.context, dream context, memory://context) --------------
CONTEXT_BUDGET: Final = 8000
CONTEXT_BUDGET_MIN: Final = 200
CONTEXT_BUDGET_MAX: Final = 200_000

# --- reading and versions ------------------------------------------------------------------------
SEARCH_MAX_RESULTS: Final = 10  # dream search --max-results, memory_search maxResults
RESTORE_LIST_LIMIT: Final = 10  # dream restore (no revision): versions listed
RESTORE_LIST_LIMIT_MAX: Final = 1000
