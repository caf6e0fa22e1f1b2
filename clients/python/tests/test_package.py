"""The package itself: its wire types match `ledgerwire schema` of this
binary (regenerated with the pinned generator and compared byte for byte),
and `mypy --strict` finds nothing in it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import binary

PACKAGE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PACKAGE / "scripts"))
import gen_wire  # noqa: E402


def test_the_committed_wire_types_are_what_the_schema_generates(monkeypatch: object) -> None:
    schema = subprocess.run([binary(), "schema"], check=True, capture_output=True, text=True).stdout
    committed = gen_wire.OUTPUT.read_text()
    assert gen_wire.generate(schema) == committed, "wire.py is stale: run python scripts/gen_wire.py"


def test_the_wire_types_read_what_the_fixtures_hold() -> None:
    from ledgerwire_client.studio import parse_frame

    fixtures = PACKAGE.parents[1] / "fixtures" / "studio"
    frames = sorted(fixtures.glob("frame-*.json"))
    assert len(frames) >= 13
    import json

    for path in frames:
        assert parse_frame(json.loads(path.read_text())).event, path.name


def test_mypy_strict_is_clean() -> None:
    # The package as installed (`-p`), wherever pip put it.
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", str(PACKAGE / "pyproject.toml"), "-p", "ledgerwire_client"],
        capture_output=True, text=True, cwd=PACKAGE,
    )
    assert result.returncode == 0, result.stdout + result.stderr
