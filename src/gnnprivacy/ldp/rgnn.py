"""RGNN end to end (Algorithm 3): reconstruct, cluster, train with the LLP regulariser.

Bhaila, Huang, Wu and Wu, "Local Differential Privacy in Graph Neural Networks: a
Reconstruction Approach", SDM 2024, Algorithm 3; spec 004 §5-8. From a `ServerView`:

1. ``X~ = f_X(A, X', eps_x, m, K_x)`` (soft binary estimates) and ``Y~ = f_Y(A, Y', eps_y, K_y)``
   on the labelled nodes (`gnnprivacy.ldp.reconstruction`);
2. METIS partition of the public graph into ``C`` clusters; bags = cluster ∩ train; targets
   ``b~_r = clip_renorm(P_y^{-1} b'_r)`` from the perturbed labels (paper) or the reconstructed
   ones (``llp_source="reconstructed"``, the authors' code) (`gnnprivacy.ldp.llp`);
3. a 2-layer GNN trained full-batch for ``epochs`` epochs on
   ``mean_{train} CE(z_v, y~_v) + alpha * mean_r KL(b~_r || b^_r)`` (Adam, gradient clipping),
   keeping the epoch with the best accuracy against the *reconstructed* validation labels.

With ``K_x = K_y = 0`` and ``alpha = 0`` this is the naive baseline (a GNN on the raw reports).

Hyperparameter selection (`select_rgnn`): a small grid over the spec's values is trained
on the same reports and scored by the agreement of its best-epoch predictions with the
*perturbed* validation labels; the default configuration is kept unless another one beats it
by more than ``z`` paired standard errors. Agreement with GRR-perturbed labels is
``q + (p - q) * accuracy`` in expectation, an increasing function of the true accuracy, so the
ranking is unbiased whatever ``K_y`` (the reconstructed validation labels are not: they
depend on ``K_y`` and favour large ``K_y``). It is noisy when ``eps_y`` is small: its standard
error in accuracy points is about ``sqrt(a (1 - a) / n_val) / (p - q)`` (about 9 points on
Cora at ``eps_y = 1``), hence the incumbent rule.

Privacy: everything here post-processes the reports (no event); the per-user budget is that
of the reports (`gnnprivacy.ldp.budget`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from gnnprivacy._estimator import EstimatorParams
from gnnprivacy._validation import check_choice, check_int, check_real
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.ldp.backbone import ServerModelConfig, build_backbone, seeded
from gnnprivacy.ldp.llp import KL_DIRECTIONS, bag_targets, llp_loss, make_bags
from gnnprivacy.ldp.partition import metis_partition
from gnnprivacy.ldp.propagation import mean_adjacency
from gnnprivacy.ldp.reconstruction import (BINARY_OUTPUTS, reconstruct_features_for_steps,
                                           reconstruct_labels_for_steps)
from gnnprivacy.ldp.reports import ServerView
from gnnprivacy.ldp.training import TrainOutcome, train_full_batch

LLP_SOURCES = ("perturbed", "reconstructed")


@dataclass(frozen=True)
class RGNNConfig(ServerModelConfig):
    """Server-side hyperparameters of RGNN (defaults: the authors' code, spec 004 §10.2;
    shared ones: `ServerModelConfig`)."""

    num_clusters: int = 16
    alpha: float = 1.0
    llp_source: str = "perturbed"
    kl_direction: str = "target_pred"
    binary_output: str = "soft"

    def __post_init__(self):
        super().__post_init__()
        check_int("num_clusters", self.num_clusters, low=0)
        check_real("alpha", self.alpha, low=0.0)
        if self.alpha > 0 and self.num_clusters < 1:  # no bags: the LLP loss would silently be off
            raise InvalidParameterError("num_clusters", "at least 1 while alpha > 0 (0 clusters make no "
                                        "bags, so the LLP loss would be off; set alpha 0 to turn it off)",
                                        self.num_clusters)
        check_choice("llp_source", self.llp_source, LLP_SOURCES)
        check_choice("kl_direction", self.kl_direction, KL_DIRECTIONS)
        check_choice("binary_output", self.binary_output, BINARY_OUTPUTS)

    @property
    def uses_llp(self) -> bool:
        return self.alpha > 0 and self.num_clusters >= 1


class ReconstructionCache:
    """Memoised server-side work on one `ServerView` (shared by a hyperparameter grid).

    Holds ``Â``, the reconstructed features / labels per hop count (propagations for several
    ``K`` share their hops) and the METIS partitions per ``(C, seed)``.

    Args:
        view: the server's view.
        hide_val_labels: reconstruct labels from the *training* reports only (validation
            nodes still get a label, estimated from their neighbours). Used for
            hyperparameter selection, so that no validation report influences the models it
            scores.
        adj: a precomputed ``Â`` to share between caches.
    """

    def __init__(self, view: ServerView, *, hide_val_labels: bool = False,
                 adj: Tensor | None = None):
        if view.feature_mechanism != "grr-fs":
            raise ValueError("RGNN needs GRR-FS feature reports; got "
                             f"{view.feature_mechanism!r}")
        self.view = view
        self.hide_val_labels = bool(hide_val_labels)
        self.adj = mean_adjacency(view.edge_index, view.num_nodes) if adj is None else adj
        self._x: dict[tuple[int, str], Tensor] = {}
        self._y: dict[int, Tensor] = {}
        self._parts: dict[tuple[int, int], Tensor] = {}

    def prefetch(self, kxs: Iterable[int], kys: Iterable[int], binary_output: str = "soft") -> None:
        """Reconstruct for every hop count at once (one pass of ``max(K)`` hops each)."""
        v = self.view
        todo = [k for k in set(kxs) if (k, binary_output) not in self._x]
        if todo:
            got = reconstruct_features_for_steps(
                self.adj, v.x_reports, feature_epsilon=v.feature_epsilon, m=v.m, steps=todo,
                domain_sizes=v.domain_sizes, binary_output=binary_output)
            self._x.update({(k, binary_output): t for k, t in got.items()})
        todo = [k for k in set(kys) if k not in self._y]
        if todo:
            reports = v.train_mask if self.hide_val_labels else v.labeled_mask
            self._y.update(reconstruct_labels_for_steps(
                self.adj, v.y_reports, reports, epsilon=v.label_epsilon,
                num_classes=v.num_classes, steps=todo, output_mask=v.labeled_mask))

    def features(self, kx: int, binary_output: str = "soft") -> Tensor:
        self.prefetch([kx], [], binary_output)
        return self._x[(kx, binary_output)]

    def labels(self, ky: int) -> Tensor:
        self.prefetch([], [ky])
        return self._y[ky]

    def partition(self, num_parts: int, seed: int) -> Tensor:
        key = (num_parts, seed)
        if key not in self._parts:
            c = min(num_parts, self.view.num_nodes)
            self._parts[key] = metis_partition(self.view.edge_index, self.view.num_nodes, c,
                                               seed=seed)
        return self._parts[key]


@dataclass
class RGNNFit:
    """One trained RGNN: its configuration, training outcome and what it was trained on."""

    config: RGNNConfig
    outcome: TrainOutcome
    model: torch.nn.Module
    num_bags: int
    selection_score: float | None = None

    @property
    def logits(self) -> Tensor:
        return self.outcome.logits


def _llp_term(cache: ReconstructionCache, cfg: RGNNConfig, y_tilde: Tensor, seed: int):
    v = cache.view
    if not cfg.uses_llp:
        return None, 0
    bags = make_bags(cache.partition(cfg.num_clusters, seed), v.train_mask)
    source = v.y_reports if cfg.llp_source == "perturbed" else y_tilde
    targets = bag_targets(bags, source, epsilon=v.label_epsilon, num_classes=v.num_classes)
    return (bags, targets), bags.num_bags


def train_rgnn(cache: ReconstructionCache, config: RGNNConfig, *, generator: torch.Generator,
               partition_seed: int = 0, device: torch.device | str = "cpu") -> RGNNFit:
    """Train one RGNN configuration on the cached reconstructions (Algorithm 3, lines 4-15).

    Reconstruction and partitioning run on the CPU; the backbone trains on ``device`` and
    the returned logits are on the CPU.
    """
    v, cfg, dev = cache.view, config, torch.device(device)
    x_tilde = cache.features(cfg.kx, cfg.binary_output).to(dev)
    y_tilde = cache.labels(cfg.ky)
    llp, num_bags = _llp_term(cache, cfg, y_tilde, partition_seed)
    y_tilde = y_tilde.to(dev)
    if llp is not None and dev.type != "cpu":
        bags, bag_t = llp
        llp = (dataclasses.replace(bags, node_index=bags.node_index.to(dev),
                                   bag_of_node=bags.bag_of_node.to(dev),
                                   sizes=bags.sizes.to(dev)), bag_t.to(dev))
    train_idx = v.train_mask.nonzero().view(-1).to(dev)
    edge_index = v.edge_index.to(dev)
    model = build_backbone(cfg.backbone, x_tilde.size(1), v.num_classes, hidden=cfg.hidden,
                           dropout=cfg.dropout, heads=cfg.heads, generator=generator).to(dev)

    def loss_fn(logits: Tensor) -> Tensor:
        loss = torch.nn.functional.cross_entropy(logits[train_idx], y_tilde[train_idx])
        if llp is not None:
            loss = loss + cfg.alpha * llp_loss(logits, llp[0], llp[1], direction=cfg.kl_direction)
        return loss

    with seeded(generator, dev):
        outcome = train_full_batch(model, lambda: model(x_tilde, edge_index), loss_fn,
                                   val_mask=v.val_mask.to(dev), val_targets=y_tilde,
                                   epochs=cfg.epochs, lr=cfg.lr, weight_decay=cfg.weight_decay,
                                   grad_clip=cfg.grad_clip)
    outcome.logits = outcome.logits.cpu()
    return RGNNFit(config=cfg, outcome=outcome, model=model, num_bags=num_bags)


def perturbed_val_agreement(view: ServerView, logits: Tensor) -> Tensor:
    """Per validation node: 1 if the prediction equals the node's *perturbed* label, else 0."""
    idx = view.val_mask.nonzero().view(-1)
    return (logits[idx].argmax(1) == view.y_reports[idx]).float()


