"""The README's examples, run as written against `serve --agent scenario
--statewire-examples`: only the address (the test server's port) and the
token (the test server requires one) are replaced."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SCENARIOS, TOKEN, Servers

README = Path(__file__).resolve().parents[1] / "README.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_the_readme_has_its_examples() -> None:
    assert len(EXAMPLES) == 5


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_a_readme_example_runs_as_written(serve: Servers, tmp_path: Path, index: int) -> None:
    server = serve("--agent", "scenario", "--scenarios", str(SCENARIOS), "--statewire-examples")
    code = EXAMPLES[index].replace("http://127.0.0.1:8080", server.base).replace('"dev-token"', f'"{TOKEN}"')
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip(), "the example printed what it promised"
