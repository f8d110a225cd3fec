"""``gnnprivacy attack``: run an attack against a trained model and record the result.

Each attack family is a subcommand in its own module, loaded on first use; to add one, add
a line to `ATTACKS` (``name: ("module:attribute", "one-line help")``).
"""

from __future__ import annotations

import click

from gnnprivacy.cli.lazy import LazyGroup

#: attack subcommand -> ("module:attribute" of its click command, short help)
ATTACKS: dict[str, tuple[str, str]] = {
    "linkteller": ("gnnprivacy.cli.attack_linkteller:linkteller_command", "LinkTeller influence attack on private edges (spec 001 §5.5)."),
    "link-stealing": ("gnnprivacy.cli.attack_link_stealing:link_stealing_command",
                      "He et al. link stealing (Attack-0..7) vs GRID and other defences (spec 003)."),
}


class _LazyAttackGroup(LazyGroup):
    table = ATTACKS
    section = "Attacks"


@click.group("attack", cls=_LazyAttackGroup)
def attack_command() -> None:
    """Run an attack (link stealing, LinkTeller) against a trained model."""
