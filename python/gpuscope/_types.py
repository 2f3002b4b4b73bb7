"""Shapes of the plain data that gpuscope's native functions return (for type checkers;
at run time these are ordinary dicts)."""

from __future__ import annotations

from typing import TypedDict

__all__ = ["EventData", "EventFileInfo", "TagSeries"]


class EventFileInfo(TypedDict):
    """One event file that ``read_events`` read."""

    path: str
    run: str
    records: int
    event_kinds: dict[str, int]
    truncated_at_byte: int | None
    damaged: str | None


class TagSeries(TypedDict):
    """The values of one tag in one run, column by column (texts for text tags)."""

    run: str
    tag: str
    kind: str
    count: int
    first_step: int
    last_step: int
    steps: list[int]
    wall_times: list[float]
    values: list[float] | list[str]


class EventData(TypedDict):
    """What ``read_events`` returns; tags of sub-runs are keyed ``<run>/<tag>`` (``<run>:<tag>``
    where two series would share a key, the top run being ``.``)."""

    files: list[EventFileInfo]
    tags: dict[str, TagSeries]
