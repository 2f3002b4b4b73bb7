"""Reading allocator snapshot pickles safely: every pickle protocol reads the same, the
fast read without the trace reads past every kind of value, pickles that would run code
are refused (alone and nested in a valid snapshot), and broken or hostile input is
refused with one line on stderr, exit 2 and no code run, or a clear exception."""

from __future__ import annotations

import os
import pickle
import pickletools
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import gpuscope
import pytest
from _helpers import gpuscope_cli, run
from _snapshots import (
    REAL,
    REFUSED_OPCODES,
    SNAPSHOTS,
    api_error,
    as_json,
    call_sites_snapshot,
    real_data,
    real_json,
    refused_by_cli,
    snapshot_json,
    snapshot_text,
    without_path,
    write,
)

# -------------------------------------------------------------------------- protocols


DUMP_PARTS = ("stats", "fragmentation", "now")
TRACE_PARTS = ("trace", "peak", "stacked", "devices", "never_freed", "churn", "ooms")


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("name", REAL)
def test_every_pickle_protocol_reads_the_same(
    tmp_path: Path,
    name: str,
    protocol: int,
) -> None:
    """The real snapshot re-dumped by the standard library with each protocol (torch
    writes 2–5; 0 and 1 are text and early binary): the same document. With
    ``--no-trace`` (``trace=False``), the dump's parts of it, the trace's parts empty;
    protocol 0 puts its dict's pairs on the stack one at a time (SETITEM, no MARK), where
    the reader does not stop: that file is read whole."""
    path = write(tmp_path / f"p{protocol}.pickle", real_data()[name], protocol)
    assert without_path(snapshot_json(path)) == without_path(real_json()[name])
    whole = real_json()[name]
    assert not whole["trace_skipped"] and whole["trace"] is not None
    for doc in (
        snapshot_json(path, "--no-trace"),
        gpuscope.analyze_snapshot(path, trace=False),
        gpuscope.analyze_snapshot(path.read_bytes(), trace=False),
    ):
        for part in DUMP_PARTS:
            assert as_json(doc)[part] == whole[part], part
        if protocol == 0:
            assert without_path(as_json(doc)) == without_path(whole)
            continue
        assert doc["trace_skipped"]
        for part in TRACE_PARTS:
            assert not doc[part], part
        assert doc["allocator_settings"] == {}
    text = snapshot_text(path, "--no-trace")
    assert ("Trace not read" in text) == (protocol > 0)
    assert ("Alive at the peak" in text) == (protocol == 0)
    assert "Alive at the dump" in text


def plain_values(protocol: int) -> dict[str, Any]:
    """A value of every plain kind the protocol writes without REDUCE, so that the
    pickle has an opcode of each argument layout."""
    values: dict[str, Any] = {
        "none": None,
        "bools": [True, False],
        "ints": [7, 300, 70000, -5, 1 << 40, -(1 << 62)],
        "float": 1.5,
        "short": "device",
        "long": "x" * 300,
        "longer": "é" * 70000,
        "tuples": [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)],
        "nested": {"a": [{"b": ("c", [None])}]},
    }
    if protocol >= 3:
        values["bytes"] = [b"\x00" * 10, b"\xff" * 300]
    if protocol >= 4:
        values["sets"] = [{1, 2}, frozenset({"a"})]
    if protocol >= 5:
        values["bytearray"] = bytearray(b"\x01\x02")
    return values


@pytest.mark.parametrize("protocol", [1, 2, 3, 4, 5])
def test_no_trace_reads_past_every_kind_of_value_and_refuses_every_cut(
    tmp_path: Path, protocol: int
) -> None:
    """After the trace, values of every argument layout: reading only the dump reaches
    the end through them (the same stats as a whole read), and a file cut anywhere after
    the point where it stops reading is refused, as a whole read refuses it."""
    data = call_sites_snapshot()
    data["allocator_settings"]["values"] = plain_values(protocol)
    raw = pickle.dumps(data, protocol=protocol)
    whole = gpuscope.analyze_snapshot(raw)
    dump = gpuscope.analyze_snapshot(raw, trace=False)
    assert dump["trace_skipped"] and not whole["trace_skipped"]
    assert dump["stats"] == whole["stats"] and dump["now"] == whole["now"]
    stop = raw.index(b"device_traces")
    cuts = sorted({*range(stop, len(raw), 97), len(raw) - 2, len(raw) - 1})
    for cut in cuts:
        error = api_error(raw[:cut], trace=False)
        assert isinstance(error, gpuscope.BadInputError), cut
        assert "truncated" in str(error) or "ended" in str(error), (cut, str(error))


