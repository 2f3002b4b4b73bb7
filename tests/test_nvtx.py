"""``gpuscope.nvtx`` and ``gpuscope.capture`` (python/gpuscope/nvtx.py), judged at the
library boundary: what gpuscope hands to the NVTX library and to the CUDA runtime's profiler
API is recorded by stand-ins for those libraries and compared with the calls the program
asked for. gpuscope itself, torch and the training loops are real; only the libraries that
would talk to Nsight are replaced, each in a subprocess of its own.

* Through the ``nvtx`` package: a recording ``nvtx`` module first on ``sys.path`` while a
  small model trains on the CPU with ranges (as ``with`` and as a decorator), marks, an
  exception inside a range and a ``MemoryProfiler`` with a section. The exact sequence of
  pushes, pops and marks with their messages, colours and domains is compared with the one
  the loop implies, interleaved with the loop's own notes of its work; every recorded call
  is also bound to the real package's signatures, so the real package accepts it.
* Through torch, as on a CUDA machine: torch says CUDA is available, and the libraries
  behind ``torch.cuda.nvtx`` and ``torch.cuda.profiler`` (``torch._C._nvtx``,
  ``torch._C._cudart``) are recording stand-ins.
* The capture range without torch: a CUDA runtime built here from C whose
  ``cudaProfilerStart`` and ``cudaProfilerStop`` append their names to a file, found as the
  system's ``cudart`` by ctypes' library lookup.
* No backend (no ``nvtx`` package, CUDA ruled out by ``GPUSCOPE_NO_GPU``): nothing reaches
  any library and the wrapped code still runs.

Every subprocess sets ``GPUSCOPE_NO_GPU`` or fakes CUDA itself, so the tests mean the same on
a machine with a GPU.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gpuscope
import pytest
import torch
from _helpers import run

SUBPROCESS_ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
ITERATIONS = 3


def run_python(code: str, *args: str, path: Path | None = None, **env: str) -> dict[str, Any]:
    """Runs ``code`` in a fresh interpreter (``path`` first on its ``sys.path``) and returns
    the JSON object its last line prints."""
    full_env = {**SUBPROCESS_ENV, **env}
    if path is not None:
        full_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(path), full_env.get("PYTHONPATH")) if p
        )
    out = run([sys.executable, "-c", code, *args], timeout=120, env=full_env)
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# ------------------------------------------------------------ which backend


@pytest.fixture
def nvtx_chosen_again() -> Iterator[None]:
    """The NVTX backend (chosen once per process) chosen again in the test and after it."""
    gpuscope.nvtx._backend.cache_clear()
    yield
    gpuscope.nvtx._backend.cache_clear()


def test_nvtx_backend_without_cuda(
    monkeypatch: pytest.MonkeyPatch, nvtx_chosen_again: None
) -> None:
    """torch imported, CUDA ruled out by ``GPUSCOPE_NO_GPU``, the ``nvtx`` package installed:
    ranges go through the package."""
    pytest.importorskip("nvtx")
    monkeypatch.setenv("GPUSCOPE_NO_GPU", "1")
    assert gpuscope.nvtx.backend() == "nvtx"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_nvtx_backend_with_cuda(monkeypatch: pytest.MonkeyPatch, nvtx_chosen_again: None) -> None:
    """With CUDA, ranges go through torch.cuda.nvtx; ``GPUSCOPE_NO_GPU=nvml`` rules out
    NVML alone, not CUDA."""
    for value in (None, "0", "nvml"):
        if value is None:
            monkeypatch.delenv("GPUSCOPE_NO_GPU", raising=False)
        else:
            monkeypatch.setenv("GPUSCOPE_NO_GPU", value)
        gpuscope.nvtx._backend.cache_clear()
        assert gpuscope.nvtx.backend() == "torch.cuda.nvtx", value


def test_wrapped_code_runs_unchanged() -> None:
    """Ranges, marks and capture ranges in this process (whatever its backend): the code
    they wrap runs and returns as without them; a decorated function keeps its name."""
    with gpuscope.nvtx.range("forward") as r:
        assert r is not None
        with gpuscope.nvtx.range("inner", color="green", domain="gpuscope-tests"):
            gpuscope.nvtx.mark("inside", color="blue", domain="gpuscope-tests")
    gpuscope.nvtx.mark("after")

    @gpuscope.nvtx.range("matmul", color="blue")
    def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b

    a, b = torch.eye(3), torch.arange(9.0).reshape(3, 3)
    assert torch.equal(matmul(a, b), b)
    assert torch.equal(matmul(b, a), b)  # the same range object used twice
    assert matmul.__name__ == "matmul"

    with gpuscope.capture():
        x = torch.ones(2) * 3

    @gpuscope.capture()
    def loop(n: int) -> int:
        return n + 1

    assert loop(41) == 42
    assert float(x.sum()) == 6.0


def test_exception_in_a_range_propagates_unchanged() -> None:
    error = KeyError("boom")
    with (
        pytest.raises(KeyError) as excinfo,
        gpuscope.nvtx.range("failing", domain="gpuscope-tests"),
    ):
        raise error
    assert excinfo.value is error

    @gpuscope.nvtx.range("failing-fn")
    def fail() -> None:
        raise ZeroDivisionError("inside")

    with pytest.raises(ZeroDivisionError, match="inside"):
        fail()
    with pytest.raises(ValueError, match="captured"), gpuscope.capture():
        raise ValueError("captured")
    # The ranges were popped: the next ones work as before.
    with gpuscope.nvtx.range("after-failure"), gpuscope.nvtx.range("nested"):
        gpuscope.nvtx.mark("fine")


NVTX_CALLS = textwrap.dedent(
    """
    import gpuscope

    with gpuscope.nvtx.range("outer", color="green"):
        gpuscope.nvtx.mark("m", color="red")
        with gpuscope.nvtx.range("inner", domain="d"):
            pass

    @gpuscope.nvtx.range("fn")
    def fn(a, b=2):
        return a * b

    @gpuscope.capture()
    def captured():
        return "kept"

    with gpuscope.capture():
        pass
    error = RuntimeError("propagates")
    try:
        with gpuscope.nvtx.range("bad"):
            raise error
    except RuntimeError as e:
        propagated = e is error
    else:
        propagated = False
    with gpuscope.nvtx.range("after"):
        pass
    result = {
        "backend": gpuscope.nvtx.backend(),
        "fn": fn(21),
        "captured": captured(),
        "propagated": propagated,
    }
    """
)

NVTX_WITHOUT_PACKAGE = (
    textwrap.dedent(
        """
        import json, sys
        sys.modules["nvtx"] = None  # import nvtx raises ImportError from here on
        import torch  # present; CUDA, if any, ruled out by GPUSCOPE_NO_GPU
        """
    )
    + NVTX_CALLS
    + textwrap.dedent(
        """
        try:
            import nvtx
            blocked = False
        except ImportError:
            blocked = True
        result["blocked"] = blocked
        print(json.dumps(result))
        """
    )
)

NVTX_WITHOUT_TORCH = (
    "import json, sys\n"
    + NVTX_CALLS
    + textwrap.dedent(
        """
        result["torch_imported"] = "torch" in sys.modules
        import importlib.util
        result["torch_importable"] = importlib.util.find_spec("torch") is not None
        print(json.dumps(result))
        """
    )
)


def test_nvtx_is_a_no_op_without_a_backend() -> None:
    """No ``nvtx`` package and no CUDA (``GPUSCOPE_NO_GPU`` rules it out on a GPU machine):
    ``backend()`` is None and every call does nothing but still runs the code it wraps."""
    result = run_python(NVTX_WITHOUT_PACKAGE, GPUSCOPE_NO_GPU="1")
    assert result == {
        "backend": None,
        "fn": 42,
        "captured": "kept",
        "propagated": True,
        "blocked": True,
    }


def test_nvtx_needs_no_torch() -> None:
    """A JAX program (as a profiling guide annotates one with NVTX): ranges, marks and the
    capture range work without torch, through the real ``nvtx`` package, and never import
    torch (which is installed)."""
    result = run_python(NVTX_WITHOUT_TORCH)
    assert result == {
        "backend": "nvtx",
        "fn": 42,
        "captured": "kept",
        "propagated": True,
        "torch_imported": False,
        "torch_importable": True,
    }


# ------------------------------------------------------------ the nvtx package, recorded

# NVIDIA's nvtx package as gpuscope sees it, recording each call instead of emitting it.
# ``CALLS`` is also where the training loop notes its own work, so the order of both shows.
RECORDING_NVTX = '''
"""A recording stand-in for NVIDIA's nvtx package (gpuscope's tests)."""
CALLS = []


def push_range(*args, **kwargs):
    CALLS.append(["push_range", list(args), kwargs])


def pop_range(*args, **kwargs):
    CALLS.append(["pop_range", list(args), kwargs])


def mark(*args, **kwargs):
    CALLS.append(["mark", list(args), kwargs])
'''

NVTX_TRAINING = textwrap.dedent(
    f"""
    import json, sys
    import torch
    from torch import nn
    import gpuscope
    import nvtx  # the recording stand-in, first on sys.path

    def work(what):
        nvtx.CALLS.append(["work", [what], {{}}])

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scope = gpuscope.MemoryProfiler(sys.argv[1], model=model, optimizer=opt, every=2)

    @gpuscope.nvtx.range("data", color="green", domain="train")
    def batch(it):
        work(f"data {{it}}")
        x = torch.randn(4, 8)
        return x, x.sum(dim=1, keepdim=True)

    for it in range(1, {ITERATIONS} + 1):
        with gpuscope.nvtx.range(f"iteration {{it}}", color="blue", domain="train"):
            x, y = batch(it)
            with gpuscope.nvtx.range("forward", color=0x76B900, domain="train"):
                with scope.section("forward"):
                    loss = nn.functional.mse_loss(model(x), y)
                work(f"forward {{it}}")
            with gpuscope.nvtx.range("backward"):
                loss.backward()
                work(f"backward {{it}}")
            opt.step()
            opt.zero_grad()
            scope.step(it, loss=loss)
            gpuscope.nvtx.mark("step", color="red", domain="train")
    try:
        with gpuscope.nvtx.range("validation", domain="eval"):
            raise RuntimeError("validation failed")
    except RuntimeError as e:
        work(str(e))
    scope.close()
    print(json.dumps({{
        "backend": gpuscope.nvtx.backend(),
        "nvtx_file": nvtx.__file__,
        "calls": nvtx.CALLS,
        "records": sum(1 for _ in open(sys.argv[1] + "/profiles/memory.jsonl")),
    }}))
    """
)


def expected_nvtx_calls() -> list[list[Any]]:
    """What NVTX_TRAINING asks for, as ``[call, message, color, domain]`` (a pop has its
    domain only) and ``["work", what]`` for the loop's own notes, in order."""
    calls: list[list[Any]] = []
    for it in range(1, ITERATIONS + 1):
        calls += [
            ["push_range", f"iteration {it}", "blue", "train"],
            ["push_range", "data", "green", "train"],
            ["work", f"data {it}"],
            ["pop_range", "train"],
            ["push_range", "forward", 0x76B900, "train"],
            ["work", f"forward {it}"],
            ["pop_range", "train"],
            ["push_range", "backward", None, None],
            ["work", f"backward {it}"],
            ["pop_range", None],
            ["mark", "step", "red", "train"],
            ["pop_range", "train"],
        ]
    calls += [
        ["push_range", "validation", None, "eval"],
        ["pop_range", "eval"],
        ["work", "validation failed"],
    ]
    return calls


