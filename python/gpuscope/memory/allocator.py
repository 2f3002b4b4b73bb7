"""Figures of torch's CUDA caching allocator, and nothing on CPU.

``torch.cuda.memory_stats()`` returns ``{}`` on a machine without CUDA; reading zeros from it
would claim an empty GPU. Here, no CUDA means ``None``: the record's ``allocator`` is null.
"""

from __future__ import annotations

import os
from typing import Any

import torch

__all__ = ["alloc_conf", "allocator_stats", "cuda_device", "expandable_segments"]

# torch reads the allocator's settings from the newer name first, then the CUDA one.
ALLOC_CONF_VARS = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")


def cuda_device(device: torch.device) -> bool:
    """Whether ``device`` is a CUDA device of a working CUDA build."""
    return device.type == "cuda" and torch.cuda.is_available()


def allocator_stats(device: torch.device) -> dict[str, Any] | None:
    """The allocator's figures for ``device`` (bytes), or ``None`` without CUDA."""
    if not cuda_device(device):
        return None
    stats = torch.cuda.memory_stats(device)
    if not stats:  # allocator not initialised yet: nothing allocated, nothing to report
        return None
    free, total = torch.cuda.mem_get_info(device)
    return {
        "allocated_bytes": int(stats.get("allocated_bytes.all.current", 0)),
        "reserved_bytes": int(stats.get("reserved_bytes.all.current", 0)),
        "peak_allocated_bytes": int(stats.get("allocated_bytes.all.peak", 0)),
        "peak_reserved_bytes": int(stats.get("reserved_bytes.all.peak", 0)),
        "inactive_split_bytes": _optional(stats, "inactive_split_bytes.all.current"),
        "num_alloc_retries": _optional(stats, "num_alloc_retries"),
        "num_ooms": _optional(stats, "num_ooms"),
        "device_total_bytes": int(total),
        "device_free_bytes": int(free),
        "alloc_conf": alloc_conf(),
        "expandable_segments": expandable_segments(),
        "memory_fraction": _memory_fraction(device),
    }


def _memory_fraction(device: torch.device) -> float | None:
    """The share of the device this process may allocate
    (``torch.cuda.set_per_process_memory_fraction``; 1.0 uncapped), ``None`` where this
    torch cannot say."""
    get = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    if get is None:
        return None
    try:
        return float(get(device))
    except (RuntimeError, ValueError):  # a device torch cannot ask: the figure alone is lost
        return None


def alloc_conf() -> str | None:
    """The allocator's settings string from the environment, or ``None`` when unset."""
    for name in ALLOC_CONF_VARS:
        value = os.environ.get(name)
        if value:
            return value
    return None


def expandable_segments() -> bool | None:
    """Whether the allocator grows segments instead of splitting them: the settings torch
    applied (which also sees ``torch.cuda.memory._set_allocator_settings``) where this
    torch can say, else the environment's; off when the setting is absent (its default),
    ``None`` when the settings cannot be read."""
    getter = getattr(torch._C, "_accelerator_getAllocatorSettings", None)
    try:
        settings = getter() if getter is not None else alloc_conf()
    except Exception:  # noqa: BLE001 — a private API: a change must not cost the record
        return None
    for option in (settings or "").split(","):
        key, _, value = option.partition(":")
        if key.strip() == "expandable_segments":
            return value.strip().lower() == "true"
    return False


def _optional(stats: dict[str, Any], key: str) -> int | None:
    value = stats.get(key)
    return None if value is None else int(value)