def test_no_trace_does_not_build_what_it_reads_past(tmp_path: Path) -> None:
    """A trace entry that is not a dict: a whole read refuses it, reading only the dump
    reads past it (it is never built)."""
    data = call_sites_snapshot()
    data["device_traces"][0].append(7)
    raw = pickle.dumps(data, protocol=4)
    assert "not a dict" in str(api_error(raw))
    assert gpuscope.analyze_snapshot(raw, trace=False)["trace_skipped"]


def test_integers_of_any_width_are_numbers(tmp_path: Path) -> None:
    """An allocator setting wider than 64 bits is shown as a number, one of 2**64 - 1 (a
    size_t) exactly; a size that no memory comes near is refused."""
    data = call_sites_snapshot()
    data["allocator_settings"]["huge"] = 1 << 100
    data["allocator_settings"]["size_t_max"] = 2**64 - 1
    doc = gpuscope.analyze_snapshot(pickle.dumps(data, protocol=4))
    assert doc["allocator_settings"]["huge"] == "1.2676506002282294e30"
    assert doc["allocator_settings"]["size_t_max"] == str(2**64 - 1)
    data["segments"][0]["blocks"][0]["size"] = 2**64 - 1
    assert "`size` too large" in str(api_error(pickle.dumps(data, protocol=4)))
    data["segments"][0]["blocks"][0]["size"] = 1 << 70
    assert "`size` wider than 64 bits" in str(api_error(pickle.dumps(data, protocol=4)))


def test_protocol_5_bytearray_is_plain_data(tmp_path: Path) -> None:
    """Protocol 5 writes a bytearray in band with BYTEARRAY8: plain data, read."""
    data = call_sites_snapshot()
    data["allocator_settings"]["blob"] = bytearray(b"\x00\x01")
    raw = pickle.dumps(data, protocol=5)
    assert "BYTEARRAY8" in {op.name for op, _, _ in pickletools.genops(raw)}
    doc = gpuscope.analyze_snapshot(raw)
    plain = gpuscope.analyze_snapshot(pickle.dumps(call_sites_snapshot(), protocol=5))
    assert doc["stats"] == plain["stats"]
    assert doc["trace"] == plain["trace"]


# ------------------------------------------------------------------ malicious pickles


