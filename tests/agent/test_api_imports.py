"""The Python API is cheap to import: no litellm until a model is called."""

from __future__ import annotations

import subprocess
import sys


def _modules_after(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(done.stdout.split())


def test_import_dream_memory_does_not_import_litellm() -> None:
    """`import dream_memory` loads neither litellm nor dulwich nor pydantic."""
    loaded = _modules_after("import dream_memory")
    assert not {"litellm", "dulwich", "pydantic"} & loaded


def test_the_workspace_api_works_without_litellm() -> None:
    """Creating a workspace, appending, reading the context and running Dream offline never
    import litellm: only a call to a remote model does."""
    code = (
        "import tempfile; from dream_memory import Workspace\n"
        "d = tempfile.mkdtemp(); ws = Workspace(d + '/ws', env={'HOME': d}); ws.init()\n"
        "ws.append('- [durable] User prefers tea'); ws.dream(model='offline'); ws.context(budget=500)\n"
    )
    assert "litellm" not in _modules_after(code)
