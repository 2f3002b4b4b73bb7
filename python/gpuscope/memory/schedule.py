"""When the profiler records: every N iterations, with windows of denser recording.

A training loop's ``if 45000 <= iteration <= 48000: interval = 10`` is
``Schedule(every=50, windows=[(45000, 48000, 10)])``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["Schedule"]


@dataclass(frozen=True)
class Schedule:
    """Record when ``iteration % every == 0``, or inside a window ``(start, end, every)``
    (both ends included) when ``iteration % window_every == 0``."""

    every: int = 50
    windows: tuple[tuple[int, int, int], ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not isinstance(self.every, int) or isinstance(self.every, bool) or self.every < 1:
            raise ValueError(f"every must be a positive int, not {self.every!r}")
        for window in self.windows:
            if len(window) != 3 or not all(
                isinstance(n, int) and not isinstance(n, bool) for n in window
            ):
                raise ValueError(
                    f"window {window!r}: expected three ints (start, end, every), as in "
                    "windows=[(45000, 48000, 10)]"
                )
            start, end, every = window
            if end < start or every < 1:
                raise ValueError(
                    f"window {window!r}: expected (start, end, every) with start <= end "
                    "and every >= 1"
                )

    @classmethod
    def of(cls, every: int | Schedule, windows: Iterable[tuple[int, int, int]] = ()) -> Schedule:
        """A schedule from the profiler's ``every=`` and ``windows=`` arguments."""
        if isinstance(every, Schedule):
            return every
        return cls(every, tuple(tuple(w) for w in windows))  # type: ignore[misc]

    def due(self, iteration: int) -> bool:
        """Whether ``iteration`` gets a record."""
        for start, end, every in self.windows:
            if start <= iteration <= end:
                return iteration % every == 0
        return iteration % self.every == 0