class RunsCode:
    """Unpickling this runs ``touch MARKER``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def first_refused(raw: bytes) -> tuple[str, int]:
    """The first opcode a safe reader must refuse, and its byte offset (pickletools)."""
    for op, _, pos in pickletools.genops(raw):
        if op.name in REFUSED_OPCODES:
            assert pos is not None
            return op.name, pos
    raise AssertionError("no refused opcode in the pickle")


def check_refused(path: Path, raw: bytes) -> None:
    """CLI, API on the path and API on the bytes all refuse the pickle, naming the opcode
    and its offset; also when reading only the state at the dump (``--no-trace``), which
    reads past the trace without building it."""
    opcode, offset = first_refused(raw)
    for trace in (True, False):
        line = refused_by_cli(path, *([] if trace else ["--no-trace"]))
        for message in (
            line,
            str(api_error(path, trace)),
            str(api_error(raw, trace)),
        ):
            assert re.search(rf"\b{opcode}\b", message), (trace, message)
            assert f"offset {offset}" in message, (trace, message)
        assert isinstance(api_error(path, trace), gpuscope.BadInputError)
        assert isinstance(api_error(raw, trace), gpuscope.BadInputError)


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_a_pickle_that_runs_code_is_refused(tmp_path: Path, protocol: int) -> None:
    """``os.system("touch marker")`` by GLOBAL (protocols 0–3) or STACK_GLOBAL (4–5) and
    REDUCE: refused with the opcode named, by the command and the API, and never run."""
    marker = tmp_path / "marker"
    raw = pickle.dumps(RunsCode(marker), protocol=protocol)
    opcode, _ = first_refused(raw)
    assert opcode == ("GLOBAL" if protocol < 4 else "STACK_GLOBAL")
    path = tmp_path / "evil.pickle"
    path.write_bytes(raw)
    check_refused(path, raw)
    assert not marker.exists()


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_code_nested_inside_a_valid_snapshot_is_refused(tmp_path: Path, protocol: int) -> None:
    """The same payload as a frame's file name deep inside an otherwise valid snapshot:
    the reader stops at it, not after building the rest."""
    marker = tmp_path / "marker"
    data = call_sites_snapshot()
    data["device_traces"][0][3]["frames"][6]["filename"] = RunsCode(marker)
    raw = pickle.dumps(data, protocol=protocol)
    path = tmp_path / "nested.pickle"
    path.write_bytes(raw)
    _, offset = first_refused(raw)
    assert offset > 100, "the payload is inside the snapshot, not at its start"
    check_refused(path, raw)
    assert not marker.exists()


HANDMADE = {
    # None() — a call without a global
    "reduce": b"\x80\x02N)R.",
    # {}.__setstate__({}) — BUILD calls __setstate__ or updates __dict__
    "build": b"\x80\x02}}b.",
    # INST imports a class by name from text (protocol 0)
    "inst": b"(S'touch m'\nios\nsystem\n.",
    # an object from copyreg's extension registry
    "ext1": b"\x80\x02\x82\x01)R.",
    "ext2": b"\x80\x02\x83\x01\x00)R.",
    # persistent ids only the writer's persistent_load can resolve
    "persid": b"Pfoo\n.",
    "binpersid": b"\x80\x02X\x03\x00\x00\x00fooQ.",
    # NEWOBJ: cls.__new__(cls, *args)
    "newobj": b"\x80\x02N)\x81.",
}


@pytest.mark.parametrize("kind", sorted(HANDMADE))
def test_other_opcodes_that_would_call_code_are_refused(tmp_path: Path, kind: str) -> None:
    raw = HANDMADE[kind]
    path = tmp_path / f"{kind}.pickle"
    path.write_bytes(raw)
    check_refused(path, raw)


# --------------------------------------------------------------------------- bad input


def bad_inputs(tmp: Path) -> dict[str, Path]:
    """Files that are not snapshots, each with the reason it is not."""
    real = next(iter(sorted(SNAPSHOTS.glob("*.pickle"))), None)
    out: dict[str, Path] = {}
    (tmp / "empty.pickle").write_bytes(b"")
    out["empty"] = tmp / "empty.pickle"
    out["list_of_ints"] = write(tmp / "ints.pickle", [1, 2, 3])
    out["dict_without_segments"] = write(tmp / "nosegs.pickle", {"device_traces": [[]]})
    out["string"] = write(tmp / "str.pickle", "segments")
    out["segments_not_a_list"] = write(tmp / "seg.pickle", {"segments": 3})
    out["block_without_size"] = write(
        tmp / "nosize.pickle",
        {"segments": [{"total_size": 10, "blocks": [{"state": "inactive"}]}]},
    )
    out["negative_size"] = write(
        tmp / "neg.pickle",
        {"segments": [{"total_size": 10, "blocks": [{"size": -5, "state": "inactive"}]}]},
    )
    out["integer_wider_than_64_bits"] = write(
        tmp / "wide.pickle", {"segments": [{"total_size": 1 << 70, "blocks": []}]}
    )
    out["trace_entry_not_a_dict"] = write(
        tmp / "entry.pickle", {"segments": [], "device_traces": [[7]]}
    )
    out["text_not_a_pickle"] = tmp / "text.pickle"
    out["text_not_a_pickle"].write_text("segments: 3\n")
    if real is not None:
        raw = real.read_bytes()
        for cut in (1, 2, 100, len(raw) // 3, len(raw) // 2, len(raw) - 1):
            out[f"truncated_at_{cut}"] = tmp / f"cut{cut}.pickle"
            out[f"truncated_at_{cut}"].write_bytes(raw[:cut])
    return out


def test_bad_inputs_are_refused_cleanly(tmp_path: Path) -> None:
    """Each: exit 2 with one ``error:`` line and no traceback from the command; a
    BadInputError (not a panic) from the API, on the path and on the bytes. The same with
    ``--no-trace``, but for a bad trace entry: that reading does not look into entries."""
    for kind, path in bad_inputs(tmp_path).items():
        for trace in (True, False):
            if kind == "trace_entry_not_a_dict" and not trace:
                doc = snapshot_json(path, "--no-trace")
                assert doc["trace_skipped"] and doc["stats"]["segments"] == 0
                continue
            line = refused_by_cli(path, *([] if trace else ["--no-trace"]))
            assert path.name in line, (kind, line)
            assert isinstance(api_error(path, trace), gpuscope.BadInputError), kind
            assert isinstance(api_error(path.read_bytes(), trace), gpuscope.BadInputError), kind


def test_a_directory_or_a_missing_file_is_an_os_error(tmp_path: Path) -> None:
    for path in (tmp_path, tmp_path / "missing.pickle"):
        line = refused_by_cli(path)
        assert str(path.name) in line
        assert isinstance(api_error(path), OSError)
    assert isinstance(api_error(tmp_path / "missing.pickle"), FileNotFoundError)


def run_isolated(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Runs Python code in a child process: a crash there cannot take pytest down."""
    return run([sys.executable, "-c", code, *args], timeout=120)


