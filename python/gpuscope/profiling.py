"""torch.profiler from a training config's ``profiling:`` section: a config loaded from YAML, a dict
or ``--profiling.<key> VALUE`` overrides, and a session that writes each trace into the run
directory and prints what gpuscope's trace analysis makes of it.

>>> config = gpuscope.ProfilingConfig.from_yaml("run.yaml", overrides=sys.argv[1:])
>>> with gpuscope.profile("runs/exp1", config) as prof:       # doctest: +SKIP
...     for epoch in range(epochs):
...         train_one_epoch()
...         prof.step()                                        # per epoch, or per iteration
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from gpuscope import _native
from gpuscope._run_dir import default_run_dir
from gpuscope._warnings import warn_user
from gpuscope.flags import str2bool

__all__ = ["ProfileSession", "ProfilingConfig", "profile", "trace_path"]

_PREFIX = "--profiling."

# The sessions whose torch profiler is running or scheduled to start. torch's profiler
# runs one session per process: a second one crashes the interpreter.
_ACTIVE: list[ProfileSession] = []


@dataclass(frozen=True)
class ProfilingConfig:
    """A training config's ``profiling:`` section, with its defaults.

    ``wait`` steps are skipped, ``warmup`` steps are recorded but not saved, ``active`` steps
    are saved as one trace, and the cycle runs ``repeat`` times (0: until the session
    ends). ``with_stack`` records Python stacks and slows the run down noticeably.
    ``enabled`` is False for a YAML file without a ``profiling:`` section, and for
    command-line arguments without any ``--profiling.*`` switch.
    """

    wait: int = 1
    warmup: int = 1
    active: int = 3
    repeat: int = 1
    record_shapes: bool = True
    profile_memory: bool = True
    with_stack: bool = False
    enabled: bool = True

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.type == "bool":
                if not isinstance(value, bool):
                    raise TypeError(f"profiling.{f.name} must be true or false, not {value!r}")
            elif not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"profiling.{f.name} must be a whole number, not {value!r}")
            elif value < 0:
                raise ValueError(f"profiling.{f.name} must not be negative, not {value}")
        if self.active < 1:
            raise ValueError("profiling.active must be at least 1: no step would be saved")

    @classmethod
    def keys(cls) -> list[str]:
        """The section's keys."""
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls, section: Mapping[str, Any]) -> ProfilingConfig:
        """The config of a ``profiling:`` section (keys missing take the defaults)."""
        if not isinstance(section, Mapping):
            raise TypeError(f"the profiling section must be a mapping, not {section!r}")
        unknown = sorted(set(section) - set(cls.keys()))
        if unknown:
            raise ValueError(
                f"unknown profiling key(s) {', '.join(map(repr, unknown))}; "
                f"expected: {', '.join(cls.keys())}"
            )
        return cls(**dict(section))

    @classmethod
    def from_args(cls, argv: Sequence[str], base: ProfilingConfig | None = None) -> ProfilingConfig:
        """``--profiling.<key> VALUE`` (or ``--profiling.<key>=VALUE``) switches of
        ``argv`` applied to ``base`` (default: the defaults, disabled); other arguments are
        ignored. Any such switch enables profiling unless it sets ``enabled``."""
        values: dict[str, Any] = {}
        args = list(argv)
        k = 0
        while k < len(args):
            arg = args[k]
            k += 1
            if not arg.startswith(_PREFIX):
                continue
            key, eq, text = arg[len(_PREFIX) :].partition("=")
            if not eq:
                if k >= len(args):
                    raise ValueError(f"{arg} needs a value")
                text = args[k]
                k += 1
            values[key] = _parse(key, text)
        base = base if base is not None else dataclasses.replace(cls(), enabled=False)
        if not values:
            return base
        values.setdefault("enabled", True)
        return cls.from_dict({**dataclasses.asdict(base), **values})

    @classmethod
    def from_yaml(
        cls, path: str | os.PathLike[str], overrides: Sequence[str] = ()
    ) -> ProfilingConfig:
        """The ``profiling:`` section of a YAML file (top level, beside ``training:``),
        then ``overrides`` as in :meth:`from_args`. Needs PyYAML (``pip install pyyaml``)."""
        try:
            import yaml  # type: ignore[import-untyped]
        except ImportError as e:
            raise ImportError("reading YAML needs PyYAML: pip install pyyaml") from e
        with open(path, encoding="utf-8") as f:
            document = yaml.safe_load(f)
        if document is None:
            document = {}
        if not isinstance(document, Mapping):
            raise TypeError(f"{path}: the YAML document is not a mapping")
        section = document.get("profiling")
        if section is None:
            base = dataclasses.replace(cls(), enabled=False)
        else:
            try:
                base = cls.from_dict(section)
            except (TypeError, ValueError) as e:
                raise type(e)(f"{path}: {e}") from None
        return cls.from_args(overrides, base)


