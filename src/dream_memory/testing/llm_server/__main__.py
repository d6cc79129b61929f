"""``python -m dream_memory.testing.llm_server`` (see the package docstring)."""

from dream_memory.testing.llm_server.cli import main

raise SystemExit(main())
