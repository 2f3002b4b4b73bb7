"""What the model and optimizer hold, counted exactly and per unique storage.

Parameters, gradients, optimizer state and buffers are read from ``model.named_parameters()``,
``.grad``, ``optimizer.state`` and ``model.named_buffers()``, named as the user's model
names them (:mod:`gpuscope.names`). Every tensor is keyed by its
storage (device, address), so a view, a tied weight or a tensor listed twice never counts
twice; the first category that claims a storage keeps it, in the order above.

Cheap by design. The lists of parameters and buffers are kept between records and taken
again only after some module registered a parameter, buffer or submodule (torch's global
registration hooks say when). At every record a fingerprint of the tensors' identities —
addresses and byte sizes of parameters and buffers, which gradients exist, the ids of the
optimizer-state tensors — is hashed in one native call per list and compared with the
last one; the full count is redone only when it changed: after densification, an
optimizer-state rebuild, gradients appearing or vanishing.

Parameters and buffers of lazy modules (``torch.nn.LazyLinear`` before its first forward)
have no storage yet: they are left out until they are materialised, which the census
checks at every record while any is left.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from gpuscope import _native
from gpuscope.names import Registrations, module_of, named_buffers, named_parameters, unwrap

__all__ = ["Census", "CensusTaker", "Counted", "scan_heap", "state_tensors"]

CATEGORIES = ("parameters", "gradients", "optimizer_state", "buffers")
StorageKey = tuple[torch.device, int]


@dataclass(slots=True)
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
    total: int = 0
    items: list[Counted] = field(default_factory=list)
    keys: set[StorageKey] = field(default_factory=set)
    tensor_ids: set[int] = field(default_factory=set)
    _largest: dict[int, list[Counted]] = field(default_factory=dict)

    def add(self, item: Counted) -> None:
        self.items.append(item)
        self.categories[item.category] = self.categories.get(item.category, 0) + item.nbytes
        if item.module is not None:
            self.modules[item.module] = self.modules.get(item.module, 0) + item.nbytes
        self.dtypes[item.dtype] = self.dtypes.get(item.dtype, 0) + item.nbytes
        self.total += item.nbytes

    def largest(self, threshold: int) -> list[Counted]:
        """Storages of at least ``threshold`` bytes, largest first (kept per threshold)."""
        if threshold not in self._largest:
            big = [c for c in self.items if c.nbytes >= threshold]
            self._largest[threshold] = sorted(big, key=lambda c: c.nbytes, reverse=True)
        return self._largest[threshold]


_DTYPE_NAMES: dict[torch.dtype, str] = {}


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``float32``, as the ``TensorProfiling/Tensor_DType/*`` tags spell it."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).removeprefix("torch.")
    return name


def storage_of(t: torch.Tensor) -> tuple[StorageKey, int]:
    """(key, bytes) of the storage under ``t``; views share their base's key. A sparse COO
    tensor is its indices and values."""
    if t.layout == torch.sparse_coo:
        parts = (t._indices(), t._values())
        return (t.device, id(t)), sum(storage_of(p)[1] for p in parts)
    try:
        storage = t.untyped_storage()
        return (t.device, storage.data_ptr()), storage.nbytes()
    except (RuntimeError, NotImplementedError):  # other storage-less layouts
        return (t.device, id(t)), t.element_size() * t.nelement()


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


class CensusTaker:
    """Counts what ``model`` and ``optimizer`` hold (either may be ``None``)."""

    def __init__(
        self,
        model: torch.nn.Module | None,
        optimizer: torch.optim.Optimizer | None,
        module_depth: int = 1,
    ) -> None:
        Registrations.watch(self)
        self.model = unwrap(model)
        self.optimizer = optimizer
        self.module_depth = module_depth
        self._registrations = -1
        self._params: list[tuple[str, torch.Tensor]] = []
        self._buffers: list[tuple[str, torch.Tensor]] = []
        self._param_tensors: list[torch.Tensor] = []
        self._buffer_tensors: list[torch.Tensor] = []
        self._fingerprint: tuple[Any, ...] | None = None
        self._census: Census | None = None
        # Whether the tensor lists must be (re)made from the named lists: after these
        # were taken, and while some of them are lazy (not materialised yet).
        self._unfiltered = True

    def take(self) -> Census:
        """The census now, reusing the last one when nothing it counts has changed."""
        fingerprint = self.fingerprint()
        if self._census is None or fingerprint != self._fingerprint:
            self._census = self._count()
            self._fingerprint = fingerprint
        return self._census

    def fingerprint(self) -> tuple[Any, ...]:
        """Identity of every counted tensor (see the module's docstring)."""
        self._refresh_lists()
        state = 0
        if self.optimizer is not None:
            state = _native.state_fingerprint(self.optimizer.state, torch.Tensor)
        return (
            _native.tensors_fingerprint(self._param_tensors, True),
            _native.tensors_fingerprint(self._buffer_tensors, False),
            state,
        )

    def forget_lists(self) -> None:
        """Drops the cached parameter and buffer lists (they are taken again when needed)."""
        self._registrations = -1
        self._params, self._buffers = [], []
        self._param_tensors, self._buffer_tensors = [], []

    def _refresh_lists(self) -> None:
        if self.model is None:
            # The optimizer's flat lists are cheap to read, and it may swap parameters.
            groups = self.optimizer.param_groups if self.optimizer is not None else []
            params = (p for g in groups for p in g["params"])
            self._params = [(f"param{i}", p) for i, p in enumerate(params)]
            self._unfiltered = True
        elif not (Registrations.hooked and self._registrations == Registrations.count):
            self._registrations = Registrations.count
            self._params = named_parameters(self.model)
            self._buffers = named_buffers(self.model)
            self._unfiltered = True
        if self._unfiltered:
            self._param_tensors = [p for _, p in self._params if not _is_lazy(p)]
            self._buffer_tensors = [b for _, b in self._buffers if not _is_lazy(b)]
            # Lazy ones are materialised in place, so the lists are checked again.
            self._unfiltered = len(self._param_tensors) < len(self._params) or len(
                self._buffer_tensors
            ) < len(self._buffers)

    def _tensors(self) -> Iterator[tuple[str, str | None, str | None, torch.Tensor]]:
        """(category, name, module, tensor) for everything counted, in claim order."""
        self._refresh_lists()
        params = [(n, p) for n, p in self._params if not _is_lazy(p)]
        names = {id(p): n for n, p in params}
        modules = {n: module_of(n, self.module_depth) for n, _ in params}
        for name, p in params:
            yield "parameters", name, modules[name], p
        for name, p in params:
            if p.grad is not None:
                yield "gradients", f"{name}.grad", modules[name], p.grad
        if self.optimizer is not None:
            prefix = type(self.optimizer).__name__.lower()
            for p, per_param in self.optimizer.state.items():
                pname = names.get(id(p))
                module = modules.get(pname) if pname is not None else None
                for key, t in state_tensors(per_param):
                    label = f"{prefix}.{key}[{pname}]" if pname else f"{prefix}.{key}"
                    yield "optimizer_state", label, module, t
        # Buffers are not part of the per-module figure: parameters, gradients and
        # optimizer state are what a module costs to train.
        for name, b in self._buffers:
            if not _is_lazy(b):
                yield "buffers", name, None, b

    def _count(self) -> Census:
        census = Census()
        devices: dict[torch.device, str] = {}
        for category, name, module, t in self._tensors():
            census.tensor_ids.add(id(t))
            key, nbytes = storage_of(t)
            if key in census.keys:
                continue
            census.keys.add(key)
            device = devices.get(key[0])
            if device is None:
                device = devices[key[0]] = str(key[0])
            census.add(
                Counted(nbytes, category, name, dtype_name(t.dtype), t.shape, device, module)
            )
        return census


def _is_lazy(t: torch.Tensor) -> bool:
    """A parameter or buffer of a lazy module that has no storage yet."""
    return torch.nn.parameter.is_lazy(t)


def scan_heap(census: Census, device: torch.device | None = None) -> list[Counted]:
    """Tensors reachable from Python that the census does not hold — a
    ``gc.get_objects()`` walk, de-duplicated by storage (on ``device`` only, if given).
    Only tensors with a Python object are found; memory held without one (buffers C++
    operators save for backward) is covered by the allocator's or the heap's remainder,
    ``activations``."""
    found: list[Counted] = []
    seen = set(census.keys)
    for obj in _native.instances_of(gc.get_objects(), torch.Tensor):
        if id(obj) in census.tensor_ids or (device is not None and obj.device != device):
            continue
        key, nbytes = storage_of(obj)
        if key in seen:
            continue
        seen.add(key)
        found.append(
            Counted(nbytes, "other", None, dtype_name(obj.dtype), obj.shape, str(obj.device), None)
        )
    return found
