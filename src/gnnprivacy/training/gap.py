"""GAP: differentially private GNN by aggregation perturbation, node-level (Sajadmanesh et al.).

Reference: S. Sajadmanesh, A. S. Shamsabadi, A. Bellet, D. Gatica-Perez, *GAP:
Differentially Private Graph Neural Networks with Aggregation Perturbation*, USENIX
Security 2023; its node-level analysis is criticised in spec 000 §5.3 (Xiang et al.).

Three modules, each private on its own, composed by one accountant:

1. **Encoder** (DP-SGD): an MLP ``x ↦ h`` with a linear head, trained on the training
   nodes' own features and labels with per-node clipping ``C`` and Poisson sampling at
   rate ``q``; embeddings ``e = h / ‖h‖`` for every node.
2. **Aggregation** (Gaussian mechanism per hop, ``K`` hops): on a degree-bounded graph
   (each node keeps at most ``D`` in-edges and ``D`` out-edges, chosen by random
   per-edge priorities), ``x⁽ᵏ⁾_i = Σ_{j ∈ {i} ∪ NB(i)} x̄⁽ᵏ⁻¹⁾_j + N(0, σ_agg² I)`` with
   ``x̄ = x / ‖x‖`` and ``x⁽⁰⁾ = e``.
3. **Classifier** (DP-SGD): an MLP on ``[x̄⁽⁰⁾, …, x̄⁽ᴷ⁾]`` trained like the encoder.

One noise multiplier ``z`` is calibrated jointly (as GAP does): DP-SGD noise ``z C``,
aggregation noise ``σ_agg = z Δ``. The per-hop sensitivity ``Δ`` is where the modes differ:

* ``accounting="paper"``: ``Δ = √D`` (GAP's node-level code: a node's unit row enters at
  most ``D`` aggregates). It ignores the node's *own* aggregate row (up to ``D + 1`` unit
  vectors) — the flaw found by Xiang et al. (IEEE S&P 2024, §5.3);
* ``accounting="bounded-graph"`` (default): ``Δ = 2(D + 1)``, the corrected noise. It is a
  guarantee about the **degree-bounded graph**: for two graphs whose in- and out-degrees are
  all at most ``D`` and that differ in one node (its features, label and edges; its slot kept
  as a zero row when absent), the aggregate matrices differ by at most
  ``√((D+1)² + D) ≤ 2(D+1)``. On such a graph `bound_degree` is the identity, so the
  guarantee holds for the input graph itself. On a graph with larger degrees it holds for
  the bounded graph only: the bounding is recomputed from the data, and removing one hub can
  re-select the edges of arbitrarily many other nodes (with ``D = 1``, removing a hub of
  in/out-degree 16,384 changes 8,157 rows and moves the matrix by 90.3 against ``2(D+1) = 4``;
  docs/gap.md). No top-``D`` edge selection avoids this (removing a
  node always admits the next-ranked edge at each neighbour), so this mode is not called
  "sound": the record lists the edges the bounding dropped under ``privacy["unaccounted"]``.
  The old name ``"sound"`` is refused with a message naming the new one.

*Privacy.* Unit node, relation add/remove among graphs of in/out-degree at most ``D``
(``privacy["relation_detail"]``). Events: ``PoissonSampledDpEvent(q, GaussianDpEvent(z))``
per executed encoder and classifier step, ``GaussianDpEvent(z)`` per hop (noise ``z Δ``
over sensitivity ``Δ``), all composed by one PLD accountant. Not covered, and listed under
``privacy["unaccounted"]``: the degree bounding of an input graph that exceeds ``D``; the
hop-0 embedding ``x̄⁽⁰⁾ = e_v``, which feeds node ``v``'s own prediction without noise (the
predictions of training nodes are not covered, only the model and the noisy aggregates);
the number of training nodes, which sets the sampling rate ``q``, the step counts and the
default ``δ``. ``secure_mode=True`` draws every noise sample from the OS CSPRNG (and the
sampling and bounding seeds from OS entropy), like the other trainers.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from gnnprivacy._estimator import EstimatorParams
from gnnprivacy._fixed_shapes import fixed_shapes
from gnnprivacy._validation import check_int, check_positive, check_real
from gnnprivacy.nn.gap import (GAP_MODES, _mlp, bound_degree, check_gap_mode, gap_event,  # noqa: F401
                               gap_sensitivity, true_sensitivity)
from gnnprivacy.training.node_dp.common import LogitsClassifier

__all__ = ["GAP_LEVELS", "GAP_MODES", "gap_sensitivity", "bound_degree", "noisy_aggregate",
           "gap_event", "gap_privacy_plan", "GAPTrainer", "default_delta_gap",
           "default_delta_gap_edge"]

#: ``level``: node-level GAP (DP-SGD encoder and classifier, bounded aggregation) or
#: edge-level GAP (only the aggregation touches edges; encoder and classifier are trained on
#: public features and labels)
GAP_LEVELS = ("node", "edge")


def default_delta_gap(num_train: int) -> float:
    """GAP's automatic δ: ``10^-len(str(N_train))``."""
    return 10.0 ** -len(str(int(num_train)))


