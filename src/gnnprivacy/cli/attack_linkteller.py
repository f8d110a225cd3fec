"""``gnnprivacy attack linkteller``: LinkTeller against a GCN trained on a (privatised) graph.

The victim is trained by the HeteroRR harness: ``--method gcn`` (no privacy, true graph),
or any HeteroRR method (``edgerr``, ``heterorr``, ``edge-lapgraph`` ...). The edges are split
into public and private with ``--private-edge-frac`` (the same seeded split the method uses);
the attack's positives are private edges, its negatives exclude public edges by default.
"""

from __future__ import annotations

import click


@click.command("linkteller")
@click.option("--dataset", required=True, help="dataset name (e.g. cora, facebook)")
@click.option("--method", default="gcn", show_default=True,
              help="victim: gcn (non-private, true graph), gcn-public (public edges only: what "
                   "the adversary could learn without any private edge) or a HeteroRR method (edgerr, heterorr, "
                   "edge-lapgraph, edge-privhrg, edge-rand, featurerr, feat-*)")
@click.option("--eps-e", type=float, default=None, help="edge budget (default 1.0)")
@click.option("--eps-f", type=float, default=None, help="feature budget (default 1.0)")
@click.option("--private-edge-frac", type=float, default=0.3, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--n-targets", type=int, default=500, show_default=True)
@click.option("--delta", "delta_inf", type=float, default=0.01, show_default=True,
              help="relative feature perturbation of the influence analysis")
@click.option("--negatives", default="non_edges", show_default=True,
              help="non_edges (exclude public edges, spec E19) | non_private ([R])")
@click.option("--mcmc-steps", type=int, default=None, help="EdgeRR/privHRG MCMC moves")
@click.option("--data-root", type=click.Path(file_okay=False), default=None,
              help="dataset root (default $GNNPRIVACY_DATA)")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
@click.option("--quiet", "-q", is_flag=True, help="no progress on stderr")
def linkteller_command(dataset, method, eps_e, eps_f, private_edge_frac, seed, n_targets,
                       delta_inf, negatives, mcmc_steps, data_root, as_json, quiet):
    """LinkTeller influence attack (Wu et al. S&P 2022) on private edges."""
    import json

    from gnnprivacy.experiments.progress import progress_factory, quiet_mode
    from gnnprivacy.errors import GnnPrivacyError
    from gnnprivacy.experiments.linkteller_run import run_linkteller

    try:
        # training epochs, then one query per target: a bar on a terminal, plain lines in logs
        with quiet_mode(quiet), progress_factory(enabled=not quiet) as progress:
            result = run_linkteller(dataset, method=method, eps_e=eps_e, eps_f=eps_f,
                                    private_edge_frac=private_edge_frac, seed=seed,
                                    n_targets=n_targets, delta=delta_inf, negatives=negatives,
                                    mcmc_steps=mcmc_steps, data_root=data_root, progress=progress)
    except GnnPrivacyError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(result, default=float))
    else:
        for key in ("auc", "average_precision", "model_test_accuracy", "epsilon_edges"):
            click.echo(f"{key}: {result[key]:.4f}")
