"""The ``gnnprivacy`` command line (``--help`` lists the subcommands)."""

from __future__ import annotations

import click

from gnnprivacy import __version__
from gnnprivacy.cli.account_cmd import account_command
from gnnprivacy.cli.datasets_cmd import datasets_command
from gnnprivacy.cli.demo_cmd import demo_command
from gnnprivacy.cli.report_cmd import report_command
from gnnprivacy.cli.reproduce_cmd import reproduce_command
from gnnprivacy.cli.results_cmd import results_command
from gnnprivacy.cli.sweep_cmd import sweep_command
from gnnprivacy.cli.train_cmd import train_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="gnnprivacy")
def main() -> None:
    """Privacy-preserving graph learning: train, account, sweep and report on GNNs."""


for _name, _command in (("train", train_command), ("datasets", datasets_command),
                        ("account", account_command), ("demo", demo_command),
                        ("sweep", sweep_command), ("results", results_command),
                        ("report", report_command), ("reproduce", reproduce_command)):
    main.add_command(_command, _name)