def default_delta_gap_edge(num_edges: int) -> float:
    """Edge-level GAP's automatic δ: ``10^-len(str(|E|))`` (below ``1 / |E|``)."""
    return 10.0 ** -len(str(max(1, int(num_edges))))


@functools.lru_cache(maxsize=64)
def _calibrate_gap_edge(epsilon: float, delta: float, hops: int) -> float:
    """The noise multiplier of ``hops`` Gaussian releases at ``(epsilon, delta)``, unit edge."""
    from dp_accounting import dp_event as e

    from gnnprivacy.accounting import calibrate_noise_multiplier
    from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit

    return calibrate_noise_multiplier(lambda z: e.GaussianDpEvent(z), steps=hops,
                                      target_epsilon=epsilon, target_delta=delta,
                                      accountant="pld", unit=PrivacyUnit.EDGE,
                                      relation=NeighboringRelation.ADD_OR_REMOVE)


def noisy_aggregate(x: Tensor, edge_index: Tensor, *, hops: int, noise_std: float,
                    generator: torch.Generator | None,
                    secure_mode: bool = False) -> list[Tensor]:
    """``[x̄⁽⁰⁾, …, x̄⁽ᴷ⁾]``: row-normalised inputs and ``K`` noisy sum-aggregations (self
    included), each normalised (``noise_std = 0``: exact aggregation; ``secure_mode``: the
    noise from the OS CSPRNG, ``generator`` unused)."""
    from gnnprivacy.training.dp.audit_hooks import released
    from gnnprivacy.training.dp.noise import gaussian_noise

    n = x.size(0)
    src, dst = edge_index
    out = [F.normalize(x, dim=1)]
    for _ in range(check_int("hops", hops, low=0)):
        prev = out[-1]
        agg = prev.clone().index_add_(0, dst, prev[src])
        if noise_std > 0:
            agg = released("aggregation", agg + gaussian_noise(agg, noise_std,
                                                               generator=generator,
                                                               secure=secure_mode))
        out.append(F.normalize(agg, dim=1))
    assert all(t.size(0) == n for t in out)
    return out


@functools.lru_cache(maxsize=64)
def _calibrate_gap(epsilon: float, delta: float, sample_rate: float, encoder_steps: int,
                   classifier_steps: int, hops: int) -> float:
    from gnnprivacy.accounting import calibrate_noise_multiplier

    return calibrate_noise_multiplier(
        lambda z: gap_event(z, sample_rate=sample_rate, encoder_steps=encoder_steps,
                            classifier_steps=classifier_steps, hops=hops),
        steps=1, target_epsilon=epsilon, target_delta=delta, accountant="pld")


def gap_privacy_plan(params, *, num_train: int, num_nodes: int) -> dict:
    """Sample rate, steps, δ, sensitivities and the calibrated noise multiplier of GAP."""
    kw = params.trainer_kwargs() if hasattr(params, "trainer_kwargs") else dict(params)
    q = min(1.0, kw["batch_size"] / num_train)
    enc = math.ceil(kw["encoder_epochs"] / q)
    cls = math.ceil(kw["epochs"] / q)
    delta = kw["delta"] if kw.get("delta") is not None else default_delta_gap(num_train)
    z = kw.get("noise_multiplier") or _calibrate_gap(float(kw["epsilon"]), float(delta), q, enc,
                                                     cls, kw["hops"])
    return {"sample_rate": q, "encoder_steps": enc, "classifier_steps": cls, "hops": kw["hops"],
            "delta": delta, "noise_multiplier": z, "max_degree": kw["max_degree"],
            "aggregation_sensitivity": gap_sensitivity(kw["max_degree"], kw["accounting"]),
            "true_sensitivity": true_sensitivity(kw["max_degree"]),
            "accounting": kw["accounting"]}