def select_rgnn(cache: ReconstructionCache, configs: Sequence[RGNNConfig], *,
                generator: torch.Generator, partition_seed: int = 0,
                z: float = 2.0, device: torch.device | str = "cpu"
                ) -> tuple[RGNNFit, list[dict]]:
    """Pick a configuration on noisy validation labels, then train it by the paper's protocol.

    Selection runs reconstruct labels from the *training* reports only, so the validation
    nodes' perturbed labels are independent of every scored model (with ``train ∪ val`` in
    ``f_Y``, a validation report leaks into its neighbours' training targets and small ``K_y``
    configurations agree with it spuriously). A configuration's score is the agreement of
    its best-epoch predictions with the perturbed validation labels, unbiased for the
    ranking by true accuracy. ``configs[0]`` is the incumbent (the default); the best-scoring
    configuration replaces it only if its paired advantage exceeds ``z`` standard errors,
    because with small ``eps_y`` the score is very noisy. The chosen configuration is then
    trained again on ``cache`` (labels from ``train ∪ val``, spec protocol).

    Returns:
        ``(final fit, table)``; the table lists each configuration's grid values, score,
        advantage over the incumbent (in standard errors), best epoch, and which was chosen.
    """
    if not configs:
        raise ValueError("select_rgnn needs at least one configuration")
    check_real("z", z, low=0.0)
    probe = ReconstructionCache(cache.view, hide_val_labels=True, adj=cache.adj)
    probe._parts = cache._parts  # partitions depend on the graph only: share them
    probe.prefetch({c.kx for c in configs}, {c.ky for c in configs}, configs[0].binary_output)
    scored = []
    for cfg in configs:
        fit = train_rgnn(probe, cfg, generator=generator, partition_seed=partition_seed,
                         device=device)
        hits = perturbed_val_agreement(cache.view, fit.logits)
        fit.selection_score = float(hits.mean()) if hits.numel() else 0.0
        scored.append((fit, hits))
    table = []
    for fit, hits in scored:
        diff = hits - scored[0][1]
        se = float(diff.std()) / diff.numel() ** 0.5 if diff.numel() > 1 else 0.0
        cfg = fit.config
        table.append({"kx": cfg.kx, "ky": cfg.ky, "num_clusters": cfg.num_clusters,
                      "alpha": cfg.alpha, "dropout": cfg.dropout, "score": fit.selection_score,
                      "advantage_se": float(diff.mean()) / se if se > 0 else 0.0,
                      "best_epoch": fit.outcome.best_epoch})
    best = max(range(len(scored)), key=lambda i: (scored[i][0].selection_score, -i))
    chosen = best if table[best]["advantage_se"] > z else 0
    for i, row in enumerate(table):
        row["chosen"] = i == chosen
    final = train_rgnn(cache, configs[chosen], generator=generator, partition_seed=partition_seed,
                       device=device)
    final.selection_score = scored[chosen][0].selection_score
    return final, table


