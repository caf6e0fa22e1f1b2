"""What a Statewire client offers, and how it checks what the host selected.

Owns: `VersionRange`, `Offer`, the `Statewire-Version`,
`Statewire-Protocol` and `Statewire-Cursor` request fields as RFC 9651
structured fields (through http-sfv), and validating a hello's `syn`
against the offers.
Must never: accept a selection outside the offers (other than a selected
parent's child at its parent's version), or build a field by pasting
strings.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Union

from http_sfv.item import Item
from http_sfv.list import List
from http_sfv.types import Token

__all__ = [
    "VersionRange",
    "Offer",
    "Offers",
    "SelectedProtocol",
    "Selection",
    "SelectionError",
    "is_version",
    "version_field",
    "protocol_field",
    "cursor_field",
    "validate_selection",
]


class SelectionError(ValueError):
    """A hello whose selection the offers do not allow (the client stops)."""


def is_version(value: object) -> bool:
    """A wire or protocol version: a real calendar date `YYYY-MM-DD`."""
    if not isinstance(value, str) or len(value) != 10:
        return False
    try:
        return datetime.date.fromisoformat(value).isoformat() == value
    except ValueError:
        return False


@dataclass(frozen=True)
class VersionRange:
    """An inclusive range of versions; `VersionRange("2026-09-30")` is exact."""

    version: str
    min_version: str | None = None

    def __post_init__(self) -> None:
        if not is_version(self.version) or not is_version(self.minimum):
            raise ValueError(f"versions are dates YYYY-MM-DD: {self.version}, {self.minimum}")
        if self.minimum > self.version:
            raise ValueError(f"min_version {self.minimum} is after version {self.version}")

    @property
    def minimum(self) -> str:
        return self.min_version if self.min_version is not None else self.version

    def __contains__(self, version: object) -> bool:
        return is_version(version) and self.minimum <= str(version) <= self.version

    def overlaps(self, other: VersionRange) -> bool:
        return max(self.minimum, other.minimum) <= min(self.version, other.version)

    def as_json(self) -> dict[str, str]:
        """The JSON shape stored sessions use (the TypeScript client's too)."""
        return {"version": self.version, "minVersion": self.minimum}

    @staticmethod
    def from_json(value: Any) -> VersionRange:
        if not isinstance(value, Mapping):
            raise ValueError(f"not a version range: {value!r}")
        version = value.get("version")
        if not isinstance(version, str):
            raise ValueError(f"not a version range: {value!r}")
        minimum = value.get("minVersion", value.get("min_version"))
        return VersionRange(version, minimum if isinstance(minimum, str) else None)


@dataclass(frozen=True)
class Offer:
    """One application protocol offered: `Offer("acme-chat", VersionRange("2026-09-13"))`."""

    name: str
    range: VersionRange
    optional: bool = False

    def covers(self, protocol: str) -> bool:
        """Whether commands to `protocol` (this one or a child) fall under this offer."""
        return protocol == self.name or protocol.startswith(f"{self.name}/")


#: The offers of a client: named protocols, or `"*"` (the native set, for an inspector).
Offers = Union[Sequence[Offer], Literal["*"]]


@dataclass(frozen=True)
class SelectedProtocol:
    name: str
    version: str
    seq: int
    record: Literal["ephemeral"] | None = None


@dataclass(frozen=True)
class Selection:
    """The hello's selection: `{version, protocols: [{name, version, record?}]}`."""

    version: str
    protocols: tuple[SelectedProtocol, ...]

    def get(self, name: str) -> SelectedProtocol | None:
        return next((p for p in self.protocols if p.name == name), None)

    def __contains__(self, name: object) -> bool:
        return any(p.name == name for p in self.protocols)


def version_field(wire: VersionRange) -> str:
    """`Statewire-Version`: an Item, the String maximum with `min-version`."""
    item = Item(wire.version)
    if wire.minimum != wire.version:
        item.params["min-version"] = wire.minimum
    return str(item)


def protocol_field(offers: Offers) -> str:
    """`Statewire-Protocol`: a List of Tokens with `version`, `min-version`
    and `optional`, or the bare `*`."""
    field = List()
    if offers == "*":
        field.append(Item(Token("*")))
        return str(field)
    if not offers:
        raise ValueError("offer at least one application protocol")
    seen: set[str] = set()
    for offer in offers:
        if offer.name in seen:
            raise ValueError(f"{offer.name} is offered twice")
        seen.add(offer.name)
        item = Item(Token(offer.name))
        item.params["version"] = offer.range.version
        if offer.range.minimum != offer.range.version:
            item.params["min-version"] = offer.range.minimum
        if offer.optional:
            item.params["optional"] = True
        field.append(item)
    return str(field)


def cursor_field(cursors: Mapping[str, int]) -> str | None:
    """`Statewire-Cursor`: per durable lane, the highest seq whose answer is held."""
    field = List()
    for name, seq in cursors.items():
        if seq > 0:
            item = Item(Token(name))
            item.params["seq"] = seq
            field.append(item)
    return str(field) if len(field) > 0 else None


def validate_selection(syn: Any, wire: VersionRange, offers: Offers) -> Selection:
    """Checks a hello's `syn` against the offers; raises SelectionError."""
    if not isinstance(syn, Mapping):
        raise SelectionError("the hello has no syn")
    if syn.get("version") not in wire:
        raise SelectionError(f"wire version {syn.get('version')} was not offered")
    entries = syn.get("protocols")
    if not isinstance(entries, list):
        raise SelectionError("syn.protocols is missing")
    chosen: dict[str, SelectedProtocol] = {}
    for entry in entries:
        selected = _selected(entry)
        if selected.name in chosen:
            raise SelectionError(f"{selected.name} is selected twice")
        if offers != "*":
            _check_offered(selected, offers, chosen)
        chosen[selected.name] = selected
    if offers != "*":
        for offer in offers:
            if not offer.optional and offer.name not in chosen:
                raise SelectionError(f"required {offer.name} is missing from the selection")
    return Selection(str(syn["version"]), tuple(chosen.values()))


def _selected(entry: Any) -> SelectedProtocol:
    if not isinstance(entry, Mapping):
        raise SelectionError(f"a selected protocol is not an object: {entry!r}")
    name, version, seq, record = entry.get("name"), entry.get("version"), entry.get("seq"), entry.get("record")
    if not isinstance(name, str) or not is_version(version):
        raise SelectionError(f"a selected protocol lacks its name or version: {entry!r}")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise SelectionError(f"{name} has no lane watermark")
    if record not in (None, "ephemeral"):
        raise SelectionError(f"{name} has an unknown record {record!r}")
    return SelectedProtocol(name, str(version), seq, "ephemeral" if record else None)


def _check_offered(selected: SelectedProtocol, offers: Sequence[Offer], chosen: Mapping[str, SelectedProtocol]) -> None:
    offer = next((o for o in offers if o.name == selected.name), None)
    if offer is not None:
        if selected.version not in offer.range:
            raise SelectionError(f"{selected.name} {selected.version} is outside the offer")
        return
    parent_name, slash, _ = selected.name.rpartition("/")
    parent = chosen.get(parent_name) if slash else None
    if parent is None:
        raise SelectionError(f"{selected.name} was not offered")
    if parent.version != selected.version:
        raise SelectionError(f"{selected.name} is not at its parent's version")
