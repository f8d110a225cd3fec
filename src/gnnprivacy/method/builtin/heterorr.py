"""HeteroRR (Tran et al., IEEE BigData 2022; spec 001) and its baselines as training methods.

* ``heterorr``: FeatureRR (``--eps-f``) and EdgeRR (``--eps-e``, private edges only);
* ``featurerr`` / ``edgerr``: one part only (the other left clean);
* feature baselines ``feat-duchi``, ``feat-piecewise``, ``feat-hybrid``, ``feat-three-output``,
  ``feat-pm-sub`` (``eps_f / d`` per coordinate) and ``feat-multibit`` (LPGNN's encoder);
* edge baselines ``edge-privhrg``, ``edge-rand``, ``edge-lapgraph`` (all edges protected).

Each method releases a privatised copy of the graph (`gnnprivacy.ldp.heterorr.pipeline.release`,
a random public/private edge split with ``--private-edge-frac``) and trains a 2-layer GCN on it
(post-processing, no further cost); the test nodes' features are perturbed too (transductive).

Privacy: two accountants, one per unit (spec §4.6): unit ``feature`` (relation replace, local
DP) and unit ``edge`` (add/remove one private edge for EdgeRR, any edge for the baselines).
A one-part method's record states that part's epsilon. ``heterorr`` releases both parts, so
its record's ``epsilon`` is their total under the relation it declares, one node's feature
vector replaced *and* one private edge added or removed (unit ``feature+edge``): the two
releases are independent pure-DP mechanisms of disjoint inputs, so the total is ``eps_f +
eps_e`` (basic composition), with ``epsilon_features`` and ``epsilon_edges`` beside it
(issue 22 item 5). ``privacy`` also carries the guarantee tags and what is unaccounted,
including the public reference nodes whose raw features and labels set FeatureRR's budget
split.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from gnnprivacy._validation import (check_choice, check_int, check_positive, check_probability,
                                    check_pure_epsilon, check_real)
from gnnprivacy.method.context import MethodResult, RunContext
from gnnprivacy.method.spec import register_method

__all__ = ["EdgeParams", "FeatureParams", "HeteroRRParams", "JOINT_RELATION", "JOINT_UNIT",
           "METHODS", "fit_release", "train_gcn"]


@dataclass(frozen=True)
class _TrainParams:
    """The GCN trained on the released graph (post-processing)."""

    epochs: int = field(default=300, metadata={"help": "maximum training epochs"})
    lr: float = field(default=0.01, metadata={"help": "Adam learning rate"})
    weight_decay: float = field(default=5e-4, metadata={"help": "Adam weight decay"})
    hidden: int = field(default=128, metadata={"help": "GCN hidden channels"})
    dropout: float = field(default=0.5, metadata={"help": "dropout"})
    patience: int = field(default=50, metadata={"help": "early-stopping patience"})

    def __post_init__(self):
        check_int("epochs", self.epochs, low=1)
        check_positive("lr", self.lr)
        check_real("weight_decay", self.weight_decay, low=0.0)
        check_int("hidden", self.hidden, low=1)
        check_probability("dropout", self.dropout, allow_one=False)
        check_int("patience", self.patience, low=1)


@dataclass(frozen=True)
class FeatureParams(_TrainParams):
    """A feature mechanism (FeatureRR or a feature baseline); edges are released clean."""

    eps_f: float = field(default=1.0, metadata={
        "help": "feature LDP budget per node (FeatureRR / feature baselines; > 0)"})
    levels: int = field(default=10, metadata={"help": "FeatureRR levels k (>= 2)"})
    gamma: float = field(default=0.5, metadata={
        "help": "FeatureRR importance/sensitivity weight gamma in [0, 1]"})
    score_source: str = field(default="public_nodes", metadata={
        "help": "FeatureRR importance: public_nodes (sound) | uniform | private (paper, "
                "heuristic)"})
    public_node_frac: float = field(default=0.1, metadata={
        "help": "fraction of nodes declared public for the importance scores"})

    def __post_init__(self):
        super().__post_init__()
        check_pure_epsilon("eps_f", self.eps_f)
        check_int("levels", self.levels, low=2)
        check_probability("gamma", self.gamma)
        check_choice("score_source", self.score_source, ("public_nodes", "uniform", "private"))
        check_probability("public_node_frac", self.public_node_frac, allow_zero=False)


@dataclass(frozen=True)
class EdgeParams(_TrainParams):
    """An edge mechanism (EdgeRR or an edge baseline); features are released clean."""

    eps_e: float = field(default=1.0, metadata={
        "help": "edge DP budget (EdgeRR: private edges; edge baselines: all edges; > 0)"})
    private_edge_frac: float = field(default=0.3, metadata={
        "help": "rho: fraction of edges declared private (random split, in [0, 1])"})
    edge_split: float = field(default=0.5, metadata={
        "help": "eps_e1 / eps_e for EdgeRR and privHRG (MCMC share)"})
    mode: str = field(default="sound", metadata={
        "help": "EdgeRR: sound (joint acceptance, c_em=2, V-bar=V) | paper"})
    mcmc_steps: int | None = field(default=None, metadata={
        "help": "MCMC moves (default ceil(50 n / 65536) * 65536)"})

    def __post_init__(self):
        super().__post_init__()
        check_pure_epsilon("eps_e", self.eps_e)
        check_probability("private_edge_frac", self.private_edge_frac)
        check_real("edge_split", self.edge_split, low=0.0, high=1.0, low_open=True,
                   high_open=True)
        check_choice("mode", self.mode, ("sound", "paper"))
        if self.mcmc_steps is not None:
            check_int("mcmc_steps", self.mcmc_steps, low=1)  # 0 moves: the initial random tree


@dataclass(frozen=True)
class HeteroRRParams(FeatureParams, EdgeParams):
    """HeteroRR: a feature and an edge mechanism (every option of both; the inherited
    ``__post_init__`` chain checks both parts)."""


#: heterorr's declared relation: one node's feature vector replaced and one private edge
#: added or removed (its record's top-level epsilon is the total under it)
JOINT_UNIT = "feature+edge"
JOINT_RELATION = "feature_replace+edge_add_or_remove"

#: the options of the release (both parts), i.e. everything but the GCN's
_RELEASE_OPTIONS = tuple(f.name for f in fields(HeteroRRParams)
                         if f.name not in {t.name for t in fields(_TrainParams)})

#: method name -> (feature method, edge method, description)
METHODS = {
    "heterorr": ("featurerr", "edgerr", "HeteroRR: FeatureRR features + EdgeRR private edges"),
    "featurerr": ("featurerr", "clean", "FeatureRR features only (edges clean)"),
    "edgerr": ("clean", "edgerr", "EdgeRR private edges only (features clean)"),
    "feat-duchi": ("duchi", "clean", "Duchi et al. per coordinate at eps_f/d"),
    "feat-piecewise": ("piecewise", "clean", "piecewise mechanism per coordinate at eps_f/d"),
    "feat-hybrid": ("hybrid", "clean", "hybrid mechanism per coordinate at eps_f/d"),
    "feat-three-output": ("three-output", "clean", "three-output mechanism at eps_f/d"),
    "feat-pm-sub": ("pm-sub", "clean", "sub-optimal piecewise mechanism at eps_f/d"),
    "feat-multibit": ("multibit", "clean", "LPGNN multi-bit encoder (rectified) at eps_f"),
    "edge-privhrg": ("clean", "privhrg", "privHRG on all edges (Xiao et al. KDD 2014)"),
    "edge-rand": ("clean", "edgerand", "EdgeRand on all edges (Wu et al. S&P 2022)"),
    "edge-lapgraph": ("clean", "lapgraph", "LapGraph on all edges (Wu et al. S&P 2022)"),
}


def fit_release(ctx: RunContext, feature_method: str, edge_method: str):
    """Release the graph as ``ctx.params`` describe (seeded from ``ctx``)."""
    from gnnprivacy.ldp.heterorr.pipeline import release

    p = ctx.params
    # a feature-only method has no edge options and vice versa: the release then takes the
    # clean side's defaults, which it does not use
    own = {f: getattr(p, f) for f in _RELEASE_OPTIONS if hasattr(p, f)}
    return release(ctx.data, feature_method=feature_method, edge_method=edge_method,
                   seed_for=ctx.seed_for, **own)


def train_gcn(data, p: _TrainParams, *, generator, progress=None, device="cpu"):
    """A 2-layer GCN trained (non-privately: post-processing) on the released graph."""
    from gnnprivacy.training.nonprivate import FullBatchTrainer

    trainer = FullBatchTrainer("gcn", hidden_channels=p.hidden, num_layers=2,
                               dropout=p.dropout, lr=p.lr, weight_decay=p.weight_decay,
                               epochs=p.epochs, patience=p.patience, generator=generator,
                               progress=progress, device=device)
    return trainer.fit(data)


def numba_hint(edge_method: str) -> str:
    """A hint for the log line when the HRG MCMC (edgerr, privhrg) ran without numba.

    Args:
        edge_method: the release's edge method.

    Returns:
        ``""`` when numba compiled the kernels or no MCMC ran, else the install hint.
    """
    if edge_method not in ("edgerr", "privhrg"):
        return ""
    from gnnprivacy.ldp.heterorr import _kernels

    if _kernels.HAVE_NUMBA:
        return ""
    return ("; the HRG MCMC ran in pure Python (about 10x slower): "
            "pip install 'gnnprivacy[heterorr]' (numba) compiles it")


def _fit(ctx: RunContext, name: str) -> MethodResult:
    feature_method, edge_method, _ = METHODS[name]
    rel = fit_release(ctx, feature_method, edge_method)
    trainer = train_gcn(rel.data, ctx.params, generator=ctx.torch_generator("train"),
                        progress=ctx.progress, device=ctx.device)
    metrics = {}
    for split in ("val", "test"):
        if bool(rel.data[f"{split}_mask"].any()):
            for key, value in trainer.evaluate(rel.data, f"{split}_mask").items():
                metrics[f"{split}_{key}"] = value
    pr = {**rel.privacy, "relations": rel.privacy.get("relation"),
          "units": rel.privacy.get("unit")}
    if feature_method != "clean" and edge_method != "clean":
        # both parts: the total under the joint relation (pure DP, disjoint inputs)
        epsilon = rel.privacy["epsilon_features"] + rel.privacy["epsilon_edges"]
        pr.update(unit=JOINT_UNIT, relation=JOINT_RELATION, epsilon_part="total",
                  epsilon_total=epsilon, composition="eps_f + eps_e: basic composition of "
                  "the feature and edge releases (independent, pure DP, disjoint inputs)")
    else:
        # one part: the record's epsilon, unit and relation are that part's
        part = "edges" if edge_method != "clean" else "features"
        epsilon = rel.privacy[f"epsilon_{part}"]
        pr.update(relation=(rel.privacy.get("relation") or {}).get(part),
                  unit=(rel.privacy.get("unit") or {}).get(part), epsilon_part=part)
    ctx.log(f"{name}: eps_f={pr['epsilon_features']:.4g} (LDP), eps_e={pr['epsilon_edges']:.4g}"
            f" (edge), test accuracy {metrics.get('test_accuracy', float('nan')):.4f}"
            f"{numba_hint(edge_method)}")
    ledger = {"features": rel.feature_accountant.to_dict(delta=0.0),
              "edges": rel.edge_accountant.to_dict(delta=0.0)}
    info = {**rel.info, "best_epoch": trainer.best_epoch_}
    return MethodResult(metrics=metrics, epsilon=epsilon, delta=0.0, ledger=ledger,
                        privacy=pr, info=info)


def params_of(name: str) -> type:
    """The options a method takes: both sides for heterorr, one side for the others."""
    feature_method, edge_method, _ = METHODS[name]
    if feature_method != "clean" and edge_method != "clean":
        return HeteroRRParams
    return FeatureParams if feature_method != "clean" else EdgeParams


def _register(name: str) -> None:
    @register_method(name, params=params_of(name), private=True, description=METHODS[name][2])
    def fit(ctx: RunContext) -> MethodResult:
        return _fit(ctx, name)

    fit.__name__ = f"fit_{name.replace('-', '_')}"


for _name in METHODS:
    _register(_name)
