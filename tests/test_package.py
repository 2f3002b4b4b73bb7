"""The package's own promises: importing it needs no torch, and it exports what it says."""

from __future__ import annotations

import subprocess
import sys

import gpuscope


def test_import_does_not_load_torch() -> None:
    code = "import sys, gpuscope; gpuscope.EventWriter; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_import_does_not_load_pandas() -> None:
    """pandas is an optional extra: only the notebook classes import it, on first use."""
    code = (
        "import sys, gpuscope; print('pandas' in sys.modules); "
        "gpuscope.TraceAnalysis; print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_torch_side_names_load_on_first_use() -> None:
    code = "import sys, gpuscope; gpuscope.MemoryProfiler; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_every_exported_name_resolves() -> None:
    for name in gpuscope.__all__:
        assert getattr(gpuscope, name) is not None, name
