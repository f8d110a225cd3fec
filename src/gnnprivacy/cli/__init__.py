"""The ``gnnprivacy`` command line (``--help`` lists the subcommands).

Subcommands load lazily: ``gnnprivacy --help`` and ``--version`` import neither torch, PyG
nor dp_accounting, and each subcommand imports only what it needs when it runs. To add a
subcommand, add one line to `COMMANDS` (``name: ("module:attribute", "one-line help")``).
"""

from __future__ import annotations

import click

from gnnprivacy import __version__
from gnnprivacy.cli.lazy import LazyGroup

#: subcommand -> ("module:attribute" of its click command, short help shown by --help)
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("gnnprivacy.cli.train_cmd:train_command",
              "Train a model with one method and write a JSON run record."),
    "methods": ("gnnprivacy.cli.methods_cmd:methods_command",
                "List the training methods (private or baseline); with NAME, its parameters."),
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
               "Run an attack (link stealing, LinkTeller) against a trained model."),
    "reproduce": ("gnnprivacy.cli.reproduce_cmd:reproduce_command",
                  "Reproduce a paper's table from a bundled configuration."),
    "assess": ("gnnprivacy.cli.assess_cmd:assess_command",
               "Privacy report card of a run record: claimed vs audited epsilon, attacks."),
    "audit": ("gnnprivacy.cli.audit_cmd:audit_command",
              "Audit a private method: empirical epsilon lower bound beside the claim."),
    "tune": ("gnnprivacy.cli.tune_cmd:tune_command", "Tune hyperparameters with the selection's privacy cost counted."),
    "partition": ("gnnprivacy.cli.partition_cmd:partition_command",
                  "Split a graph into per-rank shards for sharded DP training."),
    "train-sharded": ("gnnprivacy.cli.train_sharded_cmd:train_sharded_command",
                      "Train heterpoisson on per-rank shards (run with torchrun); rank 0 writes the record."),
    "predict": ("gnnprivacy.cli.predict_cmd:predict_command",
                "Predictions of a saved model (train keeps it beside the record) as CSV."),
}


class _MainGroup(LazyGroup):
    table = COMMANDS

    def invoke(self, ctx: click.Context):
        """Run the subcommand; faults of the machine (a full disk, a read-only folder) end in one
        line naming the file and the reason, and warnings print as ``warning: ...`` lines."""
        from gnnprivacy.cli.faults import fault_guard

        with fault_guard():
            return super().invoke(ctx)


@click.group(cls=_MainGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="gnnprivacy")
def main() -> None:
    """Privacy-preserving graph learning: train, account, sweep and report on GNNs."""