def _parse(key: str, text: str) -> bool | int:
    """A switch's value as the field's type."""
    types = {f.name: f.type for f in dataclasses.fields(ProfilingConfig)}
    if key not in types:
        raise ValueError(
            f"unknown profiling key {key!r}; expected: {', '.join(ProfilingConfig.keys())}"
        )
    if types[key] == "bool":
        try:
            return str2bool(text)
        except argparse.ArgumentTypeError:
            raise ValueError(f"--profiling.{key} expects True or False, not {text!r}") from None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"--profiling.{key} expects a whole number, not {text!r}") from None


def trace_path(run_dir: Path, rank: int | None, stamp_ms: int) -> Path:
    """``profiler_traces/[rank<R>.]<ms since the epoch>.pt.trace.json.gz``, as
    docs/run-dir.md names it."""
    ranked = f"rank{rank}." if rank is not None else ""
    return run_dir / "profiler_traces" / f"{ranked}{stamp_ms}.pt.trace.json.gz"


class ProfileSession:
    """A ``torch.profiler.profile`` run on a :class:`ProfilingConfig`'s schedule.

    Each saved cycle becomes a trace in ``<run>/profiler_traces/``; when
    ``summary`` is on, gpuscope's trace analysis prints a few lines on it to ``out`` and
    writes its HTML report beside it (``<name>.pt.trace.html``). Nothing here may stop
    training: an error is reported once and profiling goes on (or stops) quietly. One
    session at a time: torch's profiler cannot run two, so a session entered while another
    (or ``torch.profiler`` itself) is active records nothing and says so once.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str] | None,
        config: ProfilingConfig | None = None,
        *,
        summary: bool = True,
        out: IO[str] | None = None,
    ) -> None:
        from gpuscope.memory.profiler import distributed_rank

        self.config = config if config is not None else ProfilingConfig()
        self.run_dir = Path(run_dir) if run_dir is not None else default_run_dir()
        self.summary = summary
        self.out = out
        self.traces: list[Path] = []
        self.reports: list[Path] = []
        rank, world = distributed_rank()
        self.rank = rank if world > 1 else None
        self._profiler: Any = None
        self._failed = False
        self._warned = False

    @property
    def enabled(self) -> bool:
        """Whether this session profiles anything."""
        return self.config.enabled

    def __enter__(self) -> Self:
        if not self.enabled:
            return self
        import torch
        from torch.profiler import ProfilerActivity, schedule

        busy = _busy_profiler(torch)
        if busy is not None:
            self._failed = True
            self._warn_once(
                f"gpuscope profiling not started: {busy}; torch's profiler runs one session "
                "at a time (a second one crashes the process), so this one records nothing "
                "and training goes on"
            )
            return self
        c = self.config
        if c.with_stack:
            warn_user(
                "profiling.with_stack records a Python stack per operator and slows "
                "training noticeably; turn it on for short runs only"
            )
        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        try:
            self._profiler = torch.profiler.profile(
                activities=activities,
                schedule=schedule(wait=c.wait, warmup=c.warmup, active=c.active, repeat=c.repeat),
                on_trace_ready=self._on_trace_ready,
                record_shapes=c.record_shapes,
                profile_memory=c.profile_memory,
                with_stack=c.with_stack,
            )
            self._profiler.__enter__()
            _ACTIVE.append(self)
        except Exception as e:  # noqa: BLE001 — profiling must never stop training
            self._profiler = None
            self._fail("could not start torch.profiler", e)
        return self

    def step(self) -> None:
        """Ends one step of the schedule: call it once per epoch or per iteration."""
        if self._profiler is None:
            return
        if self._failed:
            # A trace could not be saved: stop torch's profiler rather than leave it
            # recording (a profiler left running crashes the interpreter at exit).
            self._stop()
            return
        try:
            self._profiler.step()
        except Exception as e:  # noqa: BLE001 — profiling must never stop training
            self._fail("torch.profiler.step() failed", e)
            self._stop()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._profiler is not None:
            self._stop()

    def _stop(self) -> None:
        profiler, self._profiler = self._profiler, None
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        try:
            profiler.__exit__(None, None, None)
        except Exception as e:  # noqa: BLE001 — profiling must never stop training
            self._fail("stopping torch.profiler failed", e)

    def _on_trace_ready(self, prof: Any) -> None:
        if self._failed:
            return
        try:
            path = self._next_path()
            path.parent.mkdir(parents=True, exist_ok=True)
            prof.export_chrome_trace(str(path))
            self.traces.append(path)
        except Exception as e:  # noqa: BLE001 — profiling must never stop training
            self._fail("could not write the profiler trace", e)
            return
        if self.summary:
            self._summarise(path)

    def _summarise(self, path: Path) -> None:
        html = path.with_name(path.name.removesuffix(".json.gz") + ".html")
        try:
            text = _native.summarize_trace(str(path), html=str(html))
        except Exception as e:  # noqa: BLE001 — profiling must never stop training
            # The trace is written; only its summary is missing.
            self._warn_once(f"gpuscope could not analyse {path}: {e}")
            return
        self.reports.append(html)
        print(text + f"  report: {html}", file=self.out if self.out is not None else sys.stderr)

    def _next_path(self) -> Path:
        stamp = int(time.time() * 1000)
        path = trace_path(self.run_dir, self.rank, stamp)
        while path.exists() or path in self.traces:
            stamp += 1
            path = trace_path(self.run_dir, self.rank, stamp)
        return path

    def _fail(self, what: str, e: BaseException) -> None:
        self._failed = True
        self._warn_once(f"gpuscope profiling stopped: {what}: {type(e).__name__}: {e}")

    def _warn_once(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            warn_user(message, RuntimeWarning)


def _busy_profiler(torch: Any) -> str | None:
    """What already holds torch's profiler in this process, if anything: a gpuscope session
    (even one still waiting for its schedule to start it), or torch.profiler /
    torch.autograd.profiler started by the program."""
    if _ACTIVE:
        return f"another gpuscope.profile session is active (writing to {_ACTIVE[0].run_dir})"
    try:
        enabled = bool(torch._C._autograd._profiler_enabled())
    except Exception:  # noqa: BLE001 — a private API: without it, gpuscope's own check only
        enabled = False
    if enabled:
        return "torch.profiler (or torch.autograd.profiler) is already running"
    return None


def profile(
    run_dir: str | os.PathLike[str] | None = None,
    config: ProfilingConfig | None = None,
    *,
    summary: bool = True,
    out: IO[str] | None = None,
) -> ProfileSession:
    """A :class:`ProfileSession` for ``with``: ``gpuscope.profile(run_dir, config)``.
    ``run_dir`` defaults to ``$GPUSCOPE_RUN_DIR``, else ``runs/gpuscope``; ``config`` to
    :class:`ProfilingConfig`'s defaults. A disabled config gives a session that does
    nothing, so the same loop runs with and without profiling."""
    return ProfileSession(run_dir, config, summary=summary, out=out)
