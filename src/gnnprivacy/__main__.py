"""``python -m gnnprivacy``: the ``gnnprivacy`` command (``torchrun -m gnnprivacy ...``)."""

from gnnprivacy.cli import main

main()