def grid_configs(base: RGNNConfig, grid: dict[str, Sequence]) -> list[RGNNConfig]:
    """``base`` first, then the rest of the cartesian product of ``grid`` (field -> values)."""
    configs = [base]
    for name, values in grid.items():
        configs = [dataclasses.replace(c, **{name: v}) for c in configs for v in values]
    return [base] + [c for c in dict.fromkeys(configs) if c != base]


class RGNN(EstimatorParams):
    """Estimator wrapper: ``RGNN(config, grid=...).fit(view, generator=g)``.

    *Privacy*: local DP. Each user reports once: ``m`` sampled features by GRR-FS at
    ``eps_x`` each and the label by GRR at ``eps_y``, so a labelled user spends
    ``m * eps_x + eps_y`` (`gnnprivacy.ldp.user_budget`); unit node, relation replace. The
    server (this class) sees only the reports: reconstruction and training are post-processing.

    Attributes (after `fit`): ``fit_`` (the selected `RGNNFit`), ``selection_``
    (the grid table, empty without a grid), ``logits_``, ``config_`` (the selected config).

    Example:
        >>> import torch
        >>> from gnnprivacy.datasets import load_dataset
        >>> from gnnprivacy.ldp import collect_reports
        >>> data = load_dataset("csbm", num_nodes=400, seed=0)
        >>> x = (data.x > 0).float()       # binary features: the users' public preprocessing
        >>> view = collect_reports(x, data.y, edge_index=data.edge_index, train_mask=data.train_mask,
        ...                        val_mask=data.val_mask, test_mask=data.test_mask, num_classes=4,
        ...                        eps_x=1.0, eps_y=1.0, m=4, generator=torch.Generator().manual_seed(0))
        >>> from gnnprivacy.ldp import RGNN, RGNNConfig
        >>> model = RGNN(RGNNConfig(epochs=10)).fit(view, generator=torch.Generator().manual_seed(1))
        >>> model.predict().shape
        torch.Size([400])
    """

    def __init__(self, config: RGNNConfig | None = None, *, grid: dict[str, Sequence] | None = None,
                 z: float = 2.0):
        self.config = config or RGNNConfig()
        self.grid = dict(grid or {})
        self.z = z

    def fit(self, view: ServerView, *, generator: torch.Generator, partition_seed: int = 0,
            device: torch.device | str = "cpu") -> RGNN:
        cache = ReconstructionCache(view)
        if self.grid:
            self.fit_, self.selection_ = select_rgnn(
                cache, grid_configs(self.config, self.grid), generator=generator,
                partition_seed=partition_seed, z=self.z, device=device)
        else:
            self.fit_ = train_rgnn(cache, self.config, generator=generator,
                                   partition_seed=partition_seed, device=device)
            self.selection_ = []
        self.config_ = self.fit_.config
        self.logits_ = self.fit_.logits
        return self

    def predict(self) -> Tensor:
        """Class predictions of the selected model at its best epoch."""
        return self.logits_.argmax(dim=1)

    def __repr__(self) -> str:
        return f"RGNN(config={self.config!r}, grid={self.grid!r})"


__all__ = ["LLP_SOURCES", "RGNN", "RGNNConfig", "RGNNFit", "ReconstructionCache",
           "grid_configs", "perturbed_val_agreement", "select_rgnn", "train_rgnn"]
