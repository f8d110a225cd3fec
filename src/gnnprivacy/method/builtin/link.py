"""Link prediction methods (``--task link``): ``link``, ``link-edge-dp``, ``link-node-dp``.

Each splits the dataset's edges (`gnnprivacy.training.link_prediction.link_split`: the
validation and test edges leave the message-passing graph) and trains the same one-layer
SAGE encoder with a scaled-cosine decoder on star subgraphs with sampled negatives
(`gnnprivacy.training.link_prediction.fit_link_predictor`): without privacy, under edge-level
DP (`make_private(sampler="edges")`, embeddings from the noisy release in the same epsilon)
or under node-level DP (DP-GNN's degree-bounded stars, negatives from the public nodes; the
embeddings at evaluation read the training graph, outside the epsilon). Metrics: ROC AUC and
Hits@20/50/100 on the held-out pairs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gnnprivacy._validation import check_choice, check_int, check_positive
from gnnprivacy.method.context import MethodResult, RunContext
from gnnprivacy.method.spec import register_method

__all__ = ["LinkParams", "PrivateLinkParams"]


@dataclass(frozen=True)
class LinkParams:
    """Hyperparameters of the link predictors (all three)."""

    steps: int | None = field(default=None, metadata={
        "help": "optimiser steps (default: the sampler's adaptive plan)"})
    batch_size: int | None = field(default=None, metadata={
        "help": "expected star subgraphs per step"})
    negatives: int = field(default=4, metadata={"help": "negative nodes per centre"})
    hidden: int = field(default=64, metadata={"help": "hidden channels"})
    out_channels: int = field(default=32, metadata={"help": "embedding size"})
    lr: float = field(default=0.01, metadata={"help": "Adam learning rate"})

    def __post_init__(self):
        if self.steps is not None:
            check_int("steps", self.steps, low=1)
        if self.batch_size is not None:
            check_int("batch_size", self.batch_size, low=1)
        check_int("negatives", self.negatives, low=1)
        check_int("hidden", self.hidden, low=1)
        check_int("out_channels", self.out_channels, low=1)
        check_positive("lr", self.lr)

    def fit_kwargs(self) -> dict:
        return {"steps": self.steps, "batch_size": self.batch_size,
                "negatives": self.negatives, "hidden": self.hidden,
                "out_channels": self.out_channels, "lr": self.lr}


@dataclass(frozen=True)
class PrivateLinkParams(LinkParams):
    """Hyperparameters of the private link predictors."""

    epsilon: float = field(default=8.0, metadata={"help": "target privacy budget epsilon (> 0)"})
    delta: float | None = field(default=None, metadata={
        "help": "target delta in (0,1); default: the sampler's"})
    clip_norm: float = field(default=1.0, metadata={"help": "per-subgraph clip norm C"})
    max_degree: int = field(default=3, metadata={
        "help": "link-node-dp: DP-GNN degree bound D (a node in at most D + 1 stars)"})
    inference: str = field(default="noisy", metadata={
        "help": "link-edge-dp: noisy (embeddings from the released aggregates, in the "
                "epsilon) | unprotected"})

    def __post_init__(self):
        super().__post_init__()
        check_positive("epsilon", self.epsilon)
        check_positive("clip_norm", self.clip_norm)
        check_int("max_degree", self.max_degree, low=1)
        check_choice("inference", self.inference, ("noisy", "unprotected"))

    def fit_kwargs(self) -> dict:
        return {**super().fit_kwargs(), "epsilon": self.epsilon, "delta": self.delta,
                "clip_norm": self.clip_norm, "max_degree": self.max_degree,
                "inference": self.inference}


def _run(ctx: RunContext, privacy: str) -> MethodResult:
    from gnnprivacy.training.link_prediction import fit_link_predictor

    out = fit_link_predictor(ctx.data, privacy=privacy, seed=ctx.seed_for("train") % 2**31,
                             **ctx.params.fit_kwargs())
    metrics = dict(out["metrics"])
    ctx.log(f"link ({privacy}): test AUC {metrics.get('test_auc', float('nan')):.4f}, "
            f"Hits@50 {metrics.get('test_hits@50', float('nan')):.4f}, epsilon "
            f"{out['epsilon']:.4g}")
    info = {"task": "link", "privacy_level": privacy, "steps": out["steps"], **out["split"]}
    if privacy == "none":
        return MethodResult(metrics=metrics, info=info)
    return MethodResult(metrics=metrics, epsilon=out["epsilon"], delta=out["delta"],
                        ledger=out["ledger"], privacy=out["privacy"], info=info)


register_method("link", params=LinkParams, private=False, task="link",
                description="non-private link prediction (SAGE encoder, cosine decoder; "
                            "--task link)")(lambda ctx: _run(ctx, "none"))
register_method("link-edge-dp", params=PrivateLinkParams, private=True, task="link",
                default_delta=lambda n: 1.0 / (10.0 * n),
                description="edge-level DP link prediction (make_private sampler='edges'; "
                            "--task link)")(lambda ctx: _run(ctx, "edge"))
register_method("link-node-dp", params=PrivateLinkParams, private=True, task="link",
                default_delta=lambda n: 1.0 / (10.0 * n),
                description="node-level DP link prediction (DP-GNN bounded stars; "
                            "--task link)")(lambda ctx: _run(ctx, "node"))
