"""DP-GNN: node-level DP training of a one-layer GCN on degree-bounded subgraphs.

Reference: *Node-Level Differentially Private Graph Neural Networks* (DP-GNN), Algorithms
1-3 (spec 002 §3.2-3.7). Once, before training, the greedy Algorithm 2 bounds every
training node's neighbourhood ``S_v`` to ``K`` neighbours and every node's occurrences to
``K`` other lists. Then for ``t = 1..T``:

```
B_t  ← uniform m-subset of V_tr (or Poisson with rate m/N)
ũ_t  ← Σ_{v∈B_t} clip_C(∇ ℓ_v(Θ)) + N(0, σ² I),   σ = λ · 2(K+1) · C_eff
Θ    ← SGD(Θ, ũ_t / m)   or   Adam(Θ, ũ_t / m)          (DP-Adam: average first)
```

``λ`` is calibrated so that the epsilon after ``T`` steps does not exceed the target.

Privacy:
    Unit: node. Relation: replace-one with ``N = |V_tr|`` public (spec 002 §8 A1; the
    bound 2(K+1)C also covers add/remove). Event: one DP-GNN multi-term event per
    executed step (hypergeometric amplification for fixed batches, binomial for Poisson
    batches; spec 002 Theorem 1 / §4.4). Scope: the degree-bounded subgraphs are the
    dataset; the data-dependent greedy pass is not covered (spec 002 §8 A2), nor is the
    optional percentile clipping calibration (``clip_percentile``, §8 A7, recorded as
    unaccounted) or full-graph inference (§3.9, setting 1). All three are listed in
    ``privacy["unaccounted"]``: the greedy degree bounding depends on the data (removing
    one training node changes other nodes' rows), and the default full-graph inference
    reads training nodes and their edges. ``degree_sampler="per_edge"`` replaces
    Algorithm 2 by the stateless per-edge sampler of spec 002 §8 A2
    (`gnnprivacy.sampling.per_edge`), whose coins depend on each edge only. The
    relation is replace-one (fixed batches): do not compare its epsilon with the
    add/remove epsilon of the other methods as if they were equal.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F
from torch_geometric.data import Data

from gnnprivacy._fixed_shapes import fixed_shapes
from gnnprivacy._validation import (check_choice, check_int, check_positive, check_real,
                                    check_delta_range, check_target_epsilon)
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.nn.dpgnn import ACTIVATIONS, OneLayerGCN
from gnnprivacy.sampling import NodeBatchSampler, sample_degree_bounded_subgraphs
from gnnprivacy.sampling.fixed_shape import FixedShapeNodeBatches
from gnnprivacy.sampling.per_edge import PER_EDGE_SCOPE, sample_per_edge_bounded_subgraphs
from gnnprivacy.training.dp import ClipGroup, DPEngine, clipped_gradient_sum, make_optimizer
from gnnprivacy.training import _privacy
from gnnprivacy.training.node_dp.base import NodeDPTrainer
from gnnprivacy.training.node_dp.common import FeatureNorm, LogitsClassifier, is_inductive
from gnnprivacy.training.nonprivate import num_classes_of, training_graph

__all__ = ["DPGNNTrainer", "default_delta_dpgnn"]

CLIP_GROUPINGS = ("global", "per_tensor")
DEGREE_SAMPLERS = ("greedy", "per_edge")
DEFAULT_LR = {"adam": 0.003, "sgd": 1.0}


def default_delta_dpgnn(num_train: int) -> float:
    """``δ = 1 / (10 N)`` with ``N = |V_tr|`` (spec 002 §3.0)."""
    return 1.0 / (10.0 * num_train)


class DPGNNTrainer(LogitsClassifier, NodeDPTrainer):
    """DP-GNN (spec 002) as an estimator.

    *Privacy*: unit node, relation replace-one (the number of training nodes is public).
    One DP-GNN multi-term event (`DpGnnDpEvent`) per executed step, composed by an RDP
    accountant. Not covered, and listed in ``privacy_record()["unaccounted"]``: the
    data-dependent degree bounding and the full-graph inference. Its epsilon is for
    replace-one: do not compare it with an add/remove epsilon as if they were equal.

    Args:
        epsilon: target epsilon (> 0).
        delta: target delta in (0, 1); ``None`` means ``1 / (10 |V_tr|)``.
        max_degree: degree bound ``K`` (10).
        batch_size: ``m``; ``None`` means ``min(10000, |V_tr|)``.
        sampling: ``"fixed"`` (uniform m-subsets, the paper) or ``"poisson"``.
        optimizer: ``"adam"`` (DP-Adam) or ``"sgd"`` (DP-SGD).
        lr: learning rate; ``None`` means 0.003 (Adam) or 1.0 (SGD).
        epochs: ``T = ⌈epochs · N / m⌉`` noisy steps (default 20).
        steps: explicit ``T`` (overrides ``epochs``).
        clip_norm: manual clip threshold ``C`` (per tensor when ``clip_grouping="per_tensor"``).
        clip_grouping: ``"global"`` or ``"per_tensor"``.
        clip_percentile: if set, the paper's heuristic: ``C_l`` = ``clip_scale`` times this
            percentile of the per-node gradient norms at initialisation, computed on private
            data WITHOUT accounting (warns; recorded as unaccounted).
        clip_scale: ``C_f`` of that heuristic.
        hidden_channels: width of the model (`gnnprivacy.nn.OneLayerGCN`).
        encoder_layers: affine layers of the encoder.
        decoder_layers: affine layers of the decoder.
        activation: activation of the encoder and decoder.
        post_agg_activation: apply the activation after the aggregation too.
        feature_norm: see `FeatureNorm`.
        noise_multiplier: fix ``λ`` instead of calibrating it.
        degree_sampler: ``"greedy"`` (the paper's Algorithm 2, default) or ``"per_edge"``
            (stateless per-edge coins, spec 002 §8 A2 [EXT]).
        generator: randomness: a ``torch.Generator``, an int seed or ``None`` (OS entropy);
            seeded noise is for reproducible research only.
        progress: optional ``progress(description, total)`` factory, advanced per step.
        secure_mode: draw all noise from the OS CSPRNG (see the secure-mode page).
        device: ``"cpu"`` or ``"cuda[:K]"`` (refused clearly when unavailable).
        checkpoint_path: file of the atomic checkpoint for kill-and-resume (``None``: off).
        checkpoint_every: steps between checkpoints.
        resume: continue from ``checkpoint_path`` when it holds a checkpoint of this run.

    Example:
        >>> from gnnprivacy.datasets import load_dataset
        >>> data = load_dataset("csbm", num_nodes=400, seed=0)     # a PyG Data with masks
        >>> from gnnprivacy.training.node_dp import DPGNNTrainer
        >>> trainer = DPGNNTrainer(epsilon=4.0, max_degree=5, steps=20, generator=0).fit(data)
        >>> trainer.epsilon_ <= 4.0, trainer.privacy_record()["relation"]
        (True, 'replace')
    """

    name = "dpgnn"

    def __init__(self, *, epsilon: float = 8.0, delta: float | None = None, max_degree: int = 10,
                 batch_size: int | None = None, sampling: str = "fixed", optimizer: str = "adam",
                 lr: float | None = None, epochs: float = 20.0, steps: int | None = None,
                 clip_norm: float = 1.0, clip_grouping: str = "global",
                 clip_percentile: float | None = None, clip_scale: float = 1.0,
                 hidden_channels: int = 100, encoder_layers: int = 1, decoder_layers: int = 1,
                 activation: str = "tanh", post_agg_activation: bool = False,
                 feature_norm: str = "auto", noise_multiplier: float | None = None,
                 generator: torch.Generator | int | None = None,
                 progress: Callable[[str, int], object] | None = None,
                 allow_large_delta: bool = False,
                 degree_sampler: str = "greedy", secure_mode: bool = False,
                 device: str | torch.device = "cpu", checkpoint_path: str | None = None,
                 checkpoint_every: int = 100, resume: bool = False):
        self._set_runtime(secure_mode=secure_mode, device=device,
                          checkpoint_path=checkpoint_path, checkpoint_every=checkpoint_every,
                          resume=resume)
        self.degree_sampler = check_choice("degree_sampler", degree_sampler, DEGREE_SAMPLERS)
        self.epsilon = check_target_epsilon("epsilon", epsilon)
        self.delta = None if delta is None else check_delta_range("delta", delta)
        self.max_degree = check_int("max_degree", max_degree, low=0)
        self.batch_size = None if batch_size is None else check_int("batch_size", batch_size, low=1)
        self.sampling = check_choice("sampling", sampling, ("fixed", "poisson"))
        self.optimizer = check_choice("optimizer", optimizer, DEFAULT_LR)
        self.lr = DEFAULT_LR[self.optimizer] if lr is None else check_positive("lr", lr)
        self.epochs = check_positive("epochs", epochs)
        self.steps = None if steps is None else check_int("steps", steps, low=1)
        self.clip_norm = check_positive("clip_norm", clip_norm)
        self.clip_grouping = check_choice("clip_grouping", clip_grouping, CLIP_GROUPINGS)
        self.clip_percentile = (None if clip_percentile is None else check_real(
            "clip_percentile", clip_percentile, low=0.0, high=100.0))
        self.clip_scale = check_positive("clip_scale", clip_scale)
        self.model_kwargs = dict(hidden_channels=hidden_channels, encoder_layers=encoder_layers,
                                 decoder_layers=decoder_layers,
                                 activation=check_choice("activation", activation, ACTIVATIONS),
                                 post_agg_activation=bool(post_agg_activation))
        self.feature_norm = FeatureNorm(feature_norm).requested
        self.noise_multiplier = (None if noise_multiplier is None
                                 else check_real("noise_multiplier", noise_multiplier, low=0.0))
        self.generator = generator
        self.progress = progress
        self.allow_large_delta = bool(allow_large_delta)

    def _clip_groups(self, x: Tensor, nodes: Tensor, mask: Tensor, y: Tensor) -> list[ClipGroup]:
        names = [n for n, _ in self.model_.named_parameters()]
        if self.clip_percentile is None:
            if self.clip_grouping == "global":
                return [ClipGroup(tuple(names), self.clip_norm)]
            return [ClipGroup((n,), self.clip_norm) for n in names]
        warnings.warn("clip_percentile calibrates clipping thresholds on private data without "
                      "privacy accounting (spec 002 §8 A7)", stacklevel=3)
        groups = ([ClipGroup(tuple(names), math.inf)] if self.clip_grouping == "global"
                  else [ClipGroup((n,), math.inf) for n in names])
        probe = [ClipGroup(g.names, 1e300) for g in groups]
        res = clipped_gradient_sum(self.model_, lambda: F.cross_entropy(
            self.model_(x, nodes, mask), y[nodes[:, 0]], reduction="none"), clip_norm=probe)
        self.model_.zero_grad(set_to_none=True)
        return [ClipGroup(g.names, max(1e-12, self.clip_scale * float(np.percentile(
            res.group_norms[k].cpu().numpy(), self.clip_percentile))))
            for k, g in enumerate(groups)]

    def _fit(self, data: Data, gens: dict[str, torch.Generator]) -> None:
        inductive = is_inductive(data)
        graph = training_graph(data)
        train = graph.train_mask.nonzero().flatten()
        n_train = int(train.numel())
        m = min(10000, n_train) if self.batch_size is None else self.batch_size
        delta = self.delta if self.delta is not None else default_delta_dpgnn(n_train)
        if self.degree_sampler == "greedy":
            bounded = sample_degree_bounded_subgraphs(
                graph.edge_index, graph.num_nodes, train_nodes=train,
                max_degree=self.max_degree, generator=gens["subgraphs"])
            scope = bounded.accounting_params()["scope"]
        else:
            bounded = sample_per_edge_bounded_subgraphs(
                graph.edge_index, graph.num_nodes, train_nodes=train,
                max_degree=self.max_degree,
                seed=int(torch.randint(0, 2**62, (1,), generator=gens["subgraphs"])))
            scope = PER_EDGE_SCOPE
        batches = NodeBatchSampler(n_train, batch_size=m, sampling=self.sampling)
        self.steps_planned_ = self.steps or math.ceil(self.epochs * n_train / m)
        _privacy.check_plan(delta=delta, num_units=n_train, steps=self.steps_planned_,
                            explicit_steps=self.steps is not None,
                            allow_large_delta=self.allow_large_delta,
                            how=f"T = ceil(epochs N / m) with m = {m}")
        make_event = _privacy.dpgnn_event_factory(num_train=n_train, batch_size=m,
                                                  max_degree=self.max_degree,
                                                  sampling=self.sampling)
        self.noise_multiplier_ = (self.noise_multiplier if self.noise_multiplier is not None
                                  else _privacy.calibrate(make_event, steps=self.steps_planned_,
                                                          epsilon=self.epsilon, delta=delta,
                                                          kind="rdp"))
        public = None if inductive else ~graph.train_mask
        self.feature_norm_ = FeatureNorm(self.feature_norm).fit(graph.x, public)
        dev = self.device_
        x, y = self.feature_norm_.transform(graph.x).to(dev), graph.y.to(dev)
        self.num_classes_ = num_classes_of(data)
        self.model_ = OneLayerGCN(x.shape[1], self.num_classes_, indexed_input=True,
                                  **self.model_kwargs).to(dev)
        neighbors, row_mask = bounded.neighbors.to(dev), bounded.mask.to(dev)
        self.model_.encoder[0].cache_grams(x, neighbors)
        estimation = neighbors[:10000], row_mask[:10000]
        groups = self._clip_groups(x, *estimation, y)
        relation = (NeighboringRelation.REPLACE if self.sampling == "fixed"
                    else NeighboringRelation.ADD_OR_REMOVE)
        self.accountant_ = _privacy.new_accountant("rdp", PrivacyUnit.NODE, relation)
        opt = make_optimizer(self.optimizer, self.model_.parameters(), lr=self.lr)
        gen, noise = self._step_generators(gens)
        engine = DPEngine(self.model_, opt, clip_norm=groups,
                          noise_multiplier=self.noise_multiplier_ * 2 * bounded.max_occurrence,
                          expected_batch_size=m, generator=noise,
                          secure_mode=self.secure_mode, accountant=self.accountant_,
                          step_event=make_event(self.noise_multiplier_),
                          sampling="degree_bounded")
        model = self.model_
        on_device = FixedShapeNodeBatches.from_sampler(batches, dev) if fixed_shapes(dev) else None

        def closure_for_step():
            valid = None
            if on_device is not None:     # drawn on the device, fixed size: no host sync
                index, valid = on_device.sample(gen)
            else:
                index = batches.sample(gen).to(dev)
            nodes, mask = neighbors[index], row_mask[index]
            if valid is None:
                return lambda: F.cross_entropy(model(x, nodes, mask), y[nodes[:, 0]],
                                               reduction="none")
            weight = valid.to(x.dtype)     # Poisson batch: padding slots weigh nothing
            return lambda: F.cross_entropy(model(x, nodes, mask), y[nodes[:, 0]],
                                           reduction="none") * weight

        self._run(engine, self.steps_planned_, closure_for_step)
        if on_device is not None:
            on_device.check()
            self.model_.encoder[0].check_gram_cache()
        self._finish(engine, delta)
        self.privacy_info_ = {
            "unit": PrivacyUnit.NODE.value, "relation": relation.value, "accountant": "rdp",
            "noise_multiplier": self.noise_multiplier_, "noise_std": self.noise_std_,
            "clip_norms": [g.clip_norm for g in groups], "clip_norm_effective": engine.clip_norm,
            "max_degree": self.max_degree, "batch_size": m, "sampling": self.sampling,
            "steps": self.steps_, "scope": scope, "degree_sampler": self.degree_sampler,
            "secure_mode": self.secure_mode,
            "unaccounted": (
                (["greedy degree bounding (Algorithm 2) depends on the data: removing one "
                  "training node can change other nodes' rows (spec 002 §8 A2)"]
                 if self.degree_sampler == "greedy" else
                 ["per-edge degree bounding: the drop rule can change rows within distance "
                  "2 of a removed node, and the default keep rate reads node degrees "
                  "(spec 002 §8 A2 [EXT])"])
                + ["inference on the full graph: predictions, and the `metrics` computed "
                   "from them, aggregate training nodes and all their edges without degree "
                   "bound or noise (spec 002 §3.9 setting 1)"]
                + (["clip_percentile calibration"] if self.clip_percentile is not None
                   else [])
                + (["feature standardisation over private nodes"]
                   if self.feature_norm_.unaccounted else [])),
            "calibrated": self.noise_multiplier is None}
        self.info_ = {"setting": "inductive" if inductive else "transductive",
                      "num_train": n_train, "mean_subgraph_degree":
                      float(bounded.degrees().float().mean())}

    def predict_logits(self, data: Data) -> Tensor:
        """Full-graph forward with no degree limit (spec 002 §3.9 setting 1; not private)."""
        self._check_fitted()
        dev = self.device_
        with torch.no_grad():
            return self.model_.forward_full(
                data.x, data.edge_index.to(dev),
                transform=lambda part: self.feature_norm_.transform(part).to(dev)).cpu()

    def __repr__(self) -> str:
        return (f"DPGNNTrainer(epsilon={self.epsilon:g}, delta={self.delta}, K={self.max_degree}, "
                f"batch_size={self.batch_size}, optimizer={self.optimizer!r}, "
                f"sampling={self.sampling!r})")
