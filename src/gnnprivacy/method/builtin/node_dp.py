"""Node-level DP methods: ``heterpoisson`` (spec 000), ``dpgnn`` (spec 002), ``dpmlp``.

Each method fits the matching trainer of `gnnprivacy.training.node_dp` in the
transductive or (``split=inductive``) inductive setting and reports epsilon from the
accountant over the executed steps.

Privacy: unit node. ``heterpoisson``: add/remove inside a fixed graph with public degrees,
HeterPoisson mixture events (``accounting="sound"`` PLD by default, ``"paper"`` RDP).
``dpgnn``: replace-one on the degree-bounded subgraphs, multi-term RDP events.
``dpmlp``: add/remove, Poisson-subsampled Gaussian events (PLD).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from gnnprivacy.method.context import MethodResult, RunContext
from gnnprivacy.method.spec import register_method

__all__ = ["DPGNNParams", "DPMLPParams", "HeterPoissonParams"]

SECURE_HELP = ("draw all privacy noise (and the sampling seeds) from the OS CSPRNG; without "
               "it the noise is seeded from the run seed, which is for reproducible research "
               "only: anyone with the record can regenerate the noise")
PRESET_HELP = ("defaults of unset hyperparameters: auto (adapt batch/steps/lr/width to the "
               "graph size and epsilon, see gnnprivacy.training.defaults) | paper")


class _PresetParams:
    """`trainer_kwargs` of the methods whose unset fields a preset resolves
    (`gnnprivacy.training.defaults.resolve_hparams`)."""

    _method: ClassVar[str]
    #: param field -> trainer argument
    _renames: ClassVar[dict[str, str]] = {"hidden": "hidden_channels"}
    #: trainer arguments still unset after the preset -> the value they take
    _unset: ClassVar[dict[str, Any]] = {}

    def trainer_kwargs(self, num_train: int | None = None, num_nodes: int | None = None,
                       num_features: int | None = None, num_classes: int | None = None) -> dict:
        """Trainer arguments; unset fields resolved by ``preset`` for a graph of these sizes
        (`gnnprivacy.training.defaults.graph_sizes`; ``None``: paper values)."""
        from gnnprivacy.training.defaults import resolve_hparams

        kw = resolve_hparams(self._method, asdict(self), num_train=num_train, num_nodes=num_nodes,
                             num_features=num_features, num_classes=num_classes)
        kw.pop("preset")
        for name, argument in self._renames.items():
            kw[argument] = kw.pop(name)
        for name, value in self._unset.items():
            if kw[name] is None:
                kw[name] = value
        return kw


@dataclass(frozen=True)
class HeterPoissonParams(_PresetParams):
    """Hyperparameters of ``heterpoisson`` (spec 000 §3.0 defaults)."""

    _method = "heterpoisson"
    _renames = {"hidden": "hidden_channels", "test_fanout": "fanout"}

    preset: str = field(default="auto", metadata={"help": PRESET_HELP})
    epsilon: float = field(default=8.0, metadata={"help": "target privacy budget epsilon (> 0)"})
    delta: float | None = field(default=None, metadata={
        "help": "target delta in (0,1); default: the paper's (heterpoisson |V|^-1.1, "
                "dpgnn/dpmlp 1/(10 |V_train|))"})
    allow_large_delta: bool = field(default=False, metadata={
        "help": "accept delta >= 1/n (n = training nodes); refused by default"})
    accounting: str = field(default="sound", metadata={
        "help": "heterpoisson accountant: sound (PLD of the Theorem-2 mixture) | paper (RDP)"})
    backbone: str = field(default="gcn", metadata={"help": "star GNN: gcn | gin | sage"})
    q_b: float | None = field(default=None, metadata={
        "help": "central sampling rate in (0,1] (default 4096/|V|)"})
    M: float = field(default=1.0, metadata={"help": "HeterPoisson neighbour multiplier M (>= 1)"})
    epochs: int | None = field(default=None, metadata={
        "help": "training epochs (heterpoisson: T = ceil(epochs / q_b) noisy steps; default: "
                "preset)"})
    steps: int | None = field(default=None, metadata={
        "help": "number of noisy steps T (overrides epochs)"})
    clip_norm: float = field(default=0.5, metadata={"help": "per-subgraph gradient clip bound"})
    lr: float = field(default=0.01, metadata={"help": "learning rate"})
    hidden: int = field(default=128, metadata={"help": "hidden channels per layer"})
    update_layers: int = field(default=1, metadata={
        "help": "Linear+ELU layers of the star update MLP"})
    test_fanout: int = field(default=13, metadata={
        "help": "neighbours per test node at private inference (N_test)"})
    enforce_no_overlap: bool = field(default=True, metadata={
        "help": "remove central nodes from other subgraphs (HeterPoisson lines 14-23)"})
    peripheral_pool: str = field(default="all_visible", metadata={
        "help": "peripheral-eligible nodes: all_visible | train_only"})
    degree_public: bool = field(default=False, metadata={
        "help": "account over the graph's largest out-degree instead of |V|-1 (degrees public)"})
    feature_norm: str = field(default="auto", metadata={
        "help": "feature preprocessing: auto | none | row_l2 | signed | standardize_public | "
                "standardize_global (unaccounted)"})
    secure_mode: bool = field(default=False, metadata={"help": SECURE_HELP})

    def __post_init__(self):
        from gnnprivacy.training.node_dp import HeterPoissonTrainer

        HeterPoissonTrainer(**self.trainer_kwargs())  # validates everything


@dataclass(frozen=True)
class DPGNNParams(_PresetParams):
    """Hyperparameters of ``dpgnn`` (spec 002 §3.0 defaults)."""

    _method = "dpgnn"

    preset: str = field(default="auto", metadata={"help": PRESET_HELP})
    epsilon: float = field(default=8.0, metadata={"help": "target privacy budget epsilon (> 0)"})
    delta: float | None = field(default=None, metadata={
        "help": "target delta in (0,1); default: the paper's (heterpoisson |V|^-1.1, "
                "dpgnn/dpmlp 1/(10 |V_train|))"})
    allow_large_delta: bool = field(default=False, metadata={
        "help": "accept delta >= 1/n (n = training nodes); refused by default"})
    max_degree: int | None = field(default=None, metadata={
        "help": "DP-GNN degree bound K (default: preset; paper 10, auto 3)"})
    batch_size: int | None = field(default=None, metadata={
        "help": "batch size m (dpgnn default min(10000, |V_train|); dpmlp: expected, 2048)"})
    sampling: str = field(default="fixed", metadata={
        "help": "dpgnn batches: fixed (uniform m-subsets) | poisson"})
    optimizer: str = field(default="adam", metadata={"help": "adam (DP-Adam) | sgd (DP-SGD)"})
    lr: float | None = field(default=None, metadata={
        "help": "learning rate (dpgnn default: adam 0.003, sgd 1.0)"})
    epochs: int | None = field(default=None, metadata={
        "help": "training epochs (dpgnn: T = ceil(epochs N / m) noisy steps; default: preset)"})
    steps: int | None = field(default=None, metadata={
        "help": "number of noisy steps T (overrides epochs)"})
    clip_norm: float = field(default=1.0, metadata={"help": "per-node gradient clip bound"})
    clip_grouping: str = field(default="global", metadata={"help": "global | per_tensor"})
    clip_percentile: float | None = field(default=None, metadata={
        "help": "paper heuristic: clip at this percentile of initial gradient norms "
                "(reads private data, unaccounted)"})
    hidden: int = field(default=100, metadata={"help": "hidden channels per layer"})
    activation: str = field(default="tanh", metadata={"help": "activation: tanh | relu | elu"})
    feature_norm: str = field(default="auto", metadata={
        "help": "feature preprocessing: auto | none | row_l2 | signed | standardize_public | "
                "standardize_global (unaccounted)"})
    degree_sampler: str = field(default="greedy", metadata={
        "help": "degree bounding: greedy (the paper's Algorithm 2, data-dependent) | "
                "per_edge (stateless per-edge coins, spec 002 A2)"})
    secure_mode: bool = field(default=False, metadata={"help": SECURE_HELP})

    def __post_init__(self):
        from gnnprivacy.training.node_dp import DPGNNTrainer

        DPGNNTrainer(**self.trainer_kwargs())


@dataclass(frozen=True)
class DPMLPParams(_PresetParams):
    """Hyperparameters of ``dpmlp`` (spec 000 §3.9 naive DP-SGD defaults)."""

    _method = "dpmlp"
    _renames = {"hidden": "hidden_channels", "layers": "num_layers"}
    _unset = {"batch_size": 2048, "lr": 1e-3}

    preset: str = field(default="auto", metadata={"help": PRESET_HELP})
    epsilon: float = field(default=8.0, metadata={"help": "target privacy budget epsilon (> 0)"})
    delta: float | None = field(default=None, metadata={
        "help": "target delta in (0,1); default: the paper's (heterpoisson |V|^-1.1, "
                "dpgnn/dpmlp 1/(10 |V_train|))"})
    allow_large_delta: bool = field(default=False, metadata={
        "help": "accept delta >= 1/n (n = training nodes); refused by default"})
    batch_size: int | None = field(default=None, metadata={
        "help": "batch size m (dpgnn default min(10000, |V_train|); dpmlp: expected, 2048)"})
    epochs: int | None = field(default=None, metadata={
        "help": "training epochs (dpmlp: T = ceil(epochs / q); default: preset)"})
    steps: int | None = field(default=None, metadata={
        "help": "number of noisy steps T (overrides epochs)"})
    optimizer: str = field(default="adam", metadata={"help": "adam (DP-Adam) | sgd (DP-SGD)"})
    lr: float | None = field(default=None, metadata={"help": "learning rate (dpmlp default 0.001)"})
    clip_norm: float = field(default=1.0, metadata={"help": "per-node gradient clip bound"})
    hidden: int | None = field(default=None, metadata={
        "help": "hidden channels per layer (default: preset)"})
    layers: int | None = field(default=None, metadata={
        "help": "number of layers (message-passing or linear; default: preset)"})
    activation: str = field(default="relu", metadata={"help": "activation: relu | tanh | elu"})
    feature_norm: str = field(default="auto", metadata={
        "help": "feature preprocessing: auto | none | row_l2 | signed | standardize_public | "
                "standardize_global (unaccounted)"})
    secure_mode: bool = field(default=False, metadata={"help": SECURE_HELP})

    def __post_init__(self):
        from gnnprivacy.training.node_dp import DPMLPTrainer

        DPMLPTrainer(**self.trainer_kwargs())


def _result(trainer, ctx: RunContext) -> MethodResult:
    metrics = trainer.score(ctx.data)
    ctx.log(f"{trainer.name}: {trainer.steps_} noisy steps, noise_multiplier="
            f"{trainer.noise_multiplier_:.4g} (noise_std={trainer.noise_std_:.4g}), "
            f"epsilon={trainer.epsilon_:.4g} at delta={trainer.delta_:.3g} "
            f"({trainer.privacy_info_['unit']}-level, {trainer.privacy_info_['relation']}"
            f"{', secure noise' if trainer.secure_mode else ', seeded noise'}), "
            f"test accuracy {metrics.get('test_accuracy', float('nan')):.4f}")
    return MethodResult(metrics=metrics, epsilon=trainer.epsilon_, delta=trainer.delta_,
                        ledger=trainer.ledger_, privacy=trainer.privacy_record(),
                        info={**trainer.info_, "steps": trainer.steps_,
                              "resumed_from_step": getattr(trainer, "resumed_from_step_", 0)},
                        model=trainer)


def _fit(trainer_cls, ctx: RunContext) -> MethodResult:
    from gnnprivacy.training.defaults import graph_sizes

    kwargs = ctx.params.trainer_kwargs(**graph_sizes(ctx.data))
    trainer = trainer_cls(**kwargs, generator=ctx.seed_for("train"),
                          progress=ctx.progress, device=ctx.device,
                          checkpoint_path=getattr(ctx, "checkpoint_path", None),
                          resume=bool(getattr(ctx, "resume", False))
                          and getattr(ctx, "checkpoint_path", None) is not None)
    result = _result(trainer.fit(ctx.data), ctx)
    result.info.update(preset=ctx.params.preset, hparams=kwargs)  # resolved defaults
    return result


@register_method("heterpoisson", params=HeterPoissonParams, private=True, checkpoints=True,
                 default_delta=lambda n: float(n) ** -1.1,
                 description="node-level DP star GNN with HeterPoisson sampling (Xiang et al. "
                             "S&P 2024)")
def fit_heterpoisson(ctx: RunContext) -> MethodResult:
    """HeterPoisson node-level DP training (spec 000)."""
    from gnnprivacy.training.node_dp import HeterPoissonTrainer

    return _fit(HeterPoissonTrainer, ctx)


@register_method("dpgnn", params=DPGNNParams, private=True, checkpoints=True,
                 default_delta=lambda n: 1.0 / (10.0 * n),
                 description="DP-GNN: 1-layer GCN on degree-bounded subgraphs, DP-SGD/DP-Adam "
                             "(Daigavane et al.)")
def fit_dpgnn(ctx: RunContext) -> MethodResult:
    """DP-GNN node-level DP training (spec 002)."""
    from gnnprivacy.training.node_dp import DPGNNTrainer

    return _fit(DPGNNTrainer, ctx)


@register_method("dpmlp", params=DPMLPParams, private=True, checkpoints=True,
                 default_delta=lambda n: 1.0 / (10.0 * n),
                 description="naive node-level DP-SGD on features only (MLP, Poisson sampling)")
def fit_dpmlp(ctx: RunContext) -> MethodResult:
    """Naive DP-SGD baseline (spec 000 §3.9, spec 002 §3.8)."""
    from gnnprivacy.training.node_dp import DPMLPTrainer

    return _fit(DPMLPTrainer, ctx)
