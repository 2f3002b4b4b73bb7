"""TensorBoard event files, written and read by the Rust engine.

``EventWriter`` takes ``torch.utils.tensorboard.SummaryWriter``'s method and parameter
names, so code can switch by changing the constructor; writes happen on a background
thread, and ``flush()``/``close()`` are explicit (a dropped writer flushes too).
"""

from __future__ import annotations

from typing import Any

from gpuscope import _native
from gpuscope._native import MAX_HISTOGRAM_BINS, read_events

__all__ = ["MAX_HISTOGRAM_BINS", "EventWriter", "read_events"]


def _flat_floats(values: Any) -> list[float]:
    """Values of a tensor, array or sequence as a flat list of Python floats; TypeError
    for anything that is not numbers (as for every value the writer takes)."""
    try:
        if hasattr(values, "detach"):  # torch.Tensor: no numpy needed
            return [float(v) for v in values.detach().reshape(-1).double().cpu().tolist()]
        if hasattr(values, "ravel"):  # numpy array
            return [float(v) for v in values.ravel().tolist()]
        if isinstance(values, (int, float)):
            return [float(values)]
        return [float(v) for v in values]
    except (TypeError, ValueError, RuntimeError) as e:
        raise TypeError(
            f"histogram values must be numbers (a tensor, an array or a sequence): {e}"
        ) from None


class EventWriter(_native.EventWriter):
    """TensorBoard event writer; a fast stand-in for ``SummaryWriter``.

    >>> with EventWriter("runs/exp1") as w:          # doctest: +SKIP
    ...     w.add_scalar("Loss/total", 0.25, global_step=10)
    """

    def add_histogram(
        self,
        tag: str,
        values: Any,
        global_step: int | None = None,
        bins: int | str = "tensorflow",
        walltime: float | None = None,
        max_bins: int | None = None,
    ) -> None:
        """Histogram of a tensor, a numpy array or a sequence of numbers. ``bins`` is
        ``"tensorflow"`` (TensorFlow's exponential buckets, SummaryWriter's default) or a
        number of equal-width buckets, at most ``MAX_HISTOGRAM_BINS`` (10,000: every bucket
        is stored in every record, and TensorBoard draws about 30); more is a ValueError.
        ``max_bins`` (SummaryWriter's) merges adjacent buckets until there are at most that
        many. Non-finite values are left out."""
        self._add_histogram_values(tag, _flat_floats(values), global_step, bins, walltime, max_bins)