API_IN_A_CHILD = (
    "import sys, gpuscope\n"
    "try:\n"
    "    gpuscope.analyze_snapshot(sys.argv[1])\n"
    "except (gpuscope.BadInputError, OSError) as e:\n"
    "    print('refused:', e)\n"
    "else:\n"
    "    print('read')\n"
)


def check_read_or_refused(path: Path) -> None:
    """The command ends with 0 or 2, never by a signal; the API returns or raises."""
    out = gpuscope_cli("snapshot", path, "--format", "json")
    assert out.returncode in (0, 2), f"exit {out.returncode}: {out.stderr[-500:]}"
    assert "panicked" not in out.stderr
    child = run_isolated(API_IN_A_CHILD, str(path))
    assert child.returncode == 0, f"exit {child.returncode}: {child.stderr[-500:]}"


def test_a_self_referencing_allocator_setting_does_not_crash(tmp_path: Path) -> None:
    """Pickle memo entries can make a cycle; a reader of someone else's file must not die
    on one (the segments, traces and frames survive cycles; the settings do not)."""
    settings: dict[str, Any] = {"expandable_segments": False}
    settings["self"] = settings
    path = write(tmp_path / "cycle.pickle", {"segments": [], "allocator_settings": settings})
    check_read_or_refused(path)


def nested_lists(depth: int) -> bytes:
    """A snapshot whose allocator_settings hold a list nested ``depth`` deep, written
    opcode by opcode (the standard library's pickler would recurse as deep)."""

    def text(s: str) -> bytes:
        return b"\x8c" + bytes([len(s)]) + s.encode()

    return (
        b"\x80\x02}"
        + text("segments")
        + b"]s"
        + text("allocator_settings")
        + b"}"
        + text("x")
        + b"]" * depth
        + b"a" * (depth - 1)
        + b"ss."
    )


def test_nested_lists_builder_is_a_valid_pickle() -> None:
    """Guards the next test's input: the standard library reads a shallow one."""
    assert pickle.loads(nested_lists(3)) == {"segments": [], "allocator_settings": {"x": [[[]]]}}


def test_deeply_nested_allocator_setting_does_not_crash(tmp_path: Path) -> None:
    path = tmp_path / "deep.pickle"
    path.write_bytes(nested_lists(200_000))
    check_read_or_refused(path)


def test_deeply_nested_frames_do_not_crash(tmp_path: Path) -> None:
    """The same depth where a trace entry's frames belong: read or refused."""

    def text(s: str) -> bytes:
        return b"\x8c" + bytes([len(s)]) + s.encode()

    depth = 200_000
    raw = (
        b"\x80\x02}"
        + text("segments")
        + b"]s"
        + text("device_traces")
        + b"]]}"
        + text("action")
        + text("alloc")
        + b"s"
        + text("size")
        + b"K\x10s"
        + text("addr")
        + b"K\x01s"
        + text("frames")
        + b"]" * depth
        + b"a" * (depth - 1)
        + b"saas."
    )
    path = tmp_path / "deep_frames.pickle"
    path.write_bytes(raw)
    check_read_or_refused(path)