def as_the_package_reads_them(recorded: list[list[Any]]) -> list[list[Any]]:
    """Each recorded call bound to the real nvtx package's signature (so the package would
    accept it), as ``[call, message, color, domain]`` or ``[pop_range, domain]``; the
    loop's notes as ``["work", what]``."""
    import nvtx  # the real package

    out: list[list[Any]] = []
    for name, args, kwargs in recorded:
        if name == "work":
            out.append([name, *args])
            continue
        bound = inspect.signature(getattr(nvtx, name)).bind(*args, **kwargs)
        bound.apply_defaults()
        given = dict(bound.arguments)
        if name == "pop_range":
            out.append([name, given.pop("domain")])
        else:
            out.append([name, given.pop("message"), given.pop("color"), given.pop("domain")])
            # gpuscope has neither categories nor payloads.
            assert given == {"category": None, "payload": None}, (name, given)
    return out


def test_training_loop_emits_the_ranges_and_marks_it_asks_for(tmp_path: Path) -> None:
    """A CPU training loop with ranges, marks, a failing range and a memory profiler:
    through the ``nvtx`` package, gpuscope pushes, pops and marks exactly what the loop
    asked for, with its colours and domains (a pop names the domain of its push), around
    the work each range wraps, and nothing of its own (the profiler's records and sections
    add no NVTX call)."""
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "nvtx.py").write_text(RECORDING_NVTX)
    run_dir = tmp_path / "run"
    result = run_python(NVTX_TRAINING, str(run_dir), path=fake, GPUSCOPE_NO_GPU="1")
    assert result["backend"] == "nvtx"
    assert Path(result["nvtx_file"]) == fake / "nvtx.py"
    assert result["records"] == 1  # every=2 over 3 iterations: the profiler did record
    assert as_the_package_reads_them(result["calls"]) == expected_nvtx_calls()


