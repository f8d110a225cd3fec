"""``gap``: GAP node-level DP GNN (aggregation perturbation), bounded-graph or the paper's
accounting.

See `gnnprivacy.training.gap`. Privacy: unit node, add/remove among graphs of in/out-degree at
most ``D``; one PLD accountant over the encoder's and classifier's executed DP-SGD steps and
the aggregation hops. ``accounting="bounded-graph"`` (default) uses the corrected aggregation
sensitivity ``2(D+1)`` (Xiang et al. 2024, §5.3); ``"paper"`` GAP's ``√D``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from gnnprivacy.method.context import MethodResult, RunContext
from gnnprivacy.method.builtin.node_dp import SECURE_HELP
from gnnprivacy.method.spec import register_method

__all__ = ["GAPParams"]


@dataclass(frozen=True)
class GAPParams:
    """Hyperparameters of ``gap`` (GAP's own defaults where it has them)."""

    epsilon: float = field(default=8.0, metadata={"help": "target privacy budget epsilon (> 0)"})
    delta: float | None = field(default=None, metadata={
        "help": "target delta in (0,1); default: GAP's 10^-len(str(|V_train|))"})
    accounting: str = field(default="bounded-graph", metadata={
        "help": "gap: bounded-graph (aggregation sensitivity 2(D+1); the guarantee covers "
                "graphs of in/out-degree <= D) | paper (GAP's sqrt(D))"})
    hops: int = field(default=2, metadata={"help": "gap: aggregation hops K"})
    max_degree: int = field(default=100, metadata={"help": "gap: degree bound D"})
    encoder_epochs: int = field(default=100, metadata={"help": "gap: DP-SGD epochs of the encoder"})
    epochs: int = field(default=100, metadata={"help": "gap: DP-SGD epochs of the classifier"})
    batch_size: int = field(default=256, metadata={
        "help": "gap: expected batch size (Poisson rate batch_size / |V_train|)"})
    clip_norm: float = field(default=1.0, metadata={"help": "per-node gradient clip bound"})
    hidden: int = field(default=16, metadata={"help": "hidden channels per layer"})
    lr: float = field(default=0.01, metadata={"help": "learning rate"})
    secure_mode: bool = field(default=False, metadata={"help": SECURE_HELP})

    def __post_init__(self):
        from gnnprivacy.training.gap import GAPTrainer

        GAPTrainer(**self.trainer_kwargs())

    def trainer_kwargs(self, num_train: int | None = None, num_nodes: int | None = None) -> dict:
        return asdict(self)


@register_method("gap", params=GAPParams, private=True,
                 default_delta=lambda n: 10.0 ** -len(str(int(n))),
                 description="GAP node-level DP GNN by aggregation perturbation (Sajadmanesh et "
                             "al. 2023), corrected sensitivity by default")
def fit_gap(ctx: RunContext) -> MethodResult:
    """GAP node-level training (spec 000 §3.9, §5)."""
    from gnnprivacy.training.gap import GAPTrainer
    from gnnprivacy.training.device import device_name

    trainer = GAPTrainer(**ctx.params.trainer_kwargs(), generator=ctx.seed_for("train"),
                         progress=ctx.progress, device=ctx.device).fit(ctx.data)
    metrics = trainer.score(ctx.data)
    ctx.log(f"gap ({trainer.accounting}): {trainer.steps_} noisy releases, noise multiplier "
            f"{trainer.noise_multiplier_:.4g}, aggregation std {trainer.agg_std_:.4g}, epsilon "
            f"{trainer.epsilon_:.4g} at delta {trainer.delta_:.3g}")
    extra = {}
    import dataclasses

    if "model" in {f.name for f in dataclasses.fields(MethodResult)}:
        extra["model"] = trainer
    return MethodResult(metrics=metrics, epsilon=trainer.epsilon_, delta=trainer.delta_,
                        ledger=trainer.ledger_, privacy=trainer.privacy_record(),
                        info={**trainer.info_, "steps": trainer.steps_,
                              "device": device_name(trainer.device_)}, **extra)
