"""The wheel a user installs holds the package and its data, and only the fault injector of the
fault suite: the soak that drives it lives under tests/ and stays out."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow  # builds the wheel (pip, build isolation): about 30 s


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """The wheel `pip wheel --no-deps .` builds from this checkout (build isolation: the venv's
    own setuptools may be too old for the pyproject's license field)."""
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--disable-pip-version-check",
            "--no-deps",
            str(REPO),
            "-w",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if built.returncode != 0 and "No matching distribution" in built.stderr:
        pytest.skip(f"no package index for the build requirements: {built.stderr.strip().splitlines()[-1]}")
    assert built.returncode == 0, built.stderr
    (path,) = out.glob("dream_memory-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_holds_the_package_and_its_data(wheel: zipfile.ZipFile) -> None:
    """The console scripts' modules, the typed marker and the bundled sample are in the wheel."""
    names = set(wheel.namelist())
    for needed in ("dream_memory/__init__.py", "dream_memory/py.typed", "dream_memory/entrypoints/cli/__init__.py"):
        assert needed in names, f"{needed} is missing from the wheel"
    assert any(n.startswith("dream_memory/data/sample/") for n in names), "the bundled sample is missing"


def test_the_wheel_holds_no_fault_soak_and_no_tests(wheel: zipfile.ZipFile) -> None:
    """`unzip -l` of the wheel shows no soak and no tests, and the fault injector that stays
    (dream_memory/testing/faults.py) is a small module, not the soak."""
    names = wheel.namelist()
    assert not [n for n in names if "soak" in n or n.startswith("tests/")], names
    faults = wheel.read("dream_memory/testing/faults.py").decode("utf-8")
    assert len(faults.splitlines()) < 300, f"dream_memory/testing/faults.py has {len(faults.splitlines())} lines"