# ------------------------------------------- torch.cuda.nvtx and torch.cuda.profiler, recorded

# A program that imported torch on a CUDA machine: torch says CUDA is available, and the
# libraries torch.cuda.nvtx and torch.cuda.profiler call are recording stand-ins.
TORCH_CUDA = textwrap.dedent(
    """
    import json
    import torch
    from torch import nn
    import gpuscope

    calls = []

    class RecordingNvtx:  # torch._C._nvtx
        def rangePushA(self, message):
            calls.append(["rangePushA", message])
            return 0

        def rangePop(self):
            calls.append(["rangePop"])
            return 0

        def markA(self, message):
            calls.append(["markA", message])

    class RecordingCudart:  # torch._C._cudart
        def cudaProfilerStart(self):
            calls.append(["cudaProfilerStart"])
            return torch.cuda._cudart.cudaError.success

        def cudaProfilerStop(self):
            calls.append(["cudaProfilerStop"])
            return torch.cuda._cudart.cudaError.success

    torch.cuda.is_available = lambda: True
    torch.cuda.nvtx._nvtx = RecordingNvtx()
    torch.cuda.profiler.cudart = lambda: RecordingCudart()

    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gpuscope.capture():
        for it in range(2):
            with gpuscope.nvtx.range(f"iteration {it}", color="blue", domain="train"):
                loss = model(torch.ones(2, 4)).pow(2).mean()
                loss.backward()
                calls.append(["work", it])
                gpuscope.nvtx.mark("step", color="red", domain="train")
            opt.step()
            opt.zero_grad()

    @gpuscope.capture()
    def evaluate():
        calls.append(["work", "evaluate"])

    evaluate()
    try:
        with gpuscope.capture():
            raise RuntimeError("inside the capture range")
    except RuntimeError as e:
        calls.append(["work", str(e)])
    print(json.dumps({"backend": gpuscope.nvtx.backend(), "calls": calls}))
    """
)


