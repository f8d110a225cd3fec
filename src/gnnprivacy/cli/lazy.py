"""A click group whose subcommands are imported on first use (``--help`` imports none)."""

from __future__ import annotations

import importlib

import click


class LazyGroup(click.Group):
    """Subcommands come from ``table``: ``name -> ("module:attribute", "one-line help")``.

    A subclass sets `table`; ``--help`` lists the table's short help without importing
    any subcommand module, and a subcommand's module is imported when it runs.
    """

    table: dict[str, tuple[str, str]] = {}
    section = "Commands"

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.table) | set(super().list_commands(ctx)))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None or cmd_name not in self.table:
            return command
        module_name, _, attribute = self.table[cmd_name][0].partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_text) for name, (_, help_text) in self.table.items()]
        rows += [(name, cmd.get_short_help_str(70)) for name, cmd in self.commands.items()
                 if name not in self.table and not cmd.hidden]
        if rows:
            with formatter.section(self.section):
                formatter.write_dl(sorted(rows))
