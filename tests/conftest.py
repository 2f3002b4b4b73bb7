"""Shared fixtures: the real event files next to the repository, the ways of running the
``gpuscope`` command (``python -m gpuscope``, the pip-installed console script, the native
binary) and a small runner for them."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _chromium import find_chromium
from _helpers import (
    REPO_ROOT,
    SHARED_DATA,
    TFEVENTS_DATA,
    CliRunner,
    absent_shared_params,
    console_script,
    run,
    shared_data_absent,
    shared_data_required,
)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Where the shared data is required (``make test``, CI) and its directory is missing,
    the run stops here with one message instead of failing test by test."""
    if shared_data_required() and not SHARED_DATA.is_dir():
        pytest.exit(
            f"the shared real-GPU artifacts are missing: {SHARED_DATA} (expected at "
            "<repo>/../shared/data); GPUSCOPE_REQUIRE_SHARED=1 or CI=true makes them required",
            returncode=1,
        )


def _reference_path() -> Path:
    return TFEVENTS_DATA / "reference.json"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``real_event_name`` runs a test once per file listed in reference.json."""
    if "real_event_name" not in metafunc.fixturenames:
        return
    ref = _reference_path()
    if ref.is_file() or shared_data_required():
        metafunc.parametrize("real_event_name", sorted(json.loads(ref.read_text())))
    else:
        metafunc.parametrize("real_event_name", absent_shared_params(ref))


@pytest.fixture(scope="session")
def tfevents_data() -> Path:
    """Directory of the real event files (../shared/data/tfevents from the repository)."""
    if not _reference_path().is_file():
        shared_data_absent(_reference_path())
    return TFEVENTS_DATA


@pytest.fixture(scope="session")
def reference(tfevents_data: Path) -> dict[str, Any]:
    """What TensorBoard's reader finds in each real file (reference.json)."""
    data: dict[str, Any] = json.loads((tfevents_data / "reference.json").read_text())
    return data


@pytest.fixture(scope="session")
def gpuscope_script() -> Path:
    """The pip-installed ``gpuscope`` console script."""
    path = console_script()
    if path is None:
        pytest.skip("the gpuscope console script is not installed (pip install / maturin develop)")
    return path


@pytest.fixture(scope="session")
def native_binary() -> Path:
    """The native ``gpuscope`` binary of the CLI crate. With cargo at hand it is (re)built in
    debug mode first (a no-op when up to date), so that it matches the sources the
    installed package was built from; without cargo, an existing release or debug build."""
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO_ROOT / "target"))
    debug, release = target / "debug" / "gpuscope", target / "release" / "gpuscope"
    cargo = shutil.which("cargo")
    if cargo is not None:
        build = run([cargo, "build", "-q", "-p", "gpuscope-cli"], timeout=900, cwd=REPO_ROOT)
        if build.returncode != 0 or not debug.is_file():
            pytest.fail(f"cargo build -p gpuscope-cli failed:\n{build.stderr[-3000:]}")
        return debug
    built = [p for p in (release, debug) if p.is_file()]
    if not built:
        pytest.skip("no native gpuscope binary in target/ and no cargo to build one")
    return max(built, key=lambda p: p.stat().st_mtime)


@pytest.fixture(scope="session")
def cli_command(gpuscope_script: Path) -> Callable[[str], list[str]]:
    """argv prefix of the pip-installed command, run as ``module`` (``python -m gpuscope``)
    or as ``script`` (the console script)."""

    def command(via: str) -> list[str]:
        if via == "module":
            return [sys.executable, "-m", "gpuscope"]
        if via == "script":
            return [str(gpuscope_script)]
        raise ValueError(via)

    return command


@pytest.fixture(scope="session")
def run_cli(cli_command: Callable[[str], list[str]]) -> CliRunner:
    """Runs the pip-installed command (``via`` = ``module`` or ``script``) to completion."""

    def runner(via: str, *args: str | os.PathLike[str], **kwargs: Any) -> Any:
        return run([*cli_command(via), *map(str, args)], **kwargs)

    return runner


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's chromium for the HTML tests; they skip without it."""
    return find_chromium()
