"""``python -m gnnprivacy.cli``: the same command as ``gnnprivacy``."""

from gnnprivacy.cli import main

main()
