"""The names gpuscope shows for a model's parameters and modules: the user's, without
what wrappers add to them.

``torch.compile`` keeps the model as ``_orig_mod``, activation checkpointing's
``checkpoint_wrapper`` as ``_checkpoint_wrapped_module`` and FSDP1 as
``_fsdp_wrapped_module``: each puts its component into every name below it
(``_orig_mod.0._checkpoint_wrapped_module.weight`` is the user's ``0.weight``). Those
components are dropped wherever they are. DistributedDataParallel and DataParallel add
``module``, which is also a name a user may give a submodule, so they are unwrapped at
the root instead of stripped by name.

Every name a record, a gradient report or a non-finite report shows goes through here,
and module depths count the user's components only.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterable
from typing import Any, ClassVar, Protocol

import torch

__all__ = [
    "ROOT",
    "ParameterList",
    "Registrations",
    "module_names",
    "module_of",
    "named_buffers",
    "named_parameters",
    "unwrap",
    "user_name",
]

ROOT = "(root)"
# Written out rather than imported: torch keeps them in private modules that a build
# without torch.distributed lacks.
WRAPPER_COMPONENTS = frozenset({"_orig_mod", "_checkpoint_wrapped_module", "_fsdp_wrapped_module"})
_ANY_WRAPPER = re.compile("|".join(sorted(WRAPPER_COMPONENTS)))


def user_name(name: str) -> str:
    """``name`` without wrapper components: ``_orig_mod.0._checkpoint_wrapped_module.weight``
    -> ``0.weight``; a wrapper itself (``_orig_mod``) is ``""``, the root."""
    if _ANY_WRAPPER.search(name) is None:  # the common case, and cheap
        return name
    return ".".join(part for part in name.split(".") if part not in WRAPPER_COMPONENTS)


def _ddp_chain(model: torch.nn.Module) -> list[torch.nn.Module]:
    """``model`` and the modules it wraps DDP-style (``.module``), outermost first."""
    wrappers = (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)
    chain = [model]
    while isinstance(chain[-1], wrappers):
        chain.append(chain[-1].module)
    return chain


def unwrap(model: torch.nn.Module | None) -> torch.nn.Module | None:
    """The model inside DistributedDataParallel / DataParallel, so names are the user's,
    not ``module.*``."""
    return _ddp_chain(model)[-1] if model is not None else None


def _renamed(named: Iterable[tuple[str, torch.Tensor]]) -> list[tuple[str, torch.Tensor]]:
    return [(user_name(n), t) for n, t in named]


def named_parameters(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """``model.named_parameters()`` under the user's names."""
    return _renamed(_ddp_chain(model)[-1].named_parameters())


def named_buffers(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """``model.named_buffers()`` under the user's names."""
    return _renamed(_ddp_chain(model)[-1].named_buffers())


def module_names(model: torch.nn.Module) -> dict[int, str]:
    """The user's name of every module in ``model`` by ``id``: ``(root)`` for the model
    and the wrappers around it; a wrapper inside has its wrapped module's name."""
    chain = _ddp_chain(model)
    names = dict.fromkeys(map(id, chain), ROOT)
    for name, module in chain[-1].named_modules():
        names[id(module)] = user_name(name) or ROOT
    return names


def module_of(name: str, depth: int) -> str:
    """The module a parameter named ``name`` (a user's name) is counted under: its first
    ``depth`` components (``layers.3.attn.weight`` at depth 2 is ``layers.3``)."""
    parts = name.split(".")[:-1][:depth]
    return ".".join(parts) if parts else ROOT


class KeepsLists(Protocol):
    def forget_lists(self) -> None: ...


class Registrations:
    """Counts parameter, buffer and submodule registrations anywhere in the process, so
    whoever keeps a model's lists of parameters and buffers knows when they may be out of
    date — and drops those lists at once, so that a parameter being replaced
    (densification) is not kept alive by gpuscope until the lists are next used."""

    count = 0
    hooked = False
    takers: ClassVar[weakref.WeakSet[Any]] = weakref.WeakSet()

    @classmethod
    def watch(cls, taker: KeepsLists) -> None:
        """Calls ``taker.forget_lists()`` at every registration from now on."""
        cls.install()
        cls.takers.add(taker)

    @classmethod
    def install(cls) -> None:
        if cls.hooked:
            return
        hooks = torch.nn.modules.module
        for name in (
            "register_module_parameter_registration_hook",
            "register_module_buffer_registration_hook",
            "register_module_module_registration_hook",
        ):
            register = getattr(hooks, name, None)
            if register is None:  # an older torch: the lists are taken at every use
                return
            register(cls._bump)
        cls.hooked = True

    @classmethod
    def _bump(cls, *_: Any) -> None:
        cls.count += 1
        for taker in cls.takers:
            taker.forget_lists()


class ParameterList:
    """:func:`named_parameters` of ``model``, kept between calls (the per-iteration hooks
    would otherwise walk the module tree every iteration) and taken again after any
    registration (:class:`Registrations`)."""

    def __init__(self, model: torch.nn.Module | None) -> None:
        self.model = model
        self._named: list[tuple[str, torch.Tensor]] | None = None
        Registrations.watch(self)

    def get(self) -> list[tuple[str, torch.Tensor]]:
        if self.model is None:
            return []
        if self._named is None or not Registrations.hooked:
            self._named = named_parameters(self.model)
        return self._named

    def forget_lists(self) -> None:
        self._named = None
