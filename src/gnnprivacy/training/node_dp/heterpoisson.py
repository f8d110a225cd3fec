"""HeterPoisson node-level DP training of one-layer star GNNs (GCN, GIN, SAGE).

Reference: Z. Xiang, T. Wang, D. Wang, *Preserving Node-level Privacy in Graph Neural
Networks*, IEEE S&P 2024, Algorithm 1 (spec 000 §3.3) with Algorithms 2-3 (sampling) and
private inference (§3.5). For ``t = 1..T``:

```
batch  ← HeterPoisson(G, Cand = V_tr, Elig, q_b, M)           (star subgraphs)
ḡ      ← Σ_i clip_R(∇ ℓ(f_w(S_i)[centre], y_centre))           (R = 0.5)
w      ← Adam(w, (ḡ + N(0, σ² I)) / B_exp),  B_exp = q_b |V_tr|
```

Defaults follow spec 000 §3.0/§6.2: ``q_b = 4096 / |V|``, ``T = ⌈9 / q_b⌉``, ``R = 0.5``,
Adam with lr 0.01, hidden width 128, ``N_test = 13``, ``δ = |V|^{-1.1}``; ``σ`` is the
smallest noise whose epsilon after ``T`` steps does not exceed the target (one-sided
calibration by the accountant).

Privacy:
    Unit: node (features, label and all edges of one training node). Relation: add/remove
    of one training node inside a fixed whole graph whose degree sequence is public
    (spec 000 §2.3). Event: one HeterPoisson mixture-of-Gaussians event per executed step
    (spec 000 Theorem 2), worst case over out-degrees up to ``|V| − 1`` unless
    ``degree_public`` (then up to the largest out-degree of a training node). Accounting
    ``"sound"`` (default): PLD of the mixture, max over degrees after composition
    (spec 000 §4.7); ``"paper"``: Theorem 2's RDP as printed. Inference reads only the
    released model and non-training nodes (post-processing, no cost), with one keyed random
    stream per query node (`private_inference`), so no training edge reaches a test
    prediction.

    Scope assumption, recorded in ``privacy["unaccounted"]``: peripheral sampling
    probabilities are computed from whole-graph out-degrees, so the guarantee holds only if
    the degree sequence is public; removing a node together with its edges changes other
    nodes' degrees and hence their sampling probabilities, which the accountant does not
    cover.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import torch
from torch import Tensor
from torch.nn import functional as F
from torch_geometric.data import Data

from gnnprivacy._fixed_shapes import fixed_shapes
from gnnprivacy._validation import (check_choice, check_int, check_positive, check_real,
                                    check_delta_range, check_target_epsilon)
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.nn.star import AGGREGATORS, StarGNN
from gnnprivacy.sampling import HeterPoissonSampler
from gnnprivacy.sampling.counter_rng import CounterRandom, counter_seed
from gnnprivacy.sampling.fixed_shape import FixedShapeHeterPoisson
from gnnprivacy.sampling.star_batch import StarBatch
from gnnprivacy.training.dp import DPEngine, make_optimizer
from gnnprivacy.training import _privacy
from gnnprivacy.training.node_dp.base import NodeDPTrainer
from gnnprivacy.training.node_dp.common import FeatureNorm, is_inductive, node_metrics
from gnnprivacy.training.node_dp.private_inference import private_star_logits
from gnnprivacy.training.nonprivate import num_classes_of, training_graph

__all__ = ["HeterPoissonTrainer", "counter_seed", "default_delta_heterpoisson"]

PERIPHERAL_POOLS = ("all_visible", "train_only")
SAMPLING_STREAMS = ("generator", "counter")


def default_delta_heterpoisson(num_nodes: int) -> float:
    """``δ = |V|^{-1.1}`` (spec 000 §3.0)."""
    return float(num_nodes) ** -1.1


class HeterPoissonTrainer(NodeDPTrainer):
    """Node-level DP star-GNN trained with HeterPoisson sampling (estimator-like).

    *Privacy*: unit node (features, label and edges of one training node), relation
    add/remove inside a fixed graph whose degree sequence is public. One HeterPoisson
    mixture-of-Gaussians event (`HeterPoissonDpEvent`) per executed step, composed by a PLD
    accountant (Theorem 2's RDP with ``accounting="paper"``); ``epsilon_`` is computed from
    the steps that ran. Private inference of non-training nodes is post-processing; what is
    not covered is listed in ``privacy_record()["unaccounted"]``.

    Args:
        backbone: ``"gcn"``, ``"gin"`` or ``"sage"``.
        epsilon: target epsilon (> 0).
        delta: target delta in (0, 1); ``None`` means ``|V|^{-1.1}`` of the data's graph.
        accounting: ``"sound"`` (PLD, default) or ``"paper"`` (Theorem 2's RDP).
        q_b: central sampling rate in (0, 1]; ``None`` means ``min(1, 4096 / |V|)``.
        M: neighbour multiplier (>= 1).
        epochs: ``E`` in ``T = ⌈E / q_b⌉`` (default 9).
        steps: explicit ``T`` (overrides ``epochs``).
        clip_norm: per-subgraph clip bound ``R`` (0.5).
        lr: Adam learning rate (0.01).
        hidden_channels: width of the star model.
        update_layers: depth of the update MLP ``φ``.
        fanout: ``N_test``, neighbours per test node at inference (13).
        enforce_no_overlap: remove central nodes from other subgraphs (Alg. 2 lines 14-23).
        peripheral_pool: ``"all_visible"`` (transductive: non-training nodes may be
            peripherals, spec 000 §9 A10) or ``"train_only"``.
        degree_public: maximise the accountant over the graph's real largest out-degree of
            a training node instead of ``|V| − 1`` (sound only if degrees are public, A2).
        feature_norm: see `FeatureNorm`.
        noise_multiplier: fix ``σ / R`` instead of calibrating it (epsilon is then computed).
        generator: ``torch.Generator``, int seed, or ``None`` (OS entropy). Seeded noise
            is for reproducible research only: the seed regenerates every noise draw.
        progress: optional ``progress(description, total)`` -> object with ``update(n)``.
        secure_mode: draw the noise and the sampling seeds from the OS CSPRNG (use it for
            any model that will be released).
        device: ``"cpu"`` or ``"cuda[:K]"`` (refused clearly when unavailable).
        checkpoint_path: file of the atomic checkpoint for kill-and-resume (``None``: off).
        checkpoint_every: steps between checkpoints.
        resume: continue from ``checkpoint_path`` when it holds a checkpoint of this run.
        sampling_stream: ``"generator"`` (default: the batch drawn from the sampling
            generator, O(batch)) or ``"counter"`` (every trial keyed by ``(seed, step, node
            ids)`` with a `CounterRandom` whose seed is one draw of the sampling generator:
            O(candidates) per step, and the same sample whichever process draws which node's
            trials, as `gnnprivacy.training.sharded` needs; not on the fixed-shape GPU path).

    Attributes (after `fit`):
        model_, noise_multiplier_, noise_std_, steps_, q_b_, expected_batch_size_, epsilon_,
        delta_, privacy_spent_ (``(epsilon, delta)``), ledger_ (accountant ``to_dict()``),
        accountant_, feature_norm_, privacy_info_, info_, train_mask_ (the run's training
        nodes: private inference never aggregates them, whatever split a later graph carries;
        a saved model keeps them).

    Example:
        >>> from gnnprivacy.datasets import load_dataset
        >>> data = load_dataset("csbm", num_nodes=400, seed=0)     # a PyG Data with masks
        >>> from gnnprivacy.training.node_dp import HeterPoissonTrainer
        >>> trainer = HeterPoissonTrainer("gcn", epsilon=4.0, steps=20, generator=0).fit(data)
        >>> trainer.epsilon_ <= 4.0, trainer.steps_, trainer.privacy_record()["unit"]
        (True, 20, 'node')
        >>> trainer.predict_logits(data).shape       # the test nodes, by private inference
        torch.Size([100, 4])
    """

    name = "heterpoisson"

    def __init__(self, backbone: str = "gcn", *, epsilon: float = 8.0, delta: float | None = None,
                 accounting: str = "sound", q_b: float | None = None, M: float = 1.0,
                 epochs: float = 9.0, steps: int | None = None, clip_norm: float = 0.5,
                 lr: float = 0.01, hidden_channels: int = 128, update_layers: int = 1,
                 fanout: int = 13, enforce_no_overlap: bool = True,
                 peripheral_pool: str = "all_visible", degree_public: bool = False,
                 feature_norm: str = "auto", noise_multiplier: float | None = None,
                 generator: torch.Generator | int | None = None,
                 progress: Callable[[str, int], object] | None = None,
                 allow_large_delta: bool = False,
                 secure_mode: bool = False, device: str | torch.device = "cpu",
                 checkpoint_path: str | None = None, checkpoint_every: int = 100,
                 resume: bool = False, sampling_stream: str = "generator"):
        self._set_runtime(secure_mode=secure_mode, device=device,
                          checkpoint_path=checkpoint_path, checkpoint_every=checkpoint_every,
                          resume=resume)
        self.backbone = check_choice("backbone", backbone, AGGREGATORS)
        self.epsilon = check_target_epsilon("epsilon", epsilon)
        self.delta = None if delta is None else check_delta_range("delta", delta)
        self.accounting = check_choice("accounting", accounting, _privacy.HETERPOISSON_MODES)
        self.q_b = None if q_b is None else check_real("q_b", q_b, low=0.0, high=1.0,
                                                       low_open=True)
        self.M = check_real("M", M, low=1.0)
        if math.isinf(self.M):
            raise InvalidParameterError("M", "a finite real >= 1", M)
        self.epochs = check_positive("epochs", epochs)
        self.steps = None if steps is None else check_int("steps", steps, low=1)
        self.clip_norm = check_positive("clip_norm", clip_norm)
        self.lr = check_positive("lr", lr)
        self.hidden_channels = check_int("hidden_channels", hidden_channels, low=1)
        self.update_layers = check_int("update_layers", update_layers, low=1)
        self.fanout = check_int("fanout", fanout, low=0)
        self.enforce_no_overlap = bool(enforce_no_overlap)
        self.peripheral_pool = check_choice("peripheral_pool", peripheral_pool, PERIPHERAL_POOLS)
        self.degree_public = bool(degree_public)
        self.feature_norm = FeatureNorm(feature_norm).requested
        self.noise_multiplier = (None if noise_multiplier is None
                                 else check_real("noise_multiplier", noise_multiplier, low=0.0))
        self.generator = generator
        self.progress = progress
        self.allow_large_delta = bool(allow_large_delta)
        self.sampling_stream = check_choice("sampling_stream", sampling_stream, SAMPLING_STREAMS)

    # ------------------------------------------------------------------ fit
    def _sampler(self, graph: Data, inductive: bool) -> HeterPoissonSampler:
        cand = graph.train_mask
        if inductive or self.peripheral_pool == "train_only":
            elig = cand
        else:
            elig = torch.ones(graph.num_nodes, dtype=torch.bool)
        return HeterPoissonSampler(graph.edge_index, graph.num_nodes, candidates=cand,
                                   eligible=elig, q_b=self.q_b_, M=self.M,
                                   enforce_no_overlap=self.enforce_no_overlap)

    def _plan(self, *, num_nodes: int, num_train: int) -> float:
        """Fix ``q_b_`` and ``steps_planned_`` and check the plan; returns ``delta``."""
        delta = self.delta if self.delta is not None else default_delta_heterpoisson(num_nodes)
        self.q_b_ = self.q_b if self.q_b is not None else min(1.0, 4096.0 / num_nodes)
        self.steps_planned_ = self.steps or math.ceil(self.epochs / self.q_b_)
        _privacy.check_plan(delta=delta, num_units=num_train,
                            steps=self.steps_planned_, explicit_steps=self.steps is not None,
                            allow_large_delta=self.allow_large_delta,
                            how=f"T = ceil(epochs / q_b) with q_b = {self.q_b_:g}",
                            sample_rate=self.q_b_)
        return delta

    def _calibrate(self, delta: float, d_max: int):
        """Fix ``noise_multiplier_`` for events maximised over out-degrees up to ``d_max``;
        returns ``(accountant kind, event)``."""
        make_event = _privacy.heterpoisson_event_factory(
            q_b=self.q_b_, M=self.M, max_out_degree=d_max,
            overlap_removal=self.enforce_no_overlap, mode=self.accounting)
        kind = _privacy.heterpoisson_accountant_kind(self.accounting)
        calibrated = self.noise_multiplier is None
        # the calibration rests on the largest out-degree; the full epsilon over every
        # covering degree is computed in the background while training runs, and fit()
        # trains again with a fully checked noise if it exceeds the target
        self._deferred_check_ = calibrated and kind == "pld" and not self._strict_calibration
        self.noise_multiplier_ = (self.noise_multiplier if not calibrated
                                  else _privacy.calibrate(make_event, steps=self.steps_planned_,
                                                          epsilon=self.epsilon, delta=delta,
                                                          kind=kind,
                                                          full_check=not self._deferred_check_))
        event = make_event(self.noise_multiplier_)
        if self._deferred_check_:
            _privacy.prefetch_final_epsilon(kind, PrivacyUnit.NODE,
                                            NeighboringRelation.ADD_OR_REMOVE, event=event,
                                            steps=self.steps_planned_, delta=delta,
                                            epsilon=self.epsilon)
        return kind, event

    def _start_step(self) -> int:
        """The step a run starts at: 0, or the checkpoint's step when resuming."""
        state = getattr(self, "_resume_state", None)
        return 0 if state is None else int(state["step"])

    def _fit(self, data: Data, gens: dict[str, torch.Generator]) -> None:
        inductive = is_inductive(data)
        graph = training_graph(data)
        delta = self._plan(num_nodes=int(data.num_nodes), num_train=int(graph.train_mask.sum()))
        sampler = self._sampler(graph, inductive)
        d_max = sampler.max_out_degree if self.degree_public else graph.num_nodes - 1
        kind, event = self._calibrate(delta, d_max)
        public = None if inductive else ~graph.train_mask
        # the run's training nodes: private inference never aggregates them, whatever split
        # the graph it is later given carries (a saved model keeps them)
        self.train_mask_ = data.train_mask.detach().to("cpu", torch.bool).clone()
        self.feature_norm_ = FeatureNorm(self.feature_norm).fit(graph.x, public)
        dev = self.device_
        x = self.feature_norm_.transform(graph.x).to(dev)
        self.num_classes_ = num_classes_of(data)
        self.model_ = StarGNN(x.shape[1], self.num_classes_, aggregator=self.backbone,
                              hidden_channels=self.hidden_channels,
                              update_layers=self.update_layers).to(dev)
        self.accountant_ = _privacy.new_accountant(kind, PrivacyUnit.NODE,
                                                   NeighboringRelation.ADD_OR_REMOVE,
                                                   epsilon=self.epsilon,
                                                   steps=self.steps_planned_)
        self.expected_batch_size_ = self.q_b_ * int(graph.train_mask.sum())
        gen, noise = self._step_generators(gens)
        engine = DPEngine(self.model_, make_optimizer("adam", self.model_.parameters(), lr=self.lr),
                          clip_norm=self.clip_norm, noise_multiplier=self.noise_multiplier_,
                          expected_batch_size=self.expected_batch_size_, generator=noise,
                          secure_mode=self.secure_mode, accountant=self.accountant_,
                          step_event=event, sampling="heterpoisson")
        y, model = graph.y.to(dev), self.model_
        counter = self.sampling_stream == "counter"
        stars = FixedShapeHeterPoisson(sampler, dev) if fixed_shapes(dev) and not counter \
            else None
        if counter:
            seed, step = counter_seed(gen), self._start_step()

        def closure_for_step():
            nonlocal step
            if counter:                   # trials keyed by (seed, step, node ids)
                batch = sampler.sample(CounterRandom(seed, step))
                step += 1
            elif stars is not None:         # drawn on the device, padded: no host sync
                batch = stars.sample(gen)
                weight = batch.center_mask.to(x.dtype)
                return lambda: F.cross_entropy(model(x, batch), y[batch.centers],
                                               reduction="none") * weight
            else:
                batch = sampler.sample(gen)
            if dev.type != "cpu":
                batch = StarBatch(batch.centers.to(dev), batch.periph_nodes.to(dev),
                                  batch.periph_subgraph.to(dev), batch.num_subgraphs)
            return lambda: F.cross_entropy(model(x, batch), y[batch.centers], reduction="none")

        self._run(engine, self.steps_planned_, closure_for_step)
        if stars is not None:
            stars.check()
        self._finish(engine, delta)
        self.privacy_info_ = self._privacy_info(kind, d_max)
        self.info_ = {"setting": "inductive" if inductive else "transductive",
                      "max_out_degree_accounted": d_max, "event": repr(event),
                      "num_train": int(graph.train_mask.sum()), "num_nodes": graph.num_nodes}

    def _privacy_info(self, kind: str, d_max: int) -> dict:
        return {
            "unit": PrivacyUnit.NODE.value, "relation": NeighboringRelation.ADD_OR_REMOVE.value,
            "accountant": kind, "accounting_mode": self.accounting,
            "noise_multiplier": self.noise_multiplier_, "noise_std": self.noise_std_,
            "clip_norm": self.clip_norm, "q_b": self.q_b_, "M": self.M, "steps": self.steps_,
            "max_out_degree_accounted": d_max, "enforce_no_overlap": self.enforce_no_overlap,
            "feature_norm": self.feature_norm_.mode, "secure_mode": self.secure_mode,
            "scope": ("the trained model's parameters: every executed noisy step, for one "
                      "training node added or removed with its features, label and edges, "
                      "inside a fixed graph whose degree sequence is public; private "
                      "inference of non-training nodes is post-processing"),
            "assumptions": ["degree sequence public: peripheral sampling probabilities use "
                            "whole-graph out-degrees"],
            "unaccounted": (["degree sequence (assumed public): peripheral sampling "
                             "probabilities are computed from whole-graph out-degrees, so "
                             "removing a node also changes its neighbours' sampling "
                             "probabilities"]
                            + (["feature standardisation over private nodes"]
                               if self.feature_norm_.unaccounted else [])
                            + ["the saved model file lists the run's training nodes "
                               "(train_mask_) so that private inference leaves them out: "
                               "which nodes trained the model is in that file, not covered "
                               "by the epsilon"]),
            "calibrated": self.noise_multiplier is None}

    # ------------------------------------------------------------------ predict
    def predict_logits(self, data: Data, nodes: Tensor | None = None, *,
                       generator: torch.Generator | int | None = 0,
                       chunk_size: int = 65536) -> Tensor:
        """Private inference (spec 000 §4.4): each query node aggregates up to ``fanout``
        uniformly sampled neighbours among the non-training nodes only, with one
        independent keyed random stream per query node
        (`private_star_logits`).

        Args:
            data: the full graph with its split masks.
            nodes: query node ids or mask (default: the test nodes).
            generator: key of the neighbour sampling: an int seed (default 0), or a
                ``torch.Generator`` (one 62-bit key is drawn from it), or ``None`` (OS
                entropy).
            chunk_size: queries evaluated at once (bounds the working set).

        Returns:
            logits ``(len(nodes), C)``, in the order of ``nodes``.
        """
        self._check_fitted()
        n = int(data.num_nodes)
        nodes = data.test_mask if nodes is None else nodes
        train = self._training_nodes(data)
        allowed = (data.test_mask & ~train) if is_inductive(data) else ~train
        if isinstance(generator, torch.Generator):
            seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        elif generator is None:
            seed = int.from_bytes(os.urandom(8), "little") >> 2
        else:
            seed = int(generator)
        self.model_.eval()
        return private_star_logits(self.model_, data.x, data.edge_index, queries=nodes,
                                   allowed=allowed[:n], forbidden=train,
                                   fanout=self.fanout, seed=seed,
                                   transform=self.feature_norm_.transform,
                                   device=self.device_, chunk_size=chunk_size)

    def _training_nodes(self, data: Data) -> Tensor:
        """The nodes private inference must not aggregate: the run's training nodes (kept at
        fit, and in a saved model) when ``data`` is a graph of the run's size, with a warning
        when its ``train_mask`` says otherwise; ``data.train_mask`` for another graph (none of
        the run's nodes is in it) or a model saved before the run's set was kept."""
        given = data.train_mask.to("cpu", torch.bool)
        run = getattr(self, "train_mask_", None)
        if run is None or run.numel() != given.numel():
            return given
        if bool(given.any()) and not torch.equal(run, given):
            import warnings

            warnings.warn(
                f"data.train_mask differs from the run's training set on "
                f"{int((run != given).sum())} of {run.numel()} node(s): private inference "
                f"excludes the run's {int(run.sum())} training nodes (the model keeps them), "
                "not the graph's", UserWarning, stacklevel=3)
        return run

    def predict(self, data: Data, nodes: Tensor | None = None) -> Tensor:
        """Predicted labels of ``nodes`` (default: the test nodes) by private inference."""
        return self.predict_logits(data, nodes).argmax(1)

    def score(self, data: Data) -> dict[str, float]:
        """Test (and validation) metrics from private inference of those nodes only."""
        query = data.test_mask.clone()
        val = getattr(data, "val_mask", None)
        if val is not None:
            query |= val
        ids = query.nonzero().flatten()
        logits = torch.zeros(int(data.num_nodes), self.num_classes_)
        if ids.numel():
            logits[ids] = self.predict_logits(data, ids)
        return node_metrics(logits, data.y, data, self.num_classes_)

    def __repr__(self) -> str:
        return (f"HeterPoissonTrainer(backbone={self.backbone!r}, epsilon={self.epsilon:g}, "
                f"delta={self.delta}, accounting={self.accounting!r}, M={self.M:g}, "
                f"q_b={self.q_b}, clip_norm={self.clip_norm:g})")
