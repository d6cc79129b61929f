"""The fault soak (docs/reliability.md): hundreds of random trials that crash, starve and confuse
dream-memory, then check its invariants. It lives in the repository, not in the package: only
the injector (``dream_memory.testing.faults``) and the checks (``dream_memory.testing.invariants``)
ship. Run it with ``.venv/bin/python tests/faults/soak/run.py --trials 300 --seed 1``."""
