"""One LinkTeller experiment end to end: the victim trained by the HeteroRR harness, then the
influence attack on its private edges. ``gnnprivacy attack linkteller`` and
``gnnprivacy.attack_linkteller`` both call `run_linkteller`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["VICTIMS", "run_linkteller"]

#: victims besides the HeteroRR methods: the true graph, or its public edges only
VICTIMS = ("gcn", "gcn-public")


def run_linkteller(dataset: str = "cora", *, method: str = "gcn", eps_e: float | None = None,
                   eps_f: float | None = None, private_edge_frac: float = 0.3, seed: int = 0,
                   n_targets: int = 500, delta: float = 0.01, negatives: str = "non_edges",
                   mcmc_steps: int | None = None, data_root: str | None = None,
                   progress=None) -> dict[str, Any]:
    """LinkTeller (Wu et al., S&P 2022) against a GCN trained on a (privatised) graph.

    Args:
        dataset: dataset name (e.g. ``"cora"``, ``"facebook"``).
        method: the victim: ``"gcn"`` (non-private, true graph), ``"gcn-public"`` (public
            edges only: what the adversary learns without any private edge) or a HeteroRR
            method (``"edgerr"``, ``"heterorr"``, ``"edge-lapgraph"`` ...).
        eps_e: edge budget of the HeteroRR release (default the method's).
        eps_f: feature budget (default the method's).
        private_edge_frac: fraction of edges declared private (the seeded split the method uses).
        seed: run seed (split, release, training and target draws derive from it).
        n_targets: nodes whose influence rows the attacker queries.
        delta: relative feature perturbation of the influence analysis.
        negatives: ``"non_edges"`` (exclude public edges, spec E19) or ``"non_private"``.
        mcmc_steps: EdgeRR / privHRG MCMC moves (default the method's).
        data_root: dataset root (default ``$GNNPRIVACY_DATA``).
        progress: optional ``progress(description, total)`` returning a task with
            ``update(n)`` (what ``gnnprivacy.experiments.progress.progress_factory`` yields): the
            victim's training epochs and the attack's per-target queries report through it.

    Returns:
        ``auc``, ``average_precision`` and the attack's other metrics, with
        ``model_test_accuracy``, ``epsilon_edges``, ``epsilon_features`` and the settings.

    Raises:
        UnknownNameError: an unknown victim method.
        InvalidParameterError: a bad budget, fraction or dataset option.
    """
    import numpy as np
    import torch

    from gnnprivacy._validation import check_int
    from gnnprivacy.attacks.linkteller import check_attack_options, linkteller_attack
    from gnnprivacy.datasets import load_dataset
    from gnnprivacy.errors import InvalidParameterError, UnknownNameError
    from gnnprivacy.method.context import RunContext
    from gnnprivacy.method.builtin.heterorr import (METHODS, HeteroRRParams, fit_release,
                                                         train_gcn)

    if method not in VICTIMS and method not in METHODS:
        raise UnknownNameError("method", method, [*VICTIMS, *METHODS])
    # every option is checked before minutes of release and training
    check_attack_options(n_targets=n_targets, delta=delta, negatives=negatives)
    check_int("seed", seed, low=0)
    fm, em = ("clean", "clean") if method in VICTIMS else METHODS[method][:2]
    for name, value, side, part in (("eps_e", eps_e, em, "edges"), ("eps_f", eps_f, fm, "features")):
        if value is not None and side == "clean":  # would be silently unused
            raise InvalidParameterError(name, f"unset for victim {method!r} (its {part} are released "
                                        "clean)", value)
    if mcmc_steps is not None and em not in ("edgerr", "privhrg"):
        raise InvalidParameterError("mcmc_steps", f"unset for victim {method!r} (only EdgeRR and "
                                    "privHRG run an MCMC)", mcmc_steps)
    kw = {k: v for k, v in (("eps_e", eps_e), ("eps_f", eps_f)) if v is not None}
    params = HeteroRRParams(private_edge_frac=private_edge_frac, mcmc_steps=mcmc_steps, **kw)
    if params.private_edge_frac == 0.0:
        raise InvalidParameterError(
            "private_edge_frac", "in (0, 1]: LinkTeller's positives are the private edges",
            private_edge_frac)
    data = load_dataset(dataset, root=data_root)
    ctx = RunContext(config=None, params=params, data=data, seed=seed)
    rel = fit_release(ctx, fm, em)
    if method == "gcn-public":
        from gnnprivacy.ldp.heterorr.edge_rr import to_edge_index

        rel.data.edge_index = to_edge_index(rel.public_edges)
    trainer = train_gcn(rel.data, params, generator=ctx.torch_generator("train"),
                        progress=progress)
    # the server's API: softmax posteriors on the released graph, its GCN propagation matrix
    # built once and the features in the layout the model trained on (sparse CSR on Facebook)
    logits = trainer.query_fn(rel.data)

    def predict(x):
        return torch.softmax(logits(x), dim=1)

    result = linkteller_attack(predict, trainer.query_features(rel.data), num_nodes=data.num_nodes,
                               private_edges=rel.private_edges, public_edges=rel.public_edges,
                               n_targets=n_targets, delta=delta, negatives=negatives,
                               generator=np.random.default_rng(ctx.seed_for("linkteller")),
                               progress=progress)
    result.update(dataset=dataset, method=method, seed=seed,
                  model_test_accuracy=trainer.evaluate(rel.data, "test_mask")["accuracy"],
                  epsilon_edges=rel.privacy["epsilon_edges"],
                  epsilon_features=rel.privacy["epsilon_features"],
                  private_edge_frac=private_edge_frac)
    return result
