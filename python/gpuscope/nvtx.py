"""NVTX ranges and marks for Nsight Systems, and a capture range around the part of the
program worth recording.

Neither needs torch, so a JAX or plain-CUDA program can use them: with torch imported and
CUDA available they go through ``torch.cuda.nvtx`` and ``torch.cuda.profiler``; otherwise
through the ``nvtx`` package and the CUDA runtime library when they are installed; with
none of these they do nothing at all. ``GPUSCOPE_NO_GPU`` set (to anything but ``0``,
``false``, ``no``, ``off`` or ``nvml``, which rules out NVML alone) makes them act as if
CUDA were absent: no ``torch.cuda``, no CUDA runtime.

>>> with gpuscope.nvtx.range("forward"):                      # doctest: +SKIP
...     loss = model(batch)
>>> @gpuscope.nvtx.range("data", color="green")               # doctest: +SKIP
... def load(): ...
>>> with gpuscope.capture():        # nsys profile --capture-range=cudaProfilerApi ...
...     train()                                                # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import sys
from types import ModuleType, TracebackType
from typing import Any, Protocol, Self

__all__ = ["backend", "capture", "mark", "range"]


class _Backend(Protocol):
    name: str

    def push(self, message: str, color: str | None, domain: str | None) -> None: ...
    def pop(self, domain: str | None) -> None: ...
    def mark(self, message: str, color: str | None, domain: str | None) -> None: ...


class _Torch:
    """``torch.cuda.nvtx``: no colours or domains."""

    name = "torch.cuda.nvtx"

    def __init__(self, torch: ModuleType) -> None:
        self.nvtx = torch.cuda.nvtx

    def push(self, message: str, color: str | None, domain: str | None) -> None:
        self.nvtx.range_push(message)

    def pop(self, domain: str | None) -> None:
        self.nvtx.range_pop()

    def mark(self, message: str, color: str | None, domain: str | None) -> None:
        self.nvtx.mark(message)


class _Package:
    """The ``nvtx`` package (NVIDIA's Python bindings of the NVTX C library)."""

    name = "nvtx"

    def __init__(self, nvtx: ModuleType) -> None:
        self.nvtx = nvtx

    def push(self, message: str, color: str | None, domain: str | None) -> None:
        self.nvtx.push_range(message, color=color, domain=domain)

    def pop(self, domain: str | None) -> None:
        self.nvtx.pop_range(domain=domain)

    def mark(self, message: str, color: str | None, domain: str | None) -> None:
        self.nvtx.mark(message, color=color, domain=domain)


def _cuda_ruled_out() -> bool:
    """Whether ``GPUSCOPE_NO_GPU`` says to act as if there were no CUDA (the values are
    those ``gpuscope monitor`` reads)."""
    value = os.environ.get("GPUSCOPE_NO_GPU", "").strip().lower()
    return value not in {"", "0", "false", "no", "off", "nvml"}


def _cuda_torch() -> ModuleType | None:
    """torch, when the program has imported it (never imported here) and has CUDA."""
    torch = sys.modules.get("torch")
    if torch is None or _cuda_ruled_out():
        return None
    try:
        return torch if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001 — a broken CUDA setup means no NVTX, not a crash
        return None


@functools.cache
def _backend() -> _Backend | None:
    torch = _cuda_torch()
    if torch is not None:
        return _Torch(torch)
    try:
        import nvtx as package  # type: ignore[import-untyped]
    except ImportError:
        return None
    return _Package(package)


def backend() -> str | None:
    """Which library the ranges go through (``torch.cuda.nvtx``, ``nvtx``), or ``None``
    when they do nothing."""
    b = _backend()
    return b.name if b is not None else None


class range(contextlib.ContextDecorator):
    """An NVTX range, as a context manager or a decorator. ``color`` (a name like
    ``"green"`` or ``0xRRGGBB``) and ``domain`` apply with the ``nvtx`` package."""

    def __init__(self, message: str, color: str | None = None, domain: str | None = None):
        self.message = message
        self.color = color
        self.domain = domain

    def __enter__(self) -> Self:
        b = _backend()
        if b is not None:
            b.push(self.message, self.color, self.domain)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        b = _backend()
        if b is not None:
            b.pop(self.domain)


def mark(message: str, color: str | None = None, domain: str | None = None) -> None:
    """An instant NVTX marker."""
    b = _backend()
    if b is not None:
        b.mark(message, color, domain)


_CUDART_NAMES = (
    "cudart",
    "libcudart.so",
    "libcudart.so.13",
    "libcudart.so.12",
    "libcudart.so.11.0",
)


@functools.cache
def _cudart() -> Any:
    """The CUDA runtime library through ctypes, when the system has one."""
    for name in _CUDART_NAMES:
        path = ctypes.util.find_library(name) if name == "cudart" else name
        if path is None:
            continue
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


def _profiler_calls() -> tuple[Any, Any] | None:
    torch = _cuda_torch()
    if torch is not None:
        return torch.cuda.profiler.start, torch.cuda.profiler.stop
    lib = None if _cuda_ruled_out() else _cudart()
    if lib is None:
        return None
    return lib.cudaProfilerStart, lib.cudaProfilerStop


class capture(contextlib.ContextDecorator):
    """The capture range: ``cudaProfilerStart`` on entry, ``cudaProfilerStop`` on exit, so
    ``nsys profile --capture-range=cudaProfilerApi`` records only what runs inside."""

    def __enter__(self) -> Self:
        calls = _profiler_calls()
        if calls is not None:
            calls[0]()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        calls = _profiler_calls()
        if calls is not None:
            calls[1]()
