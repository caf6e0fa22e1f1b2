"""The Studio's HTTP routes: the bearer token, JSON bodies, and a refusal
read into the contract's error grammar.

Owns: `TokenSource` (a string, or a callable asked again for every
request), `StudioFailure` (an error as data) and `StudioError`.
Must never: retry on its own (the conversation decides what a refusal
means), or send the token to another origin than the one it was given.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal, Union

import httpx

#: The bearer token, or a callable returning it (sync or async), asked
#: again for every request and every reconnect.
TokenSource = Union[str, Callable[[], Union[str, Awaitable[str]]]]

RetryMode = Literal["correct_and_retry", "refresh_then_retry", "retry_after_delay", "do_not_retry"]


#: Connections are not kept alive between requests: the server closes a
#: connection after refusing a request whose body it did not read (a 401,
#: say), and a request sent on that connection in the same moment fails
#: with no answer at all. A fresh connection per request costs one
#: handshake and removes the race.
NO_KEEPALIVE = httpx.Limits(max_keepalive_connections=0)


async def bearer(token: TokenSource | None) -> dict[str, str]:
    """The `Authorization` header for `token` (none when it is None)."""
    if token is None:
        return {}
    value = token() if callable(token) else token
    if inspect.isawaitable(value):
        value = await value
    return {"Authorization": f"Bearer {value}"}


@dataclass(frozen=True)
class StudioFailure:
    """An error in the contract's grammar, with the HTTP status it came
    with (0: no answer at all; 200: an `error` frame on a stream)."""

    code: str
    retry: RetryMode
    detail: str
    status: int
    fix: str | None = None
    retry_after_seconds: float | None = None
    pointer: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @staticmethod
    def from_wire(body: Any, status: int) -> StudioFailure | None:
        """The failure `body` describes, or None when it is not one."""
        if not isinstance(body, dict) or not isinstance(body.get("code"), str):
            return None
        retry = body.get("retry")
        if retry not in ("correct_and_retry", "refresh_then_retry", "retry_after_delay", "do_not_retry"):
            return None
        seconds = body.get("retry_after_seconds")
        return StudioFailure(
            code=body["code"],
            retry=retry,
            detail=str(body.get("detail") or body["code"]),
            status=status,
            fix=body.get("fix") if isinstance(body.get("fix"), str) else None,
            retry_after_seconds=float(seconds) if isinstance(seconds, (int, float)) else None,
            pointer=body.get("pointer") if isinstance(body.get("pointer"), str) else None,
        )


class StudioError(Exception):
    """A refusal, or a request that got no usable answer, as an exception."""

    def __init__(self, failure: StudioFailure) -> None:
        super().__init__(failure.detail)
        self.failure = failure

    @property
    def code(self) -> str:
        return self.failure.code

    @property
    def retry(self) -> RetryMode:
        return self.failure.retry


def unreachable(detail: str = "The server could not be reached.") -> StudioFailure:
    """The error of a request that never got an answer."""
    return StudioFailure(
        code="transient_unavailable", retry="retry_after_delay", retry_after_seconds=2, detail=detail, status=0
    )


async def refusal(response: httpx.Response) -> StudioFailure:
    """A refused response read as the error grammar."""
    try:
        await response.aread()
        body = response.json()
    except (ValueError, httpx.HTTPError):
        body = None  # Not JSON (a proxy's page): described from the status alone.
    failure = StudioFailure.from_wire(body, response.status_code)
    if failure is not None:
        return failure
    return StudioFailure(
        code="transient_unavailable",
        retry="retry_after_delay",
        retry_after_seconds=5,
        detail=f"The server answered {response.status_code} with no error the Studio knows.",
        status=response.status_code,
    )
