"""The estimator a registered method trains, built from its params: attacks and audits that
refit a method many times (membership inference, training audits) build it here."""

from __future__ import annotations

from gnnprivacy.errors import InvalidParameterError

__all__ = ["make_trainer_for"]


def make_trainer_for(method: str, params, *, seed: int, noise_multiplier: float | None = None):
    """The estimator a registered method trains (``fit(data)``, ``predict_logits(data)``)."""
    from gnnprivacy.method.builtin.nonprivate import NonPrivateParams
    from gnnprivacy.method.builtin.nonprivate import make_trainer as nonprivate_trainer

    if isinstance(params, NonPrivateParams):
        return nonprivate_trainer(method, params, generator=seed)
    extra = {} if noise_multiplier is None else {"noise_multiplier": noise_multiplier}
    if method == "gap":
        from gnnprivacy.training.gap import GAPTrainer

        return GAPTrainer(**params.trainer_kwargs(), generator=seed, **extra)
    from gnnprivacy.training.node_dp import DPGNNTrainer, DPMLPTrainer, HeterPoissonTrainer

    classes = {"heterpoisson": HeterPoissonTrainer, "dpgnn": DPGNNTrainer, "dpmlp": DPMLPTrainer}
    if method not in classes:
        raise InvalidParameterError("method", f"a method with a trainer for training-mode audits "
                                    f"({', '.join(sorted(classes) + ['gap', 'gcn', '...'])})",
                                    method)
    return classes[method](**params.trainer_kwargs(), generator=seed, **extra)
