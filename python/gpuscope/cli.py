"""``python -m gpuscope``: runs the Rust CLI in this process. The ``gpuscope`` command
pip installs is the native binary itself (the ``gpuscope-cli`` wheel this package
depends on), which starts without Python.

Signals behave as for the native binary: Ctrl-C and SIGTERM end the process the default
way (no KeyboardInterrupt traceback), and a closed stdout pipe ends it quietly with 0
(Python already ignores SIGPIPE, so the Rust side sees EPIPE and handles it).
"""

from __future__ import annotations

import signal
import sys

from gpuscope import _native


def main() -> None:
    """Runs the CLI on this process's arguments and exits with its code."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sys.exit(_native.run_cli(["gpuscope", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
