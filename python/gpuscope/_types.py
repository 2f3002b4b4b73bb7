"""Shapes of the plain data that gpuscope's native functions return (for type checkers;
at run time these are ordinary dicts)."""

from __future__ import annotations

from typing import TypedDict

__all__ = ["EventData", "EventFileInfo", "HistogramSummary", "TagSeries"]


class EventFileInfo(TypedDict):
    """One event file that ``read_events`` read."""

    path: str
    run: str
    records: int
    event_kinds: dict[str, int]
    truncated_at_byte: int | None
    damaged: str | None


class HistogramSummary(TypedDict):
    """One histogram of a histogram tag, as TensorBoard stores it (its buckets left out):
    the smallest and largest value, how many values, their sum and sum of squares (so
    the mean is ``sum / num`` and the variance ``sum_squares / num - mean**2``)."""

    min: float
    max: float
    num: float
    sum: float
    sum_squares: float


class TagSeries(TypedDict):
    """The values of one tag in one run, column by column: numbers for scalar tags, texts
    for text tags, a :class:`HistogramSummary` per step for histogram tags; other kinds
    (images, audio, ...) are counted, with no steps or values."""

    run: str
    tag: str
    kind: str
    count: int
    first_step: int
    last_step: int
    steps: list[int]
    wall_times: list[float]
    values: list[float] | list[str] | list[HistogramSummary]


class EventData(TypedDict):
    """What ``read_events`` returns; tags of sub-runs are keyed ``<run>/<tag>`` (``<run>:<tag>``
    where two series would share a key, the top run being ``.``)."""

    files: list[EventFileInfo]
    tags: dict[str, TagSeries]
