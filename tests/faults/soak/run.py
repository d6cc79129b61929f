#!/usr/bin/env python3
"""Run the fault soak: ``.venv/bin/python tests/faults/soak/run.py --trials 300 --seed 1 [--markdown]``
(see docs/reliability.md for every option)."""

from __future__ import annotations

import sys
from pathlib import Path

# The soak is a package beside the tests that import it (tests/faults): put that folder first.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from soak.suite import main

if __name__ == "__main__":
    sys.exit(main())
