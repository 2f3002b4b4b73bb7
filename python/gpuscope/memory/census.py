"""What the model and optimizer hold, counted exactly and per unique storage.

Parameters, gradients, optimizer state and buffers are read from ``model.named_parameters()``,
``.grad``, ``optimizer.state`` and ``model.named_buffers()``. Every tensor is keyed by its
storage (device, address), so a view, a tied weight or a tensor listed twice never counts
twice; the first category that claims a storage keeps it, in the order above.

Cheap by design: a fingerprint of the tensors' identities is taken at every record (one
pass of attribute reads), and the full count is redone only when it changed — after
densification, optimizer-state rebuilds or gradients appearing and vanishing.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from gpuscope import _native

__all__ = ["Census", "CensusTaker", "Counted", "scan_heap"]

CATEGORIES = ("parameters", "gradients", "optimizer_state", "buffers")


@dataclass(frozen=True)
class Counted:
    """One unique storage and what it is known as."""

    nbytes: int
    category: str
    name: str | None
    dtype: str
    shape: tuple[int, ...]
    device: str
    module: str | None


@dataclass
class Census:
    """The counted storages, summed the ways a record needs them."""

    categories: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    modules: dict[str, int] = field(default_factory=dict)
    dtypes: dict[str, int] = field(default_factory=dict)
    count: int = 0
    total: int = 0
    items: list[Counted] = field(default_factory=list)

    def add(self, item: Counted) -> None:
        self.items.append(item)
        self.categories[item.category] = self.categories.get(item.category, 0) + item.nbytes
        if item.module is not None:
            self.modules[item.module] = self.modules.get(item.module, 0) + item.nbytes
        self.dtypes[item.dtype] = self.dtypes.get(item.dtype, 0) + item.nbytes
        self.count += 1
        self.total += item.nbytes

    def largest(self, threshold: int) -> list[Counted]:
        """Storages of at least ``threshold`` bytes, largest first."""
        big = [c for c in self.items if c.nbytes >= threshold]
        return sorted(big, key=lambda c: c.nbytes, reverse=True)


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``float32``, as the seeds' tags spell it."""
    return str(dtype).removeprefix("torch.")


def storage_of(t: torch.Tensor) -> tuple[tuple[str, int], int]:
    """(key, bytes) of the storage under ``t``; views share their base's key. A sparse COO
    tensor is its indices and values."""
    if t.layout == torch.sparse_coo:
        parts = (t._indices(), t._values())
        return (str(t.device), id(t)), sum(storage_of(p)[1] for p in parts)
    try:
        storage = t.untyped_storage()
        return (str(t.device), storage.data_ptr()), storage.nbytes()
    except (RuntimeError, NotImplementedError):  # other storage-less layouts
        return (str(t.device), id(t)), t.element_size() * t.nelement()


