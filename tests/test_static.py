"""Static checks in CI: mypy (configured in pyproject.toml) and ruff must be clean over the project.

They run here so that the README's one test command covers them; each failure shows the tool's
own output.
"""

import subprocess
import sys

import pytest

from tests.support.paths import ROOT
from tests.support.typecheck import run_mypy


def test_mypy_is_clean() -> None:
    # [tool.mypy] in pyproject.toml: the package as it installs (ttft.*), each floor's strictness.
    report, status = run_mypy()
    assert status == 0, f"mypy found errors:\n{report}"


@pytest.mark.parametrize("args", [["check"], ["format", "--check", "--diff"]], ids=["check", "format"])
def test_ruff_is_clean(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *args, "."], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"ruff {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