def _node_batches(inputs: Tensor, y: Tensor, train: Tensor, batch_size: int):
    """The library's Poisson node sampler (`NodeSubgraphs`, DP-MLP's) over the rows of
    ``inputs`` listed in ``train``, at rate ``batch_size / len(train)`` (GAP's ``q``): each
    batch carries its node ids, so the code audit reads which nodes a step trained on."""
    from torch_geometric.data import Data

    from gnnprivacy.training.private.samplers import NodeSubgraphs

    mask = torch.zeros(inputs.shape[0], dtype=torch.bool)
    mask[train] = True
    sampler = NodeSubgraphs()
    sampler.setup(Data(x=inputs, y=y, edge_index=torch.zeros(2, 0, dtype=torch.long),
                       train_mask=mask))
    sampler.plan(batch_size=batch_size)
    return sampler


def _fixed_shape_batches(train: Tensor, q: float, device: torch.device):
    """Poisson batches of positions in ``train`` at rate ``q``, drawn on ``device``."""
    from gnnprivacy.sampling.fixed_shape import FixedShapeNodeBatches

    return FixedShapeNodeBatches(int(train.numel()), device=device, rate=q)


def _on_device(gens: dict, name: str, device: torch.device) -> torch.Generator | None:
    """A generator on ``device`` seeded from ``gens[name]`` (``None`` stays ``None``)."""
    from gnnprivacy.training.device import device_generator

    return device_generator(gens[name], device)


