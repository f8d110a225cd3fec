"""Edge-level DP methods (unit: one edge): ``edge-dp`` and ``gap-edge``.

* ``edge-dp``: `gnnprivacy.training.edge_dp.EdgeDPTrainer`, the user path of
  ``make_private(sampler="edges")`` (Poisson computation subgraphs, per-subgraph clipping,
  `EdgeSubgraphDpEvent`), with edge-private predictions from one noisy release of every
  layer's aggregate in the same epsilon (``--inference noisy``; ``unprotected`` predicts on
  the true graph and says so in the record), and the graph part refitted on that release
  with the public labels (``--refit``, post-processing).
* ``gap-edge``: GAP's edge-level mode (Sajadmanesh et al., USENIX Security 2023): encoder and
  classifier on the public features and labels, ``K`` Gaussian aggregation hops of
  sensitivity ``sqrt(2)`` (undirected) or 1, the only releases that read edges.

Privacy: unit edge, add/remove; one PLD accountant per run. The graph-perturbation anchors
(``edge-rand``, ``edge-lapgraph``) are in `gnnprivacy.method.builtin.heterorr`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from gnnprivacy.method.builtin.node_dp import SECURE_HELP
from gnnprivacy.method.context import MethodResult, RunContext
from gnnprivacy.method.spec import register_method

__all__ = ["EdgeDPParams", "GAPEdgeParams"]


@dataclass(frozen=True)
class EdgeDPParams:
    """Hyperparameters of ``edge-dp``."""

    epsilon: float = field(default=8.0, metadata={"help": "target privacy budget epsilon (> 0)"})
    delta: float | None = field(default=None, metadata={
        "help": "target delta in (0,1); default 1/(10 |E|), |E| the unit edges"})
    hops: int = field(default=1, metadata={
        "help": "message-passing layers K (1: no degree bound, an edge in 2 subgraphs)"})
    max_out_degree: int | None = field(default=None, metadata={
        "help": "out-degree bound D for hops >= 2 (default: sum_{j<K} D^j <= 4)"})
    inference: str = field(default="noisy", metadata={
        "help": "noisy (predictions from one noisy release of each layer's aggregate, in "
                "the epsilon) | unprotected (predictions read the private edges)"})
    inference_share: float = field(default=0.9, metadata={
        "help": "share of epsilon and delta for the inference release"})
    steps: int | None = field(default=None, metadata={
        "help": "DP-SGD steps (default: the sampler's adaptive plan)"})
    batch_size: int | None = field(default=None, metadata={
        "help": "expected subgraphs per step (Poisson rate batch_size / |V_train|)"})
    pretrain_epochs: int = field(default=20, metadata={
        "help": "epochs of the encoder on the public features and labels (free)"})
    clip_norm: float = field(default=1.0, metadata={"help": "per-subgraph gradient clip C"})
    hidden: int = field(default=64, metadata={"help": "hidden channels"})
    lr: float = field(default=0.01, metadata={"help": "Adam learning rate"})
    encoding: str = field(default="probabilities", metadata={
        "help": "what the graph part aggregates: probabilities (the encoder's class "
                "probabilities) | hidden (its normalised hidden layer)"})
    refit: bool = field(default=True, metadata={
        "help": "refit the graph part on the released aggregates with the public labels "
                "(post-processing, no epsilon), kept where validation is better"})
    refit_epochs: int = field(default=200, metadata={"help": "full-batch epochs of the refit"})
    secure_mode: bool = field(default=False, metadata={"help": SECURE_HELP})

    def __post_init__(self):
        from gnnprivacy.training.edge_dp import EdgeDPTrainer

        EdgeDPTrainer(**self.trainer_kwargs())

    def trainer_kwargs(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class GAPEdgeParams:
    """Hyperparameters of ``gap-edge`` (GAP's defaults where it has them)."""

    epsilon: float = field(default=8.0, metadata={"help": "target privacy budget epsilon (> 0)"})
    delta: float | None = field(default=None, metadata={
        "help": "target delta in (0,1); default 10^-len(str(|E|))"})
    hops: int = field(default=2, metadata={"help": "aggregation hops K"})
    encoder_epochs: int = field(default=100, metadata={
        "help": "epochs of the encoder (no noise: features and labels are public)"})
    epochs: int = field(default=100, metadata={"help": "epochs of the classifier"})
    batch_size: int = field(default=256, metadata={"help": "minibatch size"})
    hidden: int = field(default=16, metadata={"help": "hidden channels per layer"})
    lr: float = field(default=0.01, metadata={"help": "learning rate"})
    secure_mode: bool = field(default=False, metadata={"help": SECURE_HELP})

    def __post_init__(self):
        from gnnprivacy.training.gap import GAPTrainer

        GAPTrainer(**self.trainer_kwargs())

    def trainer_kwargs(self) -> dict:
        return {**asdict(self), "level": "edge"}


def _result(trainer, ctx: RunContext, what: str) -> MethodResult:
    metrics = trainer.score(ctx.data)
    ctx.log(f"{what}: epsilon {trainer.epsilon_:.4g} at delta {trainer.delta_:.3g} "
            f"(edge-level), test accuracy {metrics.get('test_accuracy', float('nan')):.4f}")
    return MethodResult(metrics=metrics, epsilon=trainer.epsilon_, delta=trainer.delta_,
                        ledger=trainer.ledger_, privacy=trainer.privacy_record(),
                        info={**trainer.info_, "steps": trainer.steps_}, model=trainer)


@register_method("edge-dp", params=EdgeDPParams, private=True,
                 default_delta=lambda n: 1.0 / (10.0 * n),
                 description="edge-level DP-SGD of a SAGE model through make_private("
                             "sampler='edges'), edge-private predictions in the epsilon, "
                             "refitted on the release")
def fit_edge_dp(ctx: RunContext) -> MethodResult:
    """Edge-level DP node classification (issue 46)."""
    from gnnprivacy.training.edge_dp import EdgeDPTrainer

    trainer = EdgeDPTrainer(**ctx.params.trainer_kwargs(), generator=ctx.seed_for("train"),
                            progress=ctx.progress).fit(ctx.data)
    return _result(trainer, ctx, f"edge-dp ({trainer.inference} inference)")


@register_method("gap-edge", params=GAPEdgeParams, private=True,
                 default_delta=lambda n: 10.0 ** -len(str(int(n))),
                 description="GAP edge-level DP GNN by aggregation perturbation (Sajadmanesh "
                             "et al. 2023)")
def fit_gap_edge(ctx: RunContext) -> MethodResult:
    """GAP's edge-level mode."""
    from gnnprivacy.training.gap import GAPTrainer

    trainer = GAPTrainer(**ctx.params.trainer_kwargs(), generator=ctx.seed_for("train"),
                         progress=ctx.progress, device=ctx.device).fit(ctx.data)
    return _result(trainer, ctx, "gap-edge")
