"""The real ledgerwire binary on 127.0.0.1 for the tests: each test starts
its own servers on their own data directories, reads the address from the
line the server prints once listening, and SIGKILLs what is left at the
end. The binary is LEDGERWIRE_BIN (cargo's build), else the repository's
target/debug/ledgerwire; a missing binary fails the test, it never skips.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCENARIOS = REPO / "fixtures" / "scenarios"
#: Longest a server may take to say it listens, in seconds.
START_TIMEOUT_S = 20.0
#: The token every test server requires (STUDIO_API_TOKEN).
TOKEN = "python-client-tests-token"


def binary() -> str:
    path = os.environ.get("LEDGERWIRE_BIN") or str(REPO / "target" / "debug" / "ledgerwire")
    assert Path(path).is_file(), f"no ledgerwire binary at {path}: run cargo build (or set LEDGERWIRE_BIN)"
    return path


@dataclass
class Server:
    """One `ledgerwire serve` process."""

    data: Path
    args: list[str]
    addr: str = "127.0.0.1:0"
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://{self.addr}"

    def start(self) -> Server:
        env = {**os.environ, "RUST_LOG": "warn", "STUDIO_API_TOKEN": TOKEN, **self.env}
        self.process = subprocess.Popen(
            [binary(), "serve", "--addr", self.addr, "--data", str(self.data), *self.args],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        )
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], START_TIMEOUT_S)
        assert ready, f"the server did not start within {START_TIMEOUT_S} s"
        line = self.process.stdout.readline().decode().strip()
        assert line.startswith("listening on "), f"unexpected first line {line!r}"
        self.addr = line.removeprefix("listening on ")
        return self

    def kill(self) -> None:
        """SIGKILLs the server and waits for it to go."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def restart(self) -> Server:
        """Starts it again on the same address and data."""
        self.kill()
        return self.start()


class Servers:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.started: list[Server] = []

    def __call__(self, *args: str, env: dict[str, str] | None = None) -> Server:
        data = self.tmp / f"data-{len(self.started)}"
        server = Server(data=data, args=list(args), env=env or {})
        self.started.append(server)
        return server.start()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Servers]:
    servers = Servers(tmp_path)
    yield servers
    for server in servers.started:
        server.kill()


def conversation_id(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"
