"""The ``gnnprivacy`` command line (``--help`` lists the subcommands).

Subcommands load lazily: ``gnnprivacy --help`` and ``--version`` import neither torch, PyG
nor dp_accounting, and each subcommand imports only what it needs when it runs. To add a
subcommand, add one line to :data:`COMMANDS` (``name: ("module:attribute", "one-line help")``).
"""

from __future__ import annotations

import importlib

import click

from gnnprivacy import __version__

#: subcommand -> ("module:attribute" of its click command, short help shown by --help)
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("gnnprivacy.cli.train_cmd:train_command",
              "Train a model with one method and write a JSON run record."),
    "datasets": ("gnnprivacy.cli.datasets_cmd:datasets_command",
                 "List the datasets, which are available locally and what is missing."),
    "account": ("gnnprivacy.cli.account_cmd:account_command",
                "Epsilon of a mechanism, or the noise multiplier for a target epsilon."),
    "demo": ("gnnprivacy.cli.demo_cmd:demo_command",
             "Privatize and train on a synthetic graph; print epsilon beside accuracy."),
    "sweep": ("gnnprivacy.cli.sweep_cmd:sweep_command",
              "Run a grid of configurations (resumable; local or Ray executor)."),
    "results": ("gnnprivacy.cli.results_cmd:results_command",
                "List or export the run records of a runs directory."),
    "report": ("gnnprivacy.cli.report_cmd:report_command",
               "Write a Markdown + HTML report of a runs directory."),
    "attack": ("gnnprivacy.cli.attack_cmd:attack_command",
               "Run an attack (link stealing, LinkTeller, membership) and record it."),
    "reproduce": ("gnnprivacy.cli.reproduce_cmd:reproduce_command",
                  "Reproduce a paper's table from a bundled configuration."),
    "assess": ("gnnprivacy.cli.assess_cmd:assess_command",
               "Privacy report card of a run record: claimed vs audited epsilon, attacks."),
    "audit": ("gnnprivacy.cli.audit_cmd:audit_command",
              "Audit a private method: empirical epsilon lower bound beside the claim."),
    "tune": ("gnnprivacy.cli.tune_cmd:tune_command", "Tune hyperparameters with the selection's privacy cost counted."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(super().list_commands(ctx)))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None or cmd_name not in COMMANDS:
            return command
        module_name, _, attribute = COMMANDS[cmd_name][0].partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Short help from the table, so --help imports no subcommand module.
        rows = [(name, COMMANDS[name][1]) for name in sorted(COMMANDS)]
        rows += [(name, cmd.get_short_help_str(70)) for name, cmd in sorted(self.commands.items())
                 if name not in COMMANDS and not cmd.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(sorted(rows))


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="gnnprivacy")
def main() -> None:
    """Privacy-preserving graph learning: train, account, sweep and report on GNNs."""
