"""The specification's Python client example against `serve
--statewire-examples`. EXAMPLE is its client half as the spec writes it,
with the server's address, this package's import path and `token=` put in.

As written it offers `harness-sdk` at exactly 2026-09-30, a version this
server does not serve (it serves 2026-11-15..2026-12-01), so it is refused
with `unsupported-protocol`; with `harness-sdk` offered at 2026-12-01 it
runs and answers `{"theme": "dark", "locale": "de"}`.
"""

from __future__ import annotations

from typing import Any

import pytest

from conftest import TOKEN, Servers
from ledgerwire_client.statewire import StatewireStopped
from ledgerwire_client.statewire import client as client_module

EXAMPLE = '''
from ledgerwire_client.statewire.client import StatewireClient
from ledgerwire_client.statewire.protocol import Offer, VersionRange

async def example():
    async with StatewireClient.sse(
        "BASE/threads/t1",
        token="TOKEN",
        protocol="harness-sdk",
        application_protocols=(
            Offer("harness-sdk", VersionRange("2026-09-30")),
            Offer("acme-chat", VersionRange("2026-09-13")),
        ),
    ) as client:
        client.set_context("acme-chat", {"locale": "de"})
        answer = await client.send("setTheme", "dark", protocol="acme-chat")
        message = client.document("harness-sdk", (".", "main", "m1"))
    return answer, message
'''


def compile_example(base: str, harness_version: str = "2026-09-30") -> Any:
    text = EXAMPLE.replace("BASE", base).replace("TOKEN", TOKEN)
    text = text.replace('VersionRange("2026-09-30")', f'VersionRange("{harness_version}")')
    scope: dict[str, Any] = {}
    exec(compile(text, "spec-example", "exec"), scope)
    return scope["example"]


async def test_the_example_runs_with_harness_sdk_at_a_served_version(serve: Servers) -> None:
    server = serve("--statewire-examples")
    answer, message = await compile_example(server.base, "2026-12-01")()
    assert answer == {"theme": "dark", "locale": "de"}
    assert message is None, "conversation t1 has no message m1"


async def test_the_example_as_written_is_refused_for_its_harness_sdk_version(
    serve: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = serve("--statewire-examples")
    monkeypatch.setattr(client_module, "RETRY_FOR_S", 0.5)  # the 10-minute retry, shortened
    with pytest.raises(StatewireStopped) as stopped:
        await compile_example(server.base)()
    fin = stopped.value.fin
    assert fin is not None and fin["code"] == "unsupported-protocol"
    served = {p["name"]: (p["minVersion"], p["version"]) for p in fin["payload"]["protocols"]}
    assert served["harness-sdk"] == ("2026-11-15", "2026-12-01")
