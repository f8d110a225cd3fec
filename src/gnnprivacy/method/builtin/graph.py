"""Graph classification methods (``--task graph``): ``dpsgd-graph`` and ``graph``.

Both train `gnnprivacy.training.graph_classification.GraphClassifier` (GIN or GCN backbone)
on the training graphs of a TU dataset (`gnnprivacy.datasets.tu_graphs`), with the same
model, optimiser, batch size and epochs; ``dpsgd-graph`` through
``make_private(sampler="graphs")``.

Privacy: ``dpsgd-graph``: unit graph, add/remove one training graph; Poisson-subsampled
Gaussian events (PLD). ``graph``: none (epsilon infinite).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gnnprivacy._validation import check_choice, check_int, check_positive
from gnnprivacy.method.context import MethodResult, RunContext
from gnnprivacy.method.spec import register_method

__all__ = ["GraphParams", "PrivateGraphParams"]


@dataclass(frozen=True)
class GraphParams:
    """Hyperparameters of the non-private graph classifier (``graph``)."""

    backbone: str = field(default="gin", metadata={"help": "GNN backbone: gin | gcn"})
    epochs: int = field(default=30, metadata={"help": "passes over the training graphs"})
    batch_size: int = field(default=64, metadata={
        "help": "graphs per step (expected, Poisson-sampled, when private)"})
    lr: float = field(default=0.01, metadata={"help": "Adam learning rate"})
    hidden: int = field(default=32, metadata={"help": "hidden channels"})
    layers: int = field(default=2, metadata={"help": "message-passing layers"})

    def __post_init__(self):
        check_choice("backbone", self.backbone, ("gin", "gcn"))
        check_int("epochs", self.epochs, low=1)
        check_int("batch_size", self.batch_size, low=1)
        check_positive("lr", self.lr)
        check_int("hidden", self.hidden, low=1)
        check_int("layers", self.layers, low=1)

    def fit_kwargs(self) -> dict:
        return {"backbone": self.backbone, "epochs": self.epochs, "batch_size": self.batch_size,
                "lr": self.lr, "hidden": self.hidden, "layers": self.layers}


@dataclass(frozen=True)
class PrivateGraphParams(GraphParams):
    """Hyperparameters of graph-level DP-SGD (``dpsgd-graph``)."""

    epsilon: float = field(default=8.0, metadata={"help": "target privacy budget epsilon (> 0)"})
    delta: float | None = field(default=None, metadata={
        "help": "target delta in (0,1); default 1/(10 training graphs)"})
    clip_norm: float = field(default=1.0, metadata={"help": "per-graph gradient clip norm C"})
    secure_mode: bool = field(default=False, metadata={
        "help": "draw the noise from the OS CSPRNG (release runs)"})

    def __post_init__(self):
        super().__post_init__()
        check_positive("epsilon", self.epsilon)
        check_positive("clip_norm", self.clip_norm)

    def fit_kwargs(self) -> dict:
        return {**super().fit_kwargs(), "epsilon": self.epsilon, "delta": self.delta,
                "max_grad_norm": self.clip_norm, "secure_mode": self.secure_mode}


def _run(ctx: RunContext) -> MethodResult:
    from gnnprivacy.training.graph_classification import (TRAIN_SCORE_UNACCOUNTED, accuracy,
                                                          fit_graph_classifier)

    gset = ctx.data
    train = gset.subset("train")
    fit = fit_graph_classifier(train, num_features=gset.num_features,
                               num_classes=gset.num_classes, edge_dim=gset.edge_dim,
                               seed=ctx.seed_for("train"), **ctx.params.fit_kwargs())
    metrics = {f"{part}_accuracy": accuracy(fit.model, gset.subset(part))
               for part in ("train", "val", "test")}
    info = {"task": "graph", "backbone": ctx.params.backbone, "steps": fit.steps,
            "num_graphs": len(gset.graphs), "num_train_graphs": len(train),
            "edge_dim": gset.edge_dim, "seconds": fit.seconds}
    ctx.log(f"{gset.name}: {fit.steps} steps, test accuracy {metrics['test_accuracy']:.4f}")
    if fit.delta is None:
        return MethodResult(metrics=metrics, info=info, model=fit.model)
    privacy = {**fit.privacy,
               "unaccounted": [*fit.privacy.get("unaccounted", []), TRAIN_SCORE_UNACCOUNTED]}
    return MethodResult(metrics=metrics, epsilon=fit.epsilon, delta=fit.delta,
                        ledger=fit.ledger, privacy=privacy, info=info, model=fit.model)


register_method("graph", params=GraphParams, private=False, task="graph",
                description="non-private graph classification (GIN/GCN, --task graph)")(_run)
register_method("dpsgd-graph", params=PrivateGraphParams, private=True, task="graph",
                default_delta=lambda n: 1.0 / (10.0 * n),
                description="graph-level DP-SGD (unit graph; GIN/GCN, --task graph)")(_run)
