"""Node-level local DP methods: ``rgnn``, ``lpgnn`` and the naive baseline ``ldp-naive``.

RGNN: Bhaila, Huang, Wu and Wu, "Local Differential Privacy in Graph Neural Networks: a
Reconstruction Approach", SDM 2024 (spec 004). LPGNN: Sajadmanesh and Gatica-Perez, CCS 2021.
``ldp-naive``: the backbone trained directly on the GRR-FS / GRR reports (spec §10.3, RGNN with
``K_x = K_y = 0`` and no LLP term).

Pipeline of every method: public preprocessing of the features (OR-grouping with the paper's
group size, or the German credit binarisation), the users' randomizers
(`gnnprivacy.ldp.reports.collect_reports`: GRR-FS or multi-bit features with ``m``
sampled and ``eps_x`` each, GRR labels on train ∪ val), then the server-side algorithm. True
labels are used only to score the reported model: ``test_*`` and ``val_accuracy`` are
evaluation metrics; ``val_noisy_accuracy`` (against the reconstructed validation labels) is
what the server could see and what epoch selection used. The split should be the paper's
random 50/25/25 (``--split random``; Cora's default is the public split); a run on another
split logs a note.

Privacy: per-user LDP, unit ``NODE`` (a user's features and label), relation ``REPLACE``.
``epsilon`` = the budget of a labelled user, ``m eps_x + eps_y`` (``eps_mode="sound"``) or the
paper's ``ln(1 + (m/d)(e^{m eps_x} - 1)) + eps_y`` (``eps_mode="paper"``, unsound, for
reproduction only); ``delta = 0``. Both figures are always recorded in ``privacy``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gnnprivacy._validation import (check_choice, check_int, check_positive, check_probability,
                                   check_real)
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.method.context import MethodResult, RunContext
from gnnprivacy.method.spec import register_method

if TYPE_CHECKING:   # torch loads when a method runs, not when `train --help` lists them
    import torch

#: The paper's OR-group sizes (spec 004 §10.1).
PAPER_GROUP_SIZES = {"citeseer": 70, "cora": 25, "dblp": 50, "facebook": 100}
#: Grid of ``select_hparams`` (spec 004 §10.2 values; the default configuration is the incumbent).
SELECTION_GRID = {"kx": (4, 16), "ky": (4, 16)}


def _common_checks(p) -> None:
    check_positive("eps_x", p.eps_x)
    check_positive("eps_y", p.eps_y)
    if p.m is not None:
        check_int("m", p.m, low=1)
    if p.group_size is not None:
        check_int("group_size", p.group_size, low=1)
    check_choice("eps_mode", p.eps_mode, ("sound", "paper"))
    check_choice("backbone", p.backbone, ("sage", "gcn", "gat"))
    check_int("epochs", p.epochs, low=1)
    check_positive("lr", p.lr)
    check_real("weight_decay", p.weight_decay, low=0.0)
    check_int("hidden", p.hidden, low=1)
    check_probability("dropout", p.dropout, allow_one=False)
    check_int("heads", p.heads, low=1)
    check_positive("grad_clip", p.grad_clip)


@dataclass(frozen=True)
class LDPParams:
    """Parameters shared by the local-DP methods (``ldp-naive`` uses exactly these)."""

    eps_x: float = field(default=1.0, metadata={
        "help": "LDP budget of each sampled feature (user feature budget = m * eps_x)"})
    eps_y: float = field(default=1.0, metadata={"help": "LDP budget of the label report (GRR)"})
    m: int | None = field(default=10, metadata={
        "help": "features each user samples and reports truthfully via GRR (default 10 as in "
                "the paper; unset = all d)"})
    group_size: int | None = field(default=None, metadata={
        "help": "OR-group contiguous blocks of this many feature columns before GRR-FS (1: "
                "binarise only; default: the paper's size for citeseer/cora/dblp/facebook, "
                "none otherwise; german is binarised by fixed bins)"})
    eps_mode: str = field(default="sound", metadata={
        "help": "reported feature budget: sound (m*eps_x) | paper (Theorem 1, unsound for LDP)"})
    backbone: str = field(default="sage", metadata={"help": "GNN backbone: sage | gcn | gat"})
    epochs: int = field(default=100, metadata={"help": "training epochs (full batch)"})
    lr: float = field(default=0.01, metadata={"help": "Adam learning rate"})
    weight_decay: float = field(default=0.0, metadata={"help": "Adam weight decay (L2 penalty)"})
    hidden: int = field(default=16, metadata={"help": "hidden channels (GAT: per head)"})
    dropout: float = field(default=0.5, metadata={
        "help": "dropout after the hidden layer (the paper gives no rate; the authors' code "
                "default is 0)"})
    heads: int = field(default=4, metadata={"help": "attention heads (gat only)"})
    grad_clip: float = field(default=5.0, metadata={"help": "gradient-norm clipping threshold"})
    secure_mode: bool = field(default=False, metadata={
        "help": "draw the users' randomized-response coins from the OS CSPRNG; without it "
                "they are seeded from the run seed, which is for reproducible research only "
                "(anyone with the record can regenerate every report's coins)"})

    def __post_init__(self):
        _common_checks(self)


@dataclass(frozen=True)
class RGNNParams(LDPParams):
    """RGNN hyperparameters (defaults: the authors' code, dropout 0.5)."""

    kx: int = field(default=16, metadata={
        "help": "feature propagation hops K_x (RGNN f_X / LPGNN KProp; 0: none)"})
    ky: int = field(default=16, metadata={
        "help": "label propagation hops K_y (RGNN f_Y / LPGNN Drop; 0: none)"})
    num_clusters: int = field(default=16, metadata={"help": "METIS clusters C for the LLP bags"})
    alpha: float = field(default=1.0, metadata={"help": "weight of the LLP loss (0: off)"})
    llp_source: str = field(default="perturbed", metadata={
        "help": "labels behind the bag proportions: perturbed (paper) | reconstructed (code)"})
    kl_direction: str = field(default="target_pred", metadata={
        "help": "LLP divergence: target_pred = KL(b~||b^) (code) | pred_target (paper text)"})
    select_hparams: bool = field(default=False, metadata={
        "help": "select K_x, K_y in {4,16} on the perturbed validation labels (default config "
                "kept unless another is better by 2 standard errors)"})

    def __post_init__(self):
        super().__post_init__()
        self.rgnn_config()  # validates the remaining fields

    def rgnn_config(self):
        """The `RGNNConfig` these parameters describe."""
        from gnnprivacy.ldp.rgnn import RGNNConfig

        names = {f.name for f in dataclasses.fields(RGNNConfig)}
        return RGNNConfig(**{k: v for k, v in dataclasses.asdict(self).items() if k in names})


@dataclass(frozen=True)
class LPGNNParams(LDPParams):
    """LPGNN hyperparameters (multi-bit budget m * eps_x; KProp and Drop hops)."""

    kx: int = field(default=16, metadata={
        "help": "feature propagation hops K_x (RGNN f_X / LPGNN KProp; 0: none)"})
    ky: int = field(default=16, metadata={
        "help": "label propagation hops K_y (RGNN f_Y / LPGNN Drop; 0: none)"})

    def __post_init__(self):
        super().__post_init__()
        check_int("kx", self.kx, low=0)
        check_int("ky", self.ky, low=0)


def binary_features(data, group_size: int | None) -> tuple[torch.Tensor, dict]:
    """The public preprocessing: German binarisation, else OR-grouping (paper's ``g`` default)."""
    from gnnprivacy.ldp.german import GRAPH_CAVEAT, binarize_german
    from gnnprivacy.ldp.grouping import group_features

    name = str(getattr(data, "name", "")).lower()
    if name == "german" and group_size is None:
        x, names = binarize_german(data.x, data.feature_names)
        return x, {"preprocessing": "german fixed bins (spec 004 §10.1)",
                   "num_features": x.size(1), "dataset_note": GRAPH_CAVEAT}
    g = PAPER_GROUP_SIZES.get(name) if group_size is None else group_size
    if g is None:
        return data.x, {"preprocessing": "none", "num_features": data.x.size(1)}
    x = group_features(data.x, g)
    return x, {"preprocessing": f"OR-grouping g={g}", "group_size": g,
               "num_features": x.size(1)}


def _check_split(ctx: RunContext) -> None:
    split = getattr(ctx.data, "split", None)
    kind = getattr(split, "kind", None)
    if kind == "inductive":
        raise InvalidParameterError("split", "a transductive split (random or public): the LDP "
                                    "methods are transductive", kind)
    if kind != "random":
        ctx.log(f"note: the paper uses a random 50/25/25 split; this run uses {kind!r}")


def _device(ctx: RunContext):
    """The device the server-side backbone trains on (checked: an unusable one is refused);
    the users' reports, reconstructions and partitions stay on the CPU."""
    from gnnprivacy.training.device import resolve_device

    return resolve_device(ctx.device)


def _cpu_generator(ctx: RunContext, purpose: str) -> torch.Generator:
    from gnnprivacy.random import torch_generator

    return torch_generator(ctx.seed_for(purpose))


def _reports(ctx: RunContext, mechanism: str):
    from gnnprivacy.ldp.reports import collect_reports

    p, data = ctx.params, ctx.data
    _device(ctx)
    _check_split(ctx)
    x, prep = binary_features(data, p.group_size)
    m = x.size(1) if p.m is None else p.m
    if m > x.size(1):
        raise InvalidParameterError("m", f"at most d = {x.size(1)} (features after "
                                    "preprocessing)", m)
    view = collect_reports(x, data.y, edge_index=data.edge_index, train_mask=data.train_mask,
                           val_mask=data.val_mask, test_mask=data.test_mask,
                           num_classes=int(data.num_classes), eps_x=p.eps_x, eps_y=p.eps_y,
                           m=m, feature_mechanism=mechanism,
                           generator=None if p.secure_mode else _cpu_generator(ctx, "ldp-reports"),
                           secure_mode=p.secure_mode)
    if "dataset_note" in prep:
        ctx.log(prep["dataset_note"])
    return view, prep


def _metrics(data, logits: torch.Tensor, noisy_val: float) -> dict[str, float]:
    from gnnprivacy.training.metrics import evaluate

    out = {"val_noisy_accuracy": noisy_val}
    for split in ("val", "test"):
        mask = data[f"{split}_mask"]
        if bool(mask.any()):
            for key, value in evaluate(logits, data.y, mask,
                                       num_classes=int(data.num_classes)).items():
                out[f"{split}_{key}"] = value
    return out


def _result(ctx: RunContext, view, prep: dict, logits, outcome, info: dict,
            model=None) -> MethodResult:
    from gnnprivacy.ldp.budget import budget_summary, ldp_accountant

    p = ctx.params
    d = view.num_features
    summary = budget_summary(eps_x=p.eps_x, m=view.m, d=d, eps_y=p.eps_y, mode=p.eps_mode)
    acc = ldp_accountant(eps_x=p.eps_x, m=view.m, d=d, eps_y=p.eps_y,
                         num_classes=view.num_classes, mode=p.eps_mode)
    epsilon = acc.get_epsilon(0.0)
    ctx.log(f"per-user epsilon ({p.eps_mode}) = {epsilon:.4g}; sound "
            f"{summary['labeled_user_epsilon_sound']:.4g}, paper "
            f"{summary['labeled_user_epsilon_paper']:.4g}")
    privacy = {"unit": "node", "relation": "replace", "accountant": "pld", "delta": 0.0,
               "feature_mechanism": view.feature_mechanism, "secure_mode": p.secure_mode,
               "scope": ("per-user local DP of what each user sends: the feature report "
                         "(m eps_x) and, for labelled users, the label report (eps_y); all "
                         "server-side reconstruction and training is post-processing"),
               "unaccounted": (["the graph's edges (public and unprotected)"]
                               + (["eps_mode='paper' feature budget (Theorem 1, unsound for "
                                   "LDP)"] if p.eps_mode == "paper" else [])),
               **summary}
    from gnnprivacy.training.device import device_name

    info = {**prep, "m": view.m, "best_epoch": outcome.best_epoch,
            "device": device_name(_device(ctx)),
            "best_val_noisy_accuracy": outcome.best_val_accuracy, **info}
    return MethodResult(metrics=_metrics(ctx.data, logits, outcome.best_val_accuracy),
                        epsilon=epsilon, delta=0.0, ledger=acc.to_dict(delta=0.0),
                        privacy=privacy, info=info, model=model)


def _fit_rgnn_like(ctx: RunContext, config, grid: dict | None, name: str) -> MethodResult:
    from gnnprivacy.ldp.rgnn import RGNN

    view, prep = _reports(ctx, "grr-fs")
    model = RGNN(config, grid=grid).fit(view, generator=_cpu_generator(ctx, "ldp-train"),
                                        partition_seed=ctx.seed_for("metis") % (2**31 - 1),
                                        device=_device(ctx))
    chosen = model.config_
    ctx.log(f"{name}: K_x={chosen.kx}, K_y={chosen.ky}, C={chosen.num_clusters}, "
            f"alpha={chosen.alpha}, best epoch {model.fit_.outcome.best_epoch}")
    info = {"config": dataclasses.asdict(chosen), "num_bags": model.fit_.num_bags,
            "selection": model.selection_}
    return _result(ctx, view, prep, model.logits_, model.fit_.outcome, info, model)


@register_method("rgnn", params=RGNNParams, private=True,
                 description="RGNN (Bhaila et al. SDM 2024): local DP on features (GRR-FS) and "
                             "labels (GRR), reconstruction over K hops, LLP regulariser")
def fit_rgnn(ctx: RunContext) -> MethodResult:
    """RGNN end to end (Algorithm 3); see `gnnprivacy.ldp.rgnn`."""
    p: RGNNParams = ctx.params
    return _fit_rgnn_like(ctx, p.rgnn_config(), SELECTION_GRID if p.select_hparams else None,
                          "rgnn")


@register_method("ldp-naive", params=LDPParams, private=True,
                 description="naive local-DP baseline: the backbone on the raw GRR-FS feature "
                             "and GRR label reports (no reconstruction, no LLP)")
def fit_ldp_naive(ctx: RunContext) -> MethodResult:
    """RGNN with ``K_x = K_y = 0`` and ``alpha = 0`` (spec 004 §10.3, baseline 1)."""
    from gnnprivacy.ldp.rgnn import RGNNConfig

    p: LDPParams = ctx.params
    config = RGNNConfig(backbone=p.backbone, kx=0, ky=0, alpha=0.0, num_clusters=0,
                        epochs=p.epochs, lr=p.lr, weight_decay=p.weight_decay, hidden=p.hidden,
                        dropout=p.dropout, heads=p.heads, grad_clip=p.grad_clip)
    return _fit_rgnn_like(ctx, config, None, "ldp-naive")


@register_method("lpgnn", params=LPGNNParams, private=True,
                 description="LPGNN (Sajadmanesh & Gatica-Perez CCS 2021): multi-bit features, "
                             "KProp, label denoising with forward correction")
def fit_lpgnn(ctx: RunContext) -> MethodResult:
    """LPGNN baseline; see `gnnprivacy.ldp.lpgnn`."""
    from gnnprivacy.ldp.lpgnn import LPGNN, LPGNNConfig

    p: LPGNNParams = ctx.params
    view, prep = _reports(ctx, "multibit")
    config = LPGNNConfig(backbone=p.backbone, kx=p.kx, ky=p.ky, epochs=p.epochs, lr=p.lr,
                         weight_decay=p.weight_decay, hidden=p.hidden, dropout=p.dropout,
                         heads=p.heads, grad_clip=p.grad_clip)
    model = LPGNN(config).fit(view, generator=_cpu_generator(ctx, "ldp-train"),
                              device=_device(ctx))
    info = {"config": dataclasses.asdict(config), "multibit_epsilon": view.m * p.eps_x}
    return _result(ctx, view, prep, model.logits_, model.fit_.outcome, info, model)


__all__ = ["LDPParams", "LPGNNParams", "PAPER_GROUP_SIZES", "RGNNParams", "SELECTION_GRID",
           "binary_features", "fit_ldp_naive", "fit_lpgnn", "fit_rgnn"]
