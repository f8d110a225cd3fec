"""The ``gnnprivacy`` command line: ``train``, ``datasets``, ``account`` ... (``--help`` lists them)."""

from __future__ import annotations

import click

from gnnprivacy import __version__
from gnnprivacy.cli.train_cmd import train_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="gnnprivacy")
def main() -> None:
    """Privacy-preserving graph learning: train, account, attack and audit GNNs."""


main.add_command(train_command, "train")


def _register_optional_commands() -> None:
    from gnnprivacy.cli.account_cmd import account_command
    from gnnprivacy.cli.datasets_cmd import datasets_command

    main.add_command(datasets_command, "datasets")
    main.add_command(account_command, "account")


_register_optional_commands()