def test_through_torch_on_a_cuda_machine() -> None:
    """With torch imported and CUDA available, ranges and marks go through
    ``torch.cuda.nvtx`` (messages only: torch takes no colour or domain) and the capture
    range through ``torch.cuda.profiler``: one ``cudaProfilerStart`` on entry and one
    ``cudaProfilerStop`` on exit, around the work, also as a decorator and when the body
    raises."""
    result = run_python(TORCH_CUDA)
    assert result["backend"] == "torch.cuda.nvtx"
    iteration = [
        [["rangePushA", f"iteration {it}"], ["work", it], ["markA", "step"], ["rangePop"]]
        for it in range(2)
    ]
    assert result["calls"] == [
        ["cudaProfilerStart"],
        *iteration[0],
        *iteration[1],
        ["cudaProfilerStop"],
        ["cudaProfilerStart"],
        ["work", "evaluate"],
        ["cudaProfilerStop"],
        ["cudaProfilerStart"],
        ["cudaProfilerStop"],
        ["work", "inside the capture range"],
    ]


# --------------------------------------------------- a CUDA runtime without torch, recorded

# cudaProfilerStart/Stop with the CUDA runtime's signature (cudaError_t f(void)), appending
# their names to the file named by GPUSCOPE_TEST_CUDART_LOG; 0 is cudaSuccess.
RECORDING_CUDART_C = r"""
#include <stdio.h>
#include <stdlib.h>

static int note(const char *name) {
    FILE *f = fopen(getenv("GPUSCOPE_TEST_CUDART_LOG"), "a");
    if (f == NULL) return 1;
    fprintf(f, "%s\n", name);
    fclose(f);
    return 0;
}

int cudaProfilerStart(void) { return note("cudaProfilerStart"); }
int cudaProfilerStop(void) { return note("cudaProfilerStop"); }
"""