def state_tensors(value: Any, key: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    """(key, tensor) for every tensor in an optimizer's per-parameter state, including
    those kept in lists and dicts (LBFGS keeps its history in lists): ``old_dirs.3``."""
    if isinstance(value, torch.Tensor):
        yield key, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from state_tensors(v, f"{key}.{k}" if key else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from state_tensors(v, f"{key}.{i}" if key else str(i))


def unwrap(model: torch.nn.Module | None) -> torch.nn.Module | None:
    """The model inside DistributedDataParallel / DataParallel, so module names and the
    per-module breakdown are the user's, not ``module.*``."""
    wrappers = (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)
    while isinstance(model, wrappers):
        model = model.module
    return model


class CensusTaker:
    """Counts what ``model`` and ``optimizer`` hold (either may be ``None``)."""

    def __init__(
        self,
        model: torch.nn.Module | None,
        optimizer: torch.optim.Optimizer | None,
        module_depth: int = 1,
    ) -> None:
        self.model = unwrap(model)
        self.optimizer = optimizer
        self.module_depth = module_depth
        self._fingerprint: tuple[Any, ...] | None = None
        self._census: Census | None = None

    def take(self) -> Census:
        """The census now, reusing the last one when nothing it counts has changed."""
        fingerprint = self.fingerprint()
        if self._census is None or fingerprint != self._fingerprint:
            self._census = self._count()
            self._fingerprint = fingerprint
        return self._census

    def fingerprint(self) -> tuple[Any, ...]:
        """Identity of every counted tensor: addresses of parameters and buffers, which
        gradients exist, and the optimizer-state tensors' ids (rebuilt on densification)."""
        params = self._parameters()
        grads = tuple(p.grad is not None for _, p in params)
        addresses = tuple(p.data_ptr() for _, p in params)
        shapes = tuple((p.shape, p.dtype) for _, p in params)
        state: tuple[int, ...] = ()
        if self.optimizer is not None:
            state = tuple(
                id(t)
                for per_param in self.optimizer.state.values()
                for _, t in state_tensors(per_param)
            )
        buffers: tuple[Any, ...] = ()
        if self.model is not None:
            buffers = tuple((b.data_ptr(), b.shape, b.dtype) for _, b in self.model.named_buffers())
        return (addresses, shapes, grads, state, buffers)

    def _parameters(self) -> list[tuple[str, torch.Tensor]]:
        if self.model is not None:
            return list(self.model.named_parameters())
        if self.optimizer is not None:
            return [
                (f"param{i}", p)
                for i, p in enumerate(p for g in self.optimizer.param_groups for p in g["params"])
            ]
        return []

    def _module_of(self, name: str) -> str:
        parts = name.split(".")[:-1][: self.module_depth]
        return ".".join(parts) if parts else "(root)"

    def _tensors(self) -> Iterator[tuple[str, str | None, str | None, torch.Tensor]]:
        """(category, name, module, tensor) for everything counted, in claim order."""
        params = self._parameters()
        names = {id(p): n for n, p in params}
        for name, p in params:
            yield "parameters", name, self._module_of(name), p
        for name, p in params:
            if p.grad is not None:
                yield "gradients", f"{name}.grad", self._module_of(name), p.grad
        if self.optimizer is not None:
            prefix = type(self.optimizer).__name__.lower()
            for p, per_param in self.optimizer.state.items():
                pname = names.get(id(p))
                module = self._module_of(pname) if pname is not None else None
                for key, t in state_tensors(per_param):
                    label = f"{prefix}.{key}[{pname}]" if pname else f"{prefix}.{key}"
                    yield "optimizer_state", label, module, t
        if self.model is not None:
            # Buffers are not part of the per-module figure: parameters, gradients and
            # optimizer state are what a module costs to train.
            for name, b in self.model.named_buffers():
                yield "buffers", name, None, b

    def _count(self) -> Census:
        census = Census()
        seen: set[tuple[str, int]] = set()
        for category, name, module, t in self._tensors():
            key, nbytes = storage_of(t)
            if key in seen:
                continue
            seen.add(key)
            census.add(
                Counted(
                    nbytes=nbytes,
                    category=category,
                    name=name,
                    dtype=dtype_name(t.dtype),
                    shape=tuple(t.shape),
                    device=str(t.device),
                    module=module,
                )
            )
        return census

    def known_storages(self) -> set[tuple[str, int]]:
        """Keys of every storage the census counts (for a heap scan to skip)."""
        return {storage_of(t)[0] for _, _, _, t in self._tensors()}


def scan_heap(known: set[tuple[str, int]], device: str | None = None) -> list[Counted]:
    """Tensors reachable from Python that model and optimizer do not hold — the seeds'
    ``gc.get_objects()`` walk, de-duplicated by storage. Only tensors with a Python object
    are found; memory held without one (buffers C++ operators save for backward) is covered
    by the allocator's or the heap's remainder, ``activations``."""
    found: list[Counted] = []
    seen = set(known)
    for obj in _native.instances_of(gc.get_objects(), torch.Tensor):
        if device is not None and str(obj.device) != device:
            continue
        key, nbytes = storage_of(obj)
        if key in seen:
            continue
        seen.add(key)
        found.append(
            Counted(
                nbytes=nbytes,
                category="other",
                name=None,
                dtype=dtype_name(obj.dtype),
                shape=tuple(obj.shape),
                device=str(obj.device),
                module=None,
            )
        )
    return found
