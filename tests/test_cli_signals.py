"""The pip-installed ``gpuscope`` command behaves like the native binary: a closed output
pipe ends it quietly with 0, SIGTERM and SIGINT end it at once the default way (killed by
the signal, no Python traceback), and ``--help``/``--version``/unimplemented subcommands
exit as the native binary does, with the same output."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import gpuscope
import pytest
from _helpers import event_files, run

VIAS = ["script", "module", "native"]
BIG_SCALARS = 2_000_000
BIG_LINKS = 4  # extra names for the big file: the reader goes through it 1 + BIG_LINKS times

Command = Callable[[str], list[str]]


@pytest.fixture(scope="module")
def command(cli_command: Command, request: pytest.FixtureRequest) -> Command:
    """argv prefix for ``script`` (console script), ``module`` (python -m gpuscope) or
    ``native`` (the Rust binary)."""

    def prefix(via: str) -> list[str]:
        if via == "native":
            return [str(request.getfixturevalue("native_binary"))]
        return cli_command(via)

    return prefix


@pytest.fixture(scope="module")
def many_tags_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log directory with 3000 tags: far more output than a pipe buffer holds."""
    log_dir = tmp_path_factory.mktemp("many_tags")
    with gpuscope.EventWriter(log_dir) as w:
        for k in range(3000):
            w.add_scalar(f"group_{k // 100}/metric_{k}", k * 0.5, 1)
            w.add_scalar(f"group_{k // 100}/metric_{k}", k * 0.25, 2)
    return log_dir


@pytest.fixture(scope="module")
def big_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 million scalars in one file (~90 MB), plus symlinks to it as further event files,
    so that reading the whole directory takes seconds (measured: ~9 s for its 10 million
    records with the release build, ~90 s with a debug build); the tests signal it as soon
    as it has an event file open."""
    log_dir = tmp_path_factory.mktemp("big")
    with gpuscope.EventWriter(log_dir) as w:
        add = w.add_scalar
        for step in range(BIG_SCALARS):
            add("loss", 0.5, step, 1_700_000_000.0)
    (main,) = event_files(log_dir)
    for k in range(BIG_LINKS):
        (log_dir / f"events.out.tfevents.1700000000.link.{k}").symlink_to(main)
    return log_dir


@pytest.fixture
def signals_not_ignored() -> Iterator[None]:
    """SIGINT and SIGTERM not ignored in this process, so that commands started from it
    get the default dispositions, as from an interactive shell (a shell's background job
    starts with SIGINT ignored, and exec keeps ignored signals ignored)."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    if saved[signal.SIGINT] == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if saved[signal.SIGTERM] == signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def _wait_until_reading(pid: int, timeout: float = 30) -> None:
    """Waits until process ``pid`` has an event file open."""
    deadline = time.monotonic() + timeout
    fd_dir = Path(f"/proc/{pid}/fd")
    while time.monotonic() < deadline:
        try:
            targets = [os.readlink(fd) for fd in fd_dir.iterdir()]
        except (FileNotFoundError, ProcessLookupError):
            targets = []  # not started yet, or gone (the caller checks which)
        except OSError:
            targets = []
        if any("tfevents" in t for t in targets):
            return
        time.sleep(0.005)
    pytest.fail(f"process {pid} never opened an event file within {timeout} s")


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.usefixtures("signals_not_ignored")
def test_signal_ends_command_promptly(
    big_logdir: Path, command: Command, via: str, sig: signal.Signals
) -> None:
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc to see when the command is reading")
    cmd = [*command(via), "tb", str(big_logdir), "--format", "json", "-o", os.devnull]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_until_reading(proc.pid)
        assert proc.poll() is None, "the command finished before the signal: grow big_logdir"
        proc.send_signal(sig)
        try:
            stdout, stderr = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running 5 s after {sig.name}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == -sig, (proc.returncode, stderr)
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    assert stderr == "" and stdout == ""


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("fmt", ["text", "json", "csv"])
def test_closed_pipe_is_quiet_success(
    many_tags_dir: Path, command: Command, via: str, fmt: str, tmp_path: Path
) -> None:
    full = run([*command(via), "tb", str(many_tags_dir), "--format", fmt])
    assert full.returncode == 0, full.stderr
    assert len(full.stdout.encode()) > 2 * 65536, "output must overflow the pipe buffer"

    err = tmp_path / "stderr"
    script = 'set -o pipefail; "$@" 2>"$ERR" | head -1; echo "status ${PIPESTATUS[*]}"'
    cmd = ["bash", "-c", script, "bash", *command(via), "tb", str(many_tags_dir), "--format", fmt]
    result = run(cmd, env={**os.environ, "ERR": str(err)})
    lines = result.stdout.splitlines()
    assert lines[-1] == "status 0 0", (result.stdout[-500:], err.read_text())
    assert lines[0] == full.stdout.splitlines()[0]
    assert err.read_text() == ""


@pytest.mark.parametrize("via", VIAS)
def test_help_and_version(command: Command, via: str) -> None:
    help_ = run([*command(via), "--help"])
    assert help_.returncode == 0 and help_.stderr == ""
    assert "Usage:" in help_.stdout and "tb" in help_.stdout
    tb_help = run([*command(via), "tb", "--help"])
    assert tb_help.returncode == 0 and "--keep-going" in tb_help.stdout
    version = run([*command(via), "--version"])
    assert version.returncode == 0 and version.stderr == ""
    assert version.stdout.strip() == f"gpuscope {gpuscope.__version__}"


@pytest.mark.parametrize("via", VIAS)
def test_no_subcommand_is_a_usage_error_with_the_help(command: Command, via: str) -> None:
    result = run([*command(via)])
    assert result.returncode == 2
    assert "Usage:" in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("via", ["script", "module"])
@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--version"],
        ["report", "x"],
        ["tb"],
        ["tb", "--format", "yaml", "."],
        ["tb", "{missing}"],
        ["tb", "{dir}", "--tags"],
        ["tb", "{dir}", "--tag", "group_3/metric_300", "--format", "csv"],
        ["tb", "{dir}", "--tag", "no/such/tag"],
    ],
    ids=lambda a: " ".join(a),
)
def test_same_as_native_binary(
    command: Command, via: str, args: list[str], many_tags_dir: Path, tmp_path: Path
) -> None:
    argv = [a.format(dir=many_tags_dir, missing=tmp_path / "missing") for a in args]
    native = run([*command("native"), *argv])
    pip = run([*command(via), *argv])
    assert (pip.returncode, pip.stdout, pip.stderr) == (
        native.returncode,
        native.stdout,
        native.stderr,
    )
