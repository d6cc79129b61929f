"""``python -m dream_memory.testing.llm_server`` (see the package docstring)."""

if __name__ == "__main__":
    from dream_memory.testing.llm_server.cli import main

    raise SystemExit(main())
