#!/usr/bin/env python3
"""Kept for the old command line: docs/commands.md moved to docs/reference/commands.md, and
scripts/gen_reference.py writes it with the other generated reference pages (same ``--check``)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.argv[0] = str(Path(__file__).with_name("gen_reference.py"))
    runpy.run_path(sys.argv[0], run_name="__main__")
