"""``python -m gpuscope`` is the ``gpuscope`` command."""

from gpuscope.cli import main

main()