# A program without torch whose system has a CUDA runtime: ctypes' lookup of "cudart"
# finds the recording one built by the test (argv[1]); notes go to the same log.
CUDART_CAPTURE = textwrap.dedent(
    """
    import ctypes.util, json, os, sys

    system_lookup = ctypes.util.find_library
    ctypes.util.find_library = lambda name: sys.argv[1] if name == "cudart" else system_lookup(name)
    import gpuscope

    def work(what):
        with open(os.environ["GPUSCOPE_TEST_CUDART_LOG"], "a") as f:
            f.write(f"work {what}\\n")

    with gpuscope.capture():
        work("train")
        with gpuscope.capture():  # nested: torch.cuda.profiler would be called twice too
            work("inner")

    @gpuscope.capture()
    def evaluate():
        work("evaluate")

    evaluate()
    evaluate()
    try:
        with gpuscope.capture():
            raise RuntimeError("failed")
    except RuntimeError:
        work("raised")
    print(json.dumps({"torch_imported": "torch" in sys.modules}))
    """
)


@pytest.fixture(scope="module")
def recording_cudart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recording CUDA runtime, compiled with the system's C compiler (the one cargo
    links with)."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    assert cc is not None, "a C compiler (cc) is needed to build the recording CUDA runtime"
    work = tmp_path_factory.mktemp("cudart")
    source = work / "cudart.c"
    source.write_text(RECORDING_CUDART_C)
    library = work / "libcudart.so"
    subprocess.run(
        [cc, "-shared", "-fPIC", "-o", str(library), str(source)], check=True, timeout=120
    )
    return library


def test_capture_calls_the_cuda_runtime_without_torch(
    recording_cudart: Path, tmp_path: Path
) -> None:
    """Without torch, the capture range calls the CUDA runtime's ``cudaProfilerStart`` on
    entry and ``cudaProfilerStop`` on exit, once each per range, around the work, nested,
    as a decorator and when the body raises; torch is never imported."""
    log = tmp_path / "calls.log"
    result = run_python(CUDART_CAPTURE, str(recording_cudart), GPUSCOPE_TEST_CUDART_LOG=str(log))
    assert result == {"torch_imported": False}
    start, stop = "cudaProfilerStart", "cudaProfilerStop"
    assert log.read_text().splitlines() == [
        start,
        "work train",
        start,
        "work inner",
        stop,
        stop,
        start,
        "work evaluate",
        stop,
        start,
        "work evaluate",
        stop,
        start,
        stop,
        "work raised",
    ]


def test_capture_calls_nothing_when_cuda_is_ruled_out(
    recording_cudart: Path, tmp_path: Path
) -> None:
    """``GPUSCOPE_NO_GPU=1`` rules the CUDA runtime out even where one is found: the
    capture range runs its body and calls nothing."""
    log = tmp_path / "calls.log"
    result = run_python(
        CUDART_CAPTURE,
        str(recording_cudart),
        GPUSCOPE_TEST_CUDART_LOG=str(log),
        GPUSCOPE_NO_GPU="1",
    )
    assert result == {"torch_imported": False}
    assert log.read_text().splitlines() == [
        "work train",
        "work inner",
        "work evaluate",
        "work evaluate",
        "work raised",
    ]
