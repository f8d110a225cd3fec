"""Non-private baselines ``gcn``, ``sage``, ``gin``, ``gat`` and ``mlp`` (one shared params class).

Each method trains `FullBatchTrainer` (``batch_size`` unset) or
`MiniBatchTrainer` (neighbour sampling with ``fanout``) with the
named encoder, and evaluates on the full graph (transductive and inductive settings alike).

Privacy: none. epsilon = infinity, no delta; the ledger is the default single
``NonPrivateDpEvent``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gnnprivacy._validation import (check_choice, check_int, check_positive, check_probability,
                                   check_real)
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.method.context import MethodResult, RunContext
from gnnprivacy.method.spec import register_method
from gnnprivacy.nn.activations import ACTIVATIONS


@dataclass(frozen=True)
class NonPrivateParams:
    """Hyperparameters of the non-private GNN / MLP baselines."""

    epochs: int = field(default=200, metadata={"help": "maximum training epochs"})
    lr: float = field(default=0.01, metadata={"help": "Adam learning rate"})
    weight_decay: float = field(default=5e-4, metadata={
        "help": "Adam weight decay (L2 penalty)"})
    hidden: int = field(default=64, metadata={
        "help": "hidden channels per layer (GAT: over all heads)"})
    layers: int = field(default=2, metadata={
        "help": "number of layers (message-passing or linear)"})
    dropout: float = field(default=0.5, metadata={
        "help": "dropout probability (input and hidden layers)"})
    activation: str = field(default="relu", metadata={
        "help": f"activation: {', '.join(ACTIVATIONS)}"})
    heads: int = field(default=8, metadata={"help": "attention heads (gat only)"})
    patience: int = field(default=50, metadata={
        "help": "early stopping: epochs without validation-accuracy gain (best weights restored)"})
    batch_size: int | None = field(default=None, metadata={
        "help": "seed nodes per mini-batch with neighbour sampling (default: full-batch)"})
    fanout: str = field(default="10,10", metadata={
        "help": "neighbours sampled per hop for mini-batches, e.g. '10,10' (-1: all)"})
    normalize_features: bool = field(default=False, metadata={
        "help": "divide each node's features by their L1 norm (GCN paper preprocessing)"})

    def __post_init__(self):
        check_int("epochs", self.epochs, low=1)
        check_positive("lr", self.lr)
        check_real("weight_decay", self.weight_decay, low=0.0)
        check_int("hidden", self.hidden, low=1)
        check_int("layers", self.layers, low=1)
        check_probability("dropout", self.dropout, allow_one=False)
        check_choice("activation", self.activation, ACTIVATIONS)
        check_int("heads", self.heads, low=1)
        check_int("patience", self.patience, low=1)
        if not isinstance(self.normalize_features, bool):
            raise InvalidParameterError("normalize_features", "a bool", self.normalize_features)
        if self.batch_size is not None:
            check_int("batch_size", self.batch_size, low=1)
        from gnnprivacy.training.neighbor_loader import parse_fanouts

        parse_fanouts(self.fanout, self.layers)


def make_trainer(encoder: str, params: NonPrivateParams, *, generator=None, progress=None,
                 device="cpu"):
    """The trainer that ``params`` describe for ``encoder`` (full-batch or mini-batch)."""
    from gnnprivacy.training.nonprivate import FullBatchTrainer, MiniBatchTrainer

    common = dict(hidden_channels=params.hidden, num_layers=params.layers,
                  activation=params.activation, dropout=params.dropout, heads=params.heads,
                  lr=params.lr, weight_decay=params.weight_decay, epochs=params.epochs,
                  patience=params.patience, normalize_features=params.normalize_features,
                  generator=generator, progress=progress, device=device)
    if params.batch_size is None:
        return FullBatchTrainer(encoder, **common)
    return MiniBatchTrainer(encoder, batch_size=params.batch_size, fanouts=params.fanout, **common)


def _metrics(trainer, data) -> dict[str, float]:
    from gnnprivacy.training.metrics import evaluate

    logits = trainer.predict_logits(data)
    metrics = {}
    for split in ("train", "val", "test"):
        mask = data[f"{split}_mask"]
        if not bool(mask.any()):
            continue
        for key, value in evaluate(logits, data.y, mask, num_classes=trainer.num_classes_).items():
            metrics[f"{split}_{key}"] = value
    return metrics


def _run(encoder: str, ctx: RunContext) -> MethodResult:
    params: NonPrivateParams = ctx.params
    data = ctx.data
    trainer = make_trainer(encoder, params, generator=ctx.seed_for("train"),
                           progress=ctx.progress, device=ctx.device).fit(data)
    setting = getattr(getattr(data, "split", None), "kind", None)
    ctx.log(f"{encoder}: {trainer.epochs_run_} epochs, best epoch {trainer.best_epoch_}")
    from gnnprivacy.training.device import device_name

    info = {"encoder": encoder, "trainer": trainer.kind, "setting": setting,
            "device": device_name(trainer.device),
            "epochs_run": trainer.epochs_run_, "best_epoch": trainer.best_epoch_,
            "num_parameters": trainer.model_.num_parameters()}
    if params.batch_size is not None:
        info["fanouts"] = list(trainer.fanouts)
    return MethodResult(metrics=_metrics(trainer, data), info=info, model=trainer)


def _register(name: str, description: str) -> None:
    def fn(ctx: RunContext) -> MethodResult:
        return _run(name, ctx)

    fn.__name__ = fn.__qualname__ = f"fit_{name}"
    fn.__doc__ = f"Non-private {description} (see `{__name__}`)."
    register_method(name, params=NonPrivateParams, private=False,
                    description=f"non-private {description}")(fn)


for _name, _description in (
        ("gcn", "GCN (Kipf & Welling 2017)"),
        ("sage", "GraphSAGE (Hamilton et al. 2017)"),
        ("gin", "GIN (Xu et al. 2019)"),
        ("gat", "GAT (Velickovic et al. 2018)"),
        ("mlp", "MLP on node features only (no graph)")):
    _register(_name, _description)

__all__ = ["NonPrivateParams", "make_trainer"]