class GAPTrainer(LogitsClassifier, EstimatorParams):
    """Node-level GAP (estimator-like): ``fit(data)``, ``predict_logits(data)``, ``score``.

    Args:
        epsilon: target ε (> 0); delta: δ (default ``10^-len(str(N_train))``, GAP's).
        accounting: ``"bounded-graph"`` (Δ = 2(D+1), default; the guarantee covers the
            degree-bounded graph) or ``"paper"`` (Δ = √D).
        hops: aggregation hops ``K`` (2). max_degree: degree bound ``D`` (100, GAP's).
        encoder_epochs, epochs: DP-SGD epochs of encoder and classifier (steps ``⌈E/q⌉``).
        batch_size: expected batch (Poisson rate ``q = batch_size / N_train``; 256).
        clip_norm: per-node clip ``C`` (1.0). hidden: width (16). lr: Adam (0.01).
        noise_multiplier: fix ``z`` instead of calibrating it.
        generator: int seed, ``torch.Generator`` or ``None``.
        progress: optional ``progress(description, total)`` -> object with ``update(n)``,
            called for the encoder's and the classifier's DP-SGD steps.
        device: ``"cpu"`` or ``"cuda[:K]"``: where the two DP-SGD phases and the
            aggregation run (on a GPU the batches are drawn on the device in fixed-size
            buffers, `gnnprivacy.sampling.fixed_shape`); the fitted model is kept on
            the CPU.
        secure_mode: draw the DP-SGD and aggregation noise from the OS CSPRNG (no
            generator), and the Poisson-sampling and degree-bounding seeds from OS entropy;
            seeded noise (the default) is for reproducible research only.

    Attributes (after fit): ``epsilon_``, ``delta_``, ``noise_multiplier_``, ``steps_``,
    ``accountant_``, ``ledger_``, ``aggregates_`` (the ``K`` noisy aggregates of the fitted
    graph, ``[num_nodes, K * hidden]``; the hop-0 embeddings are recomputed from the
    features at prediction and never kept),
    ``privacy_info_``.
    """

    name = "gap"

    def __init__(self, *, epsilon: float = 8.0, delta: float | None = None,
                 accounting: str = "bounded-graph", hops: int = 2, max_degree: int = 100,
                 encoder_epochs: int = 100, epochs: int = 100, batch_size: int = 256,
                 clip_norm: float = 1.0, hidden: int = 16, lr: float = 0.01,
                 noise_multiplier: float | None = None,
                 generator: torch.Generator | int | None = None,
                 progress: Callable | None = None, secure_mode: bool = False,
                 device: str | torch.device = "cpu", level: str = "node"):
        from gnnprivacy._validation import check_choice
        from gnnprivacy.training.device import resolve_device

        resolve_device(device)              # a bad device fails here, before any work
        self.device = device
        self.level = check_choice("level", level, GAP_LEVELS)
        self.epsilon = check_positive("epsilon", epsilon)
        self.delta = None if delta is None else check_real("delta", delta, low=0.0, high=1.0,
                                                             low_open=True, high_open=True)
        self.accounting = check_gap_mode(accounting)
        self.hops = check_int("hops", hops, low=0)
        self.max_degree = check_int("max_degree", max_degree, low=1)
        self.encoder_epochs = check_int("encoder_epochs", encoder_epochs, low=1)
        self.epochs = check_int("epochs", epochs, low=1)
        self.batch_size = check_int("batch_size", batch_size, low=1)
        self.clip_norm = check_positive("clip_norm", clip_norm)
        self.hidden = check_int("hidden", hidden, low=1)
        self.lr = check_positive("lr", lr)
        self.noise_multiplier = (None if noise_multiplier is None
                                 else check_real("noise_multiplier", noise_multiplier, low=0.0))
        self.generator = generator
        self.progress = progress
        self.secure_mode = bool(secure_mode)

    def trainer_kwargs(self) -> dict:
        return {k: getattr(self, k) for k in (
            "epsilon", "delta", "accounting", "hops", "max_degree", "encoder_epochs", "epochs",
            "batch_size", "clip_norm", "hidden", "lr", "noise_multiplier", "secure_mode",
            "level")}

    # ------------------------------------------------------------------ fit
    def _dp_train(self, model: nn.Module, inputs: Tensor, y: Tensor, train: Tensor, q: float,
                  steps: int, gens: dict, phase: str) -> int:
        from gnnprivacy.training.dp import DPEngine, make_optimizer

        dev = self.device_
        fixed = _fixed_shape_batches(train, q, dev) if fixed_shapes(dev) else None
        noise = gens["noise"] if fixed is None else _on_device(gens, "noise", dev)
        engine = DPEngine(model, make_optimizer("adam", model.parameters(), lr=self.lr),
                          clip_norm=self.clip_norm, noise_multiplier=self.noise_multiplier_,
                          expected_batch_size=q * train.numel(), generator=noise,
                          secure_mode=self.secure_mode, accountant=self.accountant_,
                          step_event=self._step_event, sampling="poisson")
        bar = self.progress(f"gap {phase}", steps) if self.progress else None
        model.train()
        if fixed is not None:          # the GPU path: no host sync in a step
            sample, rows = _on_device(gens, "sample", dev), train.to(dev)
            inputs, y = inputs.to(dev), y.to(dev)
        batches = None if fixed is not None else _node_batches(
            inputs, y, train, min(self.batch_size, int(train.numel())))
        for _ in range(steps):
            if fixed is None:
                b = batches.sample(gens["sample"])
                engine.step(lambda b=b: F.cross_entropy(model(b.x), b.y, reduction="none"))
            else:
                index, valid = fixed.sample(sample)
                nodes, weight = rows[index], valid.to(inputs.dtype)
                engine.step(lambda nodes=nodes, weight=weight: F.cross_entropy(
                    model(inputs[nodes]), y[nodes], reduction="none") * weight)
            if bar is not None:
                bar.update(1)
        if fixed is not None:
            fixed.check()
        model.eval()
        return engine.steps_

    def fit(self, data) -> GAPTrainer:
        if self.level == "edge":
            return self._fit_edge(data)
        from dp_accounting import dp_event as e

        from gnnprivacy.accounting import make_accountant
        from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
        from gnnprivacy.random import as_torch_generator
        from gnnprivacy.training.device import resolve_device
        from gnnprivacy.training.nonprivate import num_classes_of, training_graph

        self.device_ = dev = resolve_device(self.device)
        gen = as_torch_generator(self.generator)
        seeds = torch.randint(0, 2**62, (5,), generator=gen).tolist()
        gens = {k: torch.Generator().manual_seed(int(s))
                for k, s in zip(("init", "sample", "noise", "edges", "agg"), seeds)}
        if self.secure_mode:   # only the (non-private) initialisation stays seeded
            from gnnprivacy.training.node_dp.base import os_entropy_generator

            gens.update(sample=os_entropy_generator(), edges=os_entropy_generator(),
                        noise=None, agg=None)
        graph = training_graph(data)
        train = graph.train_mask.nonzero().flatten()
        plan = gap_privacy_plan(self.trainer_kwargs(), num_train=int(train.numel()),
                                num_nodes=int(graph.num_nodes))
        self.noise_multiplier_ = float(plan["noise_multiplier"])
        self.delta_ = float(plan["delta"])
        self.plan_ = plan
        q = plan["sample_rate"]
        self._step_event = e.PoissonSampledDpEvent(q, e.GaussianDpEvent(self.noise_multiplier_))
        self.accountant_ = make_accountant("pld", unit=PrivacyUnit.NODE,
                                           relation=NeighboringRelation.ADD_OR_REMOVE)
        self.num_classes_ = num_classes_of(data)
        x, y = graph.x.float(), graph.y
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=gens["init"])))
            self.encoder_ = _mlp([x.size(1), self.hidden, self.hidden]).to(dev)
            head = nn.Linear(self.hidden, self.num_classes_).to(dev)
            enc_steps = self._dp_train(nn.Sequential(self.encoder_, nn.SELU(), head), x, y,
                                       train, q, plan["encoder_steps"], gens, "encoder")
            self.edge_index_ = bound_degree(graph.edge_index, graph.num_nodes, self.max_degree,
                                            generator=gens["edges"])
            self.agg_std_ = self.noise_multiplier_ * plan["aggregation_sensitivity"]
            self._agg_gen = gens["agg"]
            features = self._features(x.to(dev), self.edge_index_.to(dev))
            for _ in range(self.hops):
                self.accountant_.compose(e.GaussianDpEvent(self.noise_multiplier_))
            self.classifier_ = _mlp([self.hidden * (self.hops + 1), self.hidden,
                                     self.num_classes_]).to(dev)
            cls_steps = self._dp_train(self.classifier_, features, y, train, q,
                                       plan["classifier_steps"], gens, "classifier")
        if dev.type != "cpu":          # the fitted model lives on the CPU, like a loaded one
            self.encoder_, self.classifier_ = self.encoder_.cpu(), self.classifier_.cpu()
        # kept: the K noisy aggregates only (released, covered by epsilon_); the hop-0 block
        # (each node's own embedding, no noise) is recomputed from the features at prediction
        self.aggregates_ = features[:, self.hidden:].cpu()
        self.steps_ = enc_steps + self.hops + cls_steps
        self.epsilon_ = float(self.accountant_.get_epsilon(self.delta_))
        self.privacy_spent_ = (self.epsilon_, self.delta_)
        self.ledger_ = self.accountant_.to_dict(self.delta_)
        self.privacy_info_ = self._privacy_info(plan, enc_steps, cls_steps,
                                                dropped=int(graph.edge_index.size(1))
                                                - int(self.edge_index_.size(1)))
        self.info_ = {"num_train": int(train.numel()), "edges_kept": int(self.edge_index_.size(1))}
        return self

    def _privacy_info(self, plan: dict, enc_steps: int, cls_steps: int, *,
                      dropped: int) -> dict:
        """The record's privacy facts: what the epsilon covers and every data access it
        does not (``unaccounted``)."""
        from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit

        d = self.max_degree
        unaccounted = [
            f"degree bounding: the guarantee is for graphs of in/out-degree <= D = {d}; "
            + (f"this input exceeded D and the bounding dropped {dropped} edges, so the "
               "epsilon covers the bounded graph, not the input (removing a node re-selects "
               "other nodes' edges)" if dropped else
               "this input was within D (the bounding dropped no edge); a neighbouring "
               "graph that exceeds D is not covered"),
            "hop-0 embedding: each node's own encoded features feed its own prediction "
            "without noise (predictions of training nodes are not covered)",
            "the number of training nodes (assumed public) sets the sampling rate q, the "
            "encoder and classifier step counts and the default delta",
        ]
        if self.accounting == "paper":
            unaccounted.append("paper-mode aggregation sensitivity sqrt(D) omits the node's "
                               "own aggregate (Xiang et al., IEEE S&P 2024, §5.3)")
        return {
            "unit": PrivacyUnit.NODE.value, "relation": NeighboringRelation.ADD_OR_REMOVE.value,
            "relation_detail": f"add or remove one node (features, label, edges) among graphs "
                               f"whose in- and out-degrees are at most D = {d}",
            "scope": ("the encoder and classifier parameters and the K noisy aggregates of one "
                      "GAP training run, for one node of the degree-bounded graph"),
            "accountant": "pld", "accounting_mode": self.accounting,
            "noise_multiplier": self.noise_multiplier_, "aggregation_noise_std": self.agg_std_,
            "aggregation_sensitivity": plan["aggregation_sensitivity"],
            "max_degree": d, "hops": self.hops, "sample_rate": plan["sample_rate"],
            "encoder_steps": enc_steps, "classifier_steps": cls_steps,
            "clip_norm": self.clip_norm, "secure_mode": self.secure_mode,
            "edges_dropped_by_bounding": dropped, "unaccounted": unaccounted,
            "calibrated": self.noise_multiplier is None}

    # ------------------------------------------------------------------ edge level
    def _plain_train(self, model: nn.Module, inputs: Tensor, y: Tensor, train: Tensor,
                     epochs: int, gen: torch.Generator, phase: str) -> int:
        """Non-private minibatch Adam on the training nodes (edge level: features and labels
        are public, and ``inputs`` reads edges only through released aggregates)."""
        opt = torch.optim.Adam(model.parameters(), lr=self.lr)
        size = min(self.batch_size, int(train.numel()))
        per_epoch = max(1, math.ceil(train.numel() / size))
        bar = self.progress(f"gap-edge {phase}", epochs * per_epoch) if self.progress else None
        model.train()
        steps = 0
        for _ in range(epochs):
            order = train[torch.randperm(train.numel(), generator=gen)]
            for k in range(per_epoch):
                nodes = order[k * size:(k + 1) * size]
                opt.zero_grad()
                F.cross_entropy(model(inputs[nodes]), y[nodes]).backward()
                opt.step()
                steps += 1
                if bar is not None:
                    bar.update(1)
        model.eval()
        return steps

    def _fit_edge(self, data) -> GAPTrainer:
        """Edge-level GAP: the encoder and the classifier train on public features and
        labels; the ``K`` aggregation hops are the only releases that read edges, each a
        Gaussian mechanism of sensitivity ``sqrt(2)`` (undirected edge: two unit rows move by
        at most 1 each) or 1 (directed), with no degree bound."""
        from dp_accounting import dp_event as e

        from gnnprivacy.accounting import make_accountant
        from gnnprivacy.accounting.events import ScopedDpEvent
        from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
        from gnnprivacy.random import as_torch_generator
        from gnnprivacy.sampling._graph import clean_graph
        from gnnprivacy.training.device import resolve_device
        from gnnprivacy.training.nonprivate import num_classes_of, training_graph
        from gnnprivacy.training.private.edge_sampler import is_undirected

        self.device_ = resolve_device(self.device)
        gen = as_torch_generator(self.generator)
        seeds = torch.randint(0, 2**62, (3,), generator=gen).tolist()
        gens = {k: torch.Generator().manual_seed(int(s))
                for k, s in zip(("init", "order", "agg"), seeds)}
        if self.secure_mode:
            gens["agg"] = None
        graph = training_graph(data)
        train = graph.train_mask.nonzero().flatten()
        n = int(graph.num_nodes)
        clean = clean_graph(graph.edge_index, n, where="GAPTrainer")
        undirected = is_undirected(clean.src, clean.dst, n)
        units = (int(clean.src.numel()) // 2 if undirected else int(clean.src.numel()))
        self.delta_ = (float(self.delta) if self.delta is not None
                       else default_delta_gap_edge(units))
        sensitivity = math.sqrt(2.0) if undirected else 1.0
        self.noise_multiplier_ = float(
            self.noise_multiplier if self.noise_multiplier is not None
            else _calibrate_gap_edge(float(self.epsilon), self.delta_, self.hops)
            if self.hops else 0.0)
        self.agg_std_ = self.noise_multiplier_ * sensitivity
        self.accountant_ = make_accountant("pld", unit=PrivacyUnit.EDGE,
                                           relation=NeighboringRelation.ADD_OR_REMOVE)
        self.num_classes_ = num_classes_of(data)
        x, y = graph.x.float(), graph.y
        self.edge_index_ = torch.stack([clean.src, clean.dst])
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=gens["init"])))
            self.encoder_ = _mlp([x.size(1), self.hidden, self.hidden])
            head = nn.Linear(self.hidden, self.num_classes_)
            enc_steps = self._plain_train(nn.Sequential(self.encoder_, nn.SELU(), head), x, y,
                                          train, self.encoder_epochs, gens["order"], "encoder")
            self._agg_gen = gens["agg"]
            features = self._features(x, self.edge_index_)
            for _ in range(self.hops):
                self.accountant_.compose(ScopedDpEvent(e.GaussianDpEvent(self.noise_multiplier_),
                                                       PrivacyUnit.EDGE,
                                                       NeighboringRelation.ADD_OR_REMOVE))
            self.classifier_ = _mlp([self.hidden * (self.hops + 1), self.hidden,
                                     self.num_classes_])
            cls_steps = self._plain_train(self.classifier_, features, y, train, self.epochs,
                                          gens["order"], "classifier")
        self.aggregates_ = features[:, self.hidden:].cpu()
        self.steps_ = self.hops
        self.epsilon_ = (float(self.accountant_.get_epsilon(self.delta_)) if self.hops
                         else 0.0)
        self.privacy_spent_ = (self.epsilon_, self.delta_)
        self.ledger_ = self.accountant_.to_dict(self.delta_)
        self.plan_ = {"hops": self.hops, "delta": self.delta_,
                      "noise_multiplier": self.noise_multiplier_,
                      "aggregation_sensitivity": sensitivity}
        self.privacy_info_ = {
            "unit": PrivacyUnit.EDGE.value,
            "relation": NeighboringRelation.ADD_OR_REMOVE.value,
            "relation_detail": ("add or remove one undirected edge {u, v} (both entries)"
                                if undirected else "add or remove one directed edge u -> v"),
            "scope": ("the K noisy aggregates of one edge-level GAP run, and everything "
                      "computed from them and the public features and labels: the classifier "
                      "and every prediction on the fitted graph"),
            "accountant": "pld", "level": "edge", "noise_multiplier": self.noise_multiplier_,
            "aggregation_noise_std": self.agg_std_, "aggregation_sensitivity": sensitivity,
            "hops": self.hops, "encoder_steps": enc_steps, "classifier_steps": cls_steps,
            "secure_mode": self.secure_mode, "calibrated": self.noise_multiplier is None,
            "num_unit_edges": units,
            "unaccounted": [
                "node features, labels and the node set are public under the edge unit: the "
                "encoder and the classifier train on them without noise",
                "predictions on another graph recompute the aggregation with fresh noise, a "
                "release outside this epsilon"]}
        self.info_ = {"num_train": int(train.numel()), "edges_kept": int(clean.src.numel())}
        return self

    def _hop0(self, x: Tensor) -> Tensor:
        """``x̄⁽⁰⁾``: the row-normalised embeddings of ``x`` by the released encoder (the
        first block of `noisy_aggregate`, which adds no noise to it)."""
        with torch.no_grad():
            return F.normalize(self.encoder_(x), dim=1)

    def _features(self, x: Tensor, edge_index: Tensor) -> Tensor:
        with torch.no_grad():
            emb = self.encoder_(x)
            hops = noisy_aggregate(emb, edge_index, hops=self.hops, noise_std=self.agg_std_,
                                   generator=self._agg_gen, secure_mode=self.secure_mode)
        return torch.cat(hops, dim=1)

    # ------------------------------------------------------------------ predict
    def predict_logits(self, data) -> Tensor:
        """Logits of every node. On the fitted graph: from the released noisy aggregates.
        On another graph (e.g. an audit query), the aggregation is recomputed with fresh
        noise of the same std — an extra release that ``epsilon_`` does not cover.

        The hop-0 block (each node's own embedding, without noise) is computed here from
        ``data.x`` by the encoder: the fitted trainer, and a saved model, keep only the noisy
        aggregates (``aggregates_``), so they hold no node's un-noised features."""
        if not hasattr(self, "classifier_"):
            raise RuntimeError("GAPTrainer is not fitted; call fit(data) first")
        x = data.x.float()
        if int(data.num_nodes) == self.aggregates_.size(0):
            feats = torch.cat([self._hop0(x), self.aggregates_.to(x.dtype)], dim=1)
        else:
            from gnnprivacy.training.nonprivate import training_graph

            graph = training_graph(data)
            edges = bound_degree(graph.edge_index, graph.num_nodes, self.max_degree,
                                 generator=torch.Generator().manual_seed(0))
            feats = self._features(x, edges)
        with torch.no_grad():
            return self.classifier_(feats)

    def privacy_record(self) -> dict:
        return dict(self.privacy_info_)

    def __repr__(self) -> str:
        return (f"GAPTrainer(epsilon={self.epsilon:g}, accounting={self.accounting!r}, "
                f"hops={self.hops}, max_degree={self.max_degree}, batch_size={self.batch_size})")
