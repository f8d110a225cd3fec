"""``gnnprivacy attack``: run an attack against a trained model and record the result.

Each attack family is a subcommand in its own module, loaded on first use; to add one, add
a line to :data:`ATTACKS` (``name: ("module:attribute", "one-line help")``).
"""

from __future__ import annotations

import importlib

import click

#: attack subcommand -> ("module:attribute" of its click command, short help)
ATTACKS: dict[str, tuple[str, str]] = {
    "linkteller": ("gnnprivacy.cli.attack_linkteller:linkteller_command", "LinkTeller influence attack on private edges (spec 001 §5.5)."),
    "link-stealing": ("gnnprivacy.cli.attack_link_stealing:link_stealing_command",
                      "He et al. link stealing (Attack-0..7) vs GRID and other defences (spec 003)."),
}


class _LazyAttackGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(ATTACKS) | set(super().list_commands(ctx)))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None or cmd_name not in ATTACKS:
            return command
        module_name, _, attribute = ATTACKS[cmd_name][0].partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_text) for name, (_, help_text) in sorted(ATTACKS.items())]
        if rows:
            with formatter.section("Attacks"):
                formatter.write_dl(rows)


@click.group("attack", cls=_LazyAttackGroup)
def attack_command() -> None:
    """Run an attack (link stealing, LinkTeller, membership inference) and record it."""
