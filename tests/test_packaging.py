"""How gpuscope is packaged: the ``gpuscope`` command is the native binary, from the
``gpuscope-cli`` wheel the Python package depends on, at the same version."""

from __future__ import annotations

import re
import tomllib

import gpuscope
from _helpers import REPO_ROOT, console_script


def test_the_package_depends_on_the_command_of_its_own_version() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    workspace = tomllib.loads((REPO_ROOT / "Cargo.toml").read_text())["workspace"]
    pins = [re.fullmatch(r"gpuscope-cli==(.+)", d) for d in project["dependencies"]]
    versions = [m.group(1) for m in pins if m]
    assert versions == [workspace["package"]["version"]] == [gpuscope.__version__]
    # No console script of the package's own: it would replace the binary.
    assert "scripts" not in project


def test_the_installed_command_is_the_native_binary() -> None:
    script = console_script()
    assert script is not None, "make build installs the gpuscope command"
    assert script.read_bytes()[:4] == b"\x7fELF"
