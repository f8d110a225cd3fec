"""DP-MLP ("naive DP-SGD"): DP-SGD/DP-Adam on node features only, no graph.

References: spec 000 §3.9 (naive DP-SGD baseline: MLP ``F-32-32-32-C`` with ReLU, clip 1,
expected batch 2048, 5 epochs, Adam 1e-3, Poisson sampling) and spec 002 §3.8 (DP-MLP).
Every node is one example; for ``t = 1..T``:

```
B_t ← Poisson(V_tr, q),  q = m / |V_tr|
g̃  ← Σ_{v∈B_t} clip_C(∇ ℓ_v) + N(0, σ² I),  σ = noise_multiplier · C
w  ← Adam(w, g̃ / (q |V_tr|))
```

Privacy:
    Unit: node (each node influences only its own loss term since the graph is unused).
    Relation: add/remove. Event: one Poisson-subsampled Gaussian event per executed step
    (Mironov et al. 2019), PLD accountant; the noise multiplier is calibrated so that the
    epsilon after ``T`` steps does not exceed the target.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch_geometric.data import Data

from gnnprivacy._fixed_shapes import fixed_shapes
from gnnprivacy._validation import (check_choice, check_int, check_positive, check_real,
                                    check_delta_range, check_target_epsilon)
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.sampling.fixed_shape import FixedShapeNodeBatches
from gnnprivacy.training.dp import DPEngine, make_optimizer
from gnnprivacy.training import _privacy
from gnnprivacy.training.node_dp.base import NodeDPTrainer
from gnnprivacy.training.node_dp.common import FeatureNorm, LogitsClassifier, is_inductive
from gnnprivacy.training.nonprivate import num_classes_of, training_graph

__all__ = ["DPMLPTrainer", "default_delta_dpmlp", "mlp"]

_ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU}


def default_delta_dpmlp(num_train: int) -> float:
    """``δ = 1 / (10 N)`` with ``N = |V_tr|`` (spec 002 §3.0, also used for DP-MLP)."""
    return 1.0 / (10.0 * num_train)


def mlp(in_channels: int, hidden_channels: int, out_channels: int, num_layers: int,
        activation: str) -> nn.Sequential:
    """``num_layers`` affine layers with ``activation`` between them (no norm, no dropout)."""
    dims = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
    layers: list[nn.Module] = []
    for k, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        layers.append(nn.Linear(a, b))
        if k < num_layers - 1:
            layers.append(_ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


class DPMLPTrainer(LogitsClassifier, NodeDPTrainer):
    """Naive node-level DP-SGD on features (estimator-like).

    *Privacy*: unit node (features and label; the graph is not used), relation add/remove.
    One Poisson-subsampled Gaussian event per executed step (DP-SGD), composed by a PLD
    accountant.

    Args:
        epsilon: target epsilon (> 0).
        delta: target delta in (0, 1); ``None`` means ``1 / (10 |V_tr|)``.
        batch_size: expected batch ``m`` (Poisson rate ``min(1, m / |V_tr|)``), 2048.
        epochs: ``T = ⌈epochs / q⌉`` steps (5).
        steps: explicit ``T``.
        optimizer: ``"adam"`` or ``"sgd"``.
        lr: learning rate (1e-3).
        clip_norm: per-node clip bound ``C`` (1.0).
        hidden_channels: width of the MLP (32).
        num_layers: affine layers (4).
        activation: activation between layers (ReLU).
        feature_norm: see `FeatureNorm`.
        noise_multiplier: fix ``σ / C`` instead of calibrating it.
        generator: seeds sampling, initialisation and noise (``torch.Generator``, int or
            ``None`` for OS entropy); seeded noise is for reproducible research only.
        progress: ``progress(description, total)`` factory or ``None``; one update per step.
        secure_mode: noise from the OS CSPRNG instead of ``generator``.
        device: where the model trains (``"cpu"``, ``"cuda"``, ``"cuda:K"``).
        checkpoint_path: where to write atomic checkpoints (``None``: no checkpoints).
        checkpoint_every: noisy steps between two checkpoints.
        resume: start from the checkpoint at ``checkpoint_path`` if it is this run's.

    Example:
        >>> from gnnprivacy.datasets import load_dataset
        >>> data = load_dataset("csbm", num_nodes=400, seed=0)     # a PyG Data with masks
        >>> from gnnprivacy.training.node_dp import DPMLPTrainer
        >>> trainer = DPMLPTrainer(epsilon=2.0, steps=20, generator=0).fit(data)
        >>> trainer.epsilon_ <= 2.0, sorted(trainer.score(data))[0]
        (True, 'test_accuracy')
    """

    name = "dpmlp"

    def __init__(self, *, epsilon: float = 8.0, delta: float | None = None, batch_size: int = 2048,
                 epochs: float = 5.0, steps: int | None = None, optimizer: str = "adam",
                 lr: float = 1e-3, clip_norm: float = 1.0, hidden_channels: int = 32,
                 num_layers: int = 4, activation: str = "relu", feature_norm: str = "auto",
                 noise_multiplier: float | None = None,
                 generator: torch.Generator | int | None = None,
                 progress: Callable[[str, int], object] | None = None,
                 allow_large_delta: bool = False,
                 secure_mode: bool = False, device: str | torch.device = "cpu",
                 checkpoint_path: str | None = None, checkpoint_every: int = 100,
                 resume: bool = False):
        self._set_runtime(secure_mode=secure_mode, device=device,
                          checkpoint_path=checkpoint_path, checkpoint_every=checkpoint_every,
                          resume=resume)
        self.epsilon = check_target_epsilon("epsilon", epsilon)
        self.delta = None if delta is None else check_delta_range("delta", delta)
        self.batch_size = check_int("batch_size", batch_size, low=1)
        self.epochs = check_positive("epochs", epochs)
        self.steps = None if steps is None else check_int("steps", steps, low=1)
        self.optimizer = check_choice("optimizer", optimizer, ("adam", "sgd"))
        self.lr = check_positive("lr", lr)
        self.clip_norm = check_positive("clip_norm", clip_norm)
        self.hidden_channels = check_int("hidden_channels", hidden_channels, low=1)
        self.num_layers = check_int("num_layers", num_layers, low=1)
        self.activation = check_choice("activation", activation, _ACTIVATIONS)
        self.feature_norm = FeatureNorm(feature_norm).requested
        self.noise_multiplier = (None if noise_multiplier is None
                                 else check_real("noise_multiplier", noise_multiplier, low=0.0))
        self.generator = generator
        self.progress = progress
        self.allow_large_delta = bool(allow_large_delta)

    def _fit(self, data: Data, gens: dict[str, torch.Generator]) -> None:
        inductive = is_inductive(data)
        graph = training_graph(data)
        train = graph.train_mask.nonzero().flatten()
        n_train = int(train.numel())
        q = min(1.0, self.batch_size / n_train)
        delta = self.delta if self.delta is not None else default_delta_dpmlp(n_train)
        self.steps_planned_ = self.steps or math.ceil(self.epochs / q)
        _privacy.check_plan(delta=delta, num_units=n_train, steps=self.steps_planned_,
                            explicit_steps=self.steps is not None,
                            allow_large_delta=self.allow_large_delta,
                            how=f"T = ceil(epochs / q) with q = {q:g}")
        make_event = _privacy.dpsgd_event_factory(sample_rate=q)
        self.noise_multiplier_ = (self.noise_multiplier if self.noise_multiplier is not None
                                  else _privacy.calibrate(make_event, steps=self.steps_planned_,
                                                          epsilon=self.epsilon, delta=delta,
                                                          kind="pld"))
        public = None if inductive else ~graph.train_mask
        self.feature_norm_ = FeatureNorm(self.feature_norm).fit(graph.x, public)
        x = self.feature_norm_.transform(graph.x)
        self.num_classes_ = num_classes_of(data)
        self.model_ = mlp(x.shape[1], self.hidden_channels, self.num_classes_, self.num_layers,
                          self.activation).to(self.device_)
        opt = make_optimizer(self.optimizer, self.model_.parameters(), lr=self.lr)
        if fixed_shapes(self.device_):
            engine = self._run_fixed_shapes(x[train], graph.y[train], opt, gens,
                                            batch_size=min(self.batch_size, n_train),
                                            event=make_event(self.noise_multiplier_))
        else:
            engine = self._run_user_path(x, graph, opt, gens, delta=delta, n_train=n_train)
        self._finish(engine, delta)
        self.privacy_info_ = {
            "unit": PrivacyUnit.NODE.value, "relation": NeighboringRelation.ADD_OR_REMOVE.value,
            "accountant": "pld", "noise_multiplier": self.noise_multiplier_, "noise_std": self.noise_std_,
            "clip_norm": self.clip_norm, "sample_rate": q, "steps": self.steps_,
            "secure_mode": self.secure_mode,
            "scope": ("the trained MLP's parameters: every executed noisy step, for one "
                      "training node added or removed (features and label; the graph is "
                      "not used, so edges are outside the model)"),
            "unaccounted": (["feature standardisation over private nodes"]
                            if self.feature_norm_.unaccounted else []),
            "calibrated": self.noise_multiplier is None}
        self.info_ = {"setting": "inductive" if inductive else "transductive",
                      "num_train": n_train}

    def _run_user_path(self, x: Tensor, graph: Data, opt, gens, *, delta: float,
                       n_train: int):
        """The recipe: gp.make_private's "nodes" sampler and a plain loop (the user path)."""
        from gnnprivacy.training.private import NodeSubgraphs, PrivateTraining

        graph = Data(x=x, y=graph.y, edge_index=graph.edge_index,
                     train_mask=graph.train_mask, num_nodes=graph.num_nodes)
        pt = PrivateTraining(self.model_, opt, graph, sampler=NodeSubgraphs(),
                             noise_multiplier=self.noise_multiplier_, delta=delta,
                             max_grad_norm=self.clip_norm, steps=self.steps_planned_,
                             batch_size=min(self.batch_size, n_train),
                             secure_mode=self.secure_mode, loss_reduction="sum",
                             allow_large_delta=self.allow_large_delta, _generators=gens,
                             _accounting_target=self.epsilon)
        self.accountant_ = pt.accountant
        model = self.model_

        def step(batch):
            opt.zero_grad()
            F.cross_entropy(model(batch.x), batch.y, reduction="sum").backward()
            opt.step()

        self._run_private(pt, step)
        return pt.engine

    def _run_fixed_shapes(self, x: Tensor, y: Tensor, opt, gens, *, batch_size: int, event):
        """The GPU path: the same Poisson sampling, clipping, noise, event and accountant as
        the user path, with batches drawn on the device in a fixed-size buffer (padding
        slots weigh nothing), so a step reads nothing on the host."""
        dev, n_train = self.device_, x.shape[0]
        rate = batch_size / n_train
        batches = FixedShapeNodeBatches(n_train, device=dev, rate=rate)
        gen, noise = self._step_generators(gens)
        self.accountant_ = _privacy.new_accountant("pld", PrivacyUnit.NODE,
                                                   NeighboringRelation.ADD_OR_REMOVE,
                                                   epsilon=self.epsilon,
                                                   steps=self.steps_planned_)
        engine = DPEngine(self.model_, opt, clip_norm=self.clip_norm,
                          noise_multiplier=self.noise_multiplier_,
                          expected_batch_size=rate * n_train, generator=noise,
                          secure_mode=self.secure_mode, accountant=self.accountant_,
                          step_event=event, sampling="poisson")
        model, x, y = self.model_, x.to(dev), y.to(dev)

        def closure_for_step():
            index, valid = batches.sample(gen)
            weight = valid.to(x.dtype)
            return lambda: F.cross_entropy(model(x[index]), y[index], reduction="none") * weight

        self._run(engine, self.steps_planned_, closure_for_step)
        batches.check()
        return engine

    def predict_logits(self, data: Data) -> Tensor:
        """Logits of every node from its own features."""
        self._check_fitted()
        with torch.no_grad():
            return torch.cat([self.model_(self.feature_norm_.transform(part).to(self.device_))
                              .cpu() for part in data.x.split(65536)])

    def __repr__(self) -> str:
        return (f"DPMLPTrainer(epsilon={self.epsilon:g}, delta={self.delta}, "
                f"batch_size={self.batch_size}, epochs={self.epochs:g}, lr={self.lr:g})")
