"""Edge-private predictions: one noisy release of every message-passing layer's aggregate.

A model trained with edge-level DP (`make_private(sampler="edges")`) has private weights,
but its predictions on the graph read the private edges again: LinkTeller (Wu et al., S&P
2022) perturbs one node's features and watches which outputs move. The release here makes
the predictions a post-processing of DP outputs, as GAP's edge-level mode does with its
aggregates (Sajadmanesh et al., USENIX Security 2023), for any model whose message passing
is built from the supported PyG layers:

1. the model runs once on the graph; at each message-passing call every message (one per
   entry ``j -> i``) is clipped to norm ``B`` and the call's aggregate gets Gaussian noise
   ``N(0, (z B s)^2 I)``, ``s = sqrt(2)`` for an undirected unit (two rows), else 1;
2. the noisy aggregates are kept (``EdgePrivatePredictor.aggregates``) and the edges are
   never read again: a prediction runs the model on the features it is given with an empty
   ``edge_index`` and each call's aggregate replaced by the released one.

*Why one call is a Gaussian mechanism of sensitivity* ``B s``: with ``sum`` aggregation an
entry ``u -> v`` adds one clipped message to row ``v`` (norm ``<= B``) and changes no other
row, because the supported layers' messages depend on the source's state and the entry's
own attributes only (no degree normalisation, no attention over the neighbourhood); with
``mean`` the row moves from ``S / d`` to ``(S + m) / (d + 1)``, by at most ``2B / (d + 1)
<= B`` (and by ``B`` from an empty row). The call's input is a function of the features
(public) and of the earlier calls' released aggregates, so each call is one Gaussian
mechanism (composed adaptively): ``calls`` ``GaussianDpEvent(z)`` events under unit EDGE.

Supported: ``SAGEConv``, ``GraphConv``, ``GINConv``, ``GINEConv`` and ``GCNConv(normalize=
False)``, with ``sum``/``add`` or ``mean`` aggregation and flow ``source_to_target``. Refused
(one line naming the module): ``GCNConv`` with normalisation (a new entry rescales every
message out of its target), attention (``GATConv``), max/min aggregation, and any other
message-passing module.

*What a query sees.* The features a prediction is given replace the ones of the release
only where a node reads itself (its own root/self term); the neighbour aggregates stay the
released ones. So a query changes no other node's output (LinkTeller's influence is zero),
and the predictor never reads an edge. A model that reads ``edge_index`` outside the
supported layers (degree features, edge dropout) sees an empty one at prediction.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from gnnprivacy.errors import InvalidParameterError

__all__ = ["EdgePrivatePredictor", "ReleasePlan", "check_release_layers", "plan_release",
           "release_aggregates", "release_noise_in_training"]

AGGREGATIONS = ("add", "sum", "mean")


def _supported(module) -> str | None:
    """``None`` when ``module``'s messages and aggregation fit the release, else why not."""
    from torch_geometric.nn import GCNConv, GINConv, GINEConv, GraphConv, SAGEConv

    if isinstance(module, GCNConv):
        if getattr(module, "normalize", True):
            return ("GCNConv normalises by degrees (a new entry rescales every message out of "
                    "its target); use GCNConv(normalize=False), SAGEConv or GraphConv")
    elif not isinstance(module, (SAGEConv, GraphConv, GINConv, GINEConv)):
        return (f"{type(module).__name__} is not a supported layer for the noisy release "
                "(SAGEConv, GraphConv, GINConv, GINEConv, GCNConv(normalize=False))")
    aggr = getattr(module, "aggr", None)
    if not isinstance(aggr, str) or aggr not in AGGREGATIONS:
        return f"aggregation {aggr!r} (supported: sum, add, mean)"
    if getattr(module, "flow", "source_to_target") != "source_to_target":
        return "flow 'target_to_source'"
    return None


def check_release_layers(model: nn.Module) -> list:
    """The model's outermost message-passing modules, each checked (`_supported`).

    Raises:
        InvalidParameterError: a module that the release cannot cover (named, with why).
    """
    from torch_geometric.nn.conv import MessagePassing

    layers, inner = [], set()
    for name, module in model.named_modules():
        if isinstance(module, MessagePassing) and id(module) not in inner:
            inner.update(id(m) for m in module.modules() if m is not module)
            why = _supported(module)
            if why is not None:
                raise InvalidParameterError(
                    "model", "message passing that the noisy inference release covers "
                    "(or inference='unprotected' / 'none')", f"{name or 'model'}: {why}")
            layers.append(module)
    return layers


def _empty_edges(device) -> Tensor:
    return torch.zeros(2, 0, dtype=torch.long, device=device)


def count_calls(model: nn.Module, x: Tensor, forward: Callable | None = None) -> int:
    """How many message-passing calls one forward makes (run on an empty edge set: no
    private edge is read)."""
    layers = check_release_layers(model)
    calls = [0]

    def hook(module, inputs, output):
        calls[0] += 1
        return output

    handles = [m.register_aggregate_forward_hook(hook) for m in layers]
    try:
        _run(model, x, _empty_edges(x.device), forward)
    finally:
        for h in handles:
            h.remove()
    return calls[0]


def _run(model: nn.Module, x: Tensor, edge_index: Tensor, forward: Callable | None) -> Tensor:
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            return model(x, edge_index) if forward is None else forward(model, x, edge_index)
    finally:
        model.train(was)


@dataclass(frozen=True)
class ReleasePlan:
    """The planned inference release: ``calls`` Gaussian events at ``noise_multiplier``.

    Attributes:
        calls: message-passing calls of one forward.
        noise_multiplier: ``z``; each call's noise std is ``z * clip * row_factor``.
        clip: ``B``, the message norm bound.
        row_factor: ``sqrt(2)`` (undirected unit: two rows change) or 1.
        epsilon, delta: the share planned for it (``None`` with a fixed multiplier).
    """

    calls: int
    noise_multiplier: float
    clip: float
    row_factor: float
    epsilon: float | None = None
    delta: float | None = None

    @property
    def noise_std(self) -> float:
        return self.noise_multiplier * self.clip * self.row_factor

    def events(self) -> list:
        from dp_accounting import dp_event

        from gnnprivacy.accounting.events import ScopedDpEvent
        from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit

        return [ScopedDpEvent(dp_event.GaussianDpEvent(self.noise_multiplier), PrivacyUnit.EDGE,
                              NeighboringRelation.ADD_OR_REMOVE)] * self.calls


def plan_release(model: nn.Module, x: Tensor, *, undirected: bool, clip: float,
                 epsilon: float | None, delta: float,
                 noise_multiplier: float | None = None) -> ReleasePlan:
    """Calibrate the release of ``model``'s aggregates to ``(epsilon, delta)`` (or take
    ``noise_multiplier``), before anything is released."""
    from dp_accounting import dp_event

    from gnnprivacy.accounting import calibrate_noise_multiplier
    from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit

    calls = count_calls(model, x)
    if calls == 0:
        raise InvalidParameterError("model", "a forward that calls its message-passing layers",
                                    "no message-passing call")
    if noise_multiplier is None:
        if epsilon is None:
            raise InvalidParameterError(
                "inference_noise_multiplier", "a noise multiplier for the inference release "
                "when make_private is given noise_multiplier (or inference='unprotected')",
                None)
        noise_multiplier = calibrate_noise_multiplier(
            lambda z: dp_event.GaussianDpEvent(z), steps=calls, target_epsilon=epsilon,
            target_delta=delta, unit=PrivacyUnit.EDGE, relation=NeighboringRelation.ADD_OR_REMOVE)
    return ReleasePlan(calls, float(noise_multiplier), float(clip),
                       math.sqrt(2.0) if undirected else 1.0, epsilon, delta)


def _clip_rows(messages: Tensor, bound: float) -> Tensor:
    flat = messages.reshape(messages.shape[0], -1)
    norms = flat.norm(dim=1).clamp_min(1e-12)
    factor = (bound / norms).clamp(max=1.0)
    return messages * factor.view((-1,) + (1,) * (messages.dim() - 1))


def release_aggregates(model: nn.Module, x: Tensor, edge_index: Tensor, plan: ReleasePlan, *,
                       generator: torch.Generator | None, secure_mode: bool = False,
                       forward: Callable | None = None) -> list[Tensor]:
    """Run ``model`` once on the graph with clipped messages and noisy aggregates; return
    each call's released aggregate (in call order).

    Raises:
        InvalidParameterError: a forward that makes more calls than planned (nothing is
            returned: the budget covers ``plan.calls``).
    """
    from gnnprivacy.training.dp import audit_hooks
    from gnnprivacy.training.dp.noise import gaussian_noise

    layers = check_release_layers(model)
    released: list[Tensor] = []

    def clip_messages(module, inputs, output):
        return _clip_rows(output, plan.clip)

    def noisy(module, inputs, output):
        if len(released) >= plan.calls:
            raise InvalidParameterError("model", f"a forward with the planned {plan.calls} "
                                        "message-passing call(s)", "more calls")
        # a noisy value leaving the mechanism: the publication audit records (or replays) it
        out = audit_hooks.released("edge aggregate", output + gaussian_noise(
            output, plan.noise_std, generator=generator, secure=secure_mode))
        released.append(out.detach().clone())
        return out

    handles = [h for m in layers for h in (m.register_message_forward_hook(clip_messages),
                                            m.register_aggregate_forward_hook(noisy))]
    try:
        _run(model, x, edge_index, forward)
    finally:
        for h in handles:
            h.remove()
    if len(released) != plan.calls:
        raise InvalidParameterError("model", f"a forward with the planned {plan.calls} "
                                    "message-passing call(s)", f"{len(released)} calls")
    return released


def release_noise_in_training(model: nn.Module, plan: ReleasePlan) -> list:
    """Train the model as the release will run it: while a message-passing module is in
    training mode, its messages are clipped to ``plan.clip`` and its aggregate gets noise of
    the release's std (an augmentation, not a privacy mechanism; every row's noise is its
    own, so no subgraph mixes with another). The noise comes from torch's global random
    state, as dropout's does: a replay of the step's forward from the same state (the code
    audit's recomputed gradients) sees the same noise. Returns the hook handles
    (``handle.remove()`` to stop)."""
    def clip_messages(module, inputs, output):
        return _clip_rows(output, plan.clip) if module.training else output

    def noisy(module, inputs, output):
        if not module.training:
            return output
        noise = torch.randn(output.shape, dtype=output.dtype, device=output.device)
        return output + noise * plan.noise_std

    return [h for m in check_release_layers(model)
            for h in (m.register_message_forward_hook(clip_messages),
                      m.register_aggregate_forward_hook(noisy))]


class EdgePrivatePredictor:
    """Predictions from a released model and its released noisy aggregates.

    ``predictor(x)`` (or ``predictor(x, edge_index)``: the edges are ignored) runs the model
    on ``x`` with an empty edge set, each message-passing call's aggregate replaced by the
    released one. It reads no private edge: every output is a post-processing of the DP
    parameters, the released aggregates and the features given.

    Attributes:
        model: the trained model; aggregates: the released aggregates, one per call;
        privacy: what the release covers (unit, noise, calls).
    """

    def __init__(self, model: nn.Module, aggregates: list[Tensor], privacy: dict,
                 forward: Callable | None = None, open_training: Callable | None = None):
        self.model = model
        #: ``() -> the open training that still uses the model, or None`` (refit refuses one)
        self._open_training = open_training
        self.aggregates = aggregates
        self.privacy = dict(privacy)
        self.num_nodes = int(aggregates[0].shape[0]) if aggregates else 0
        self._forward = forward
        self._layers = check_release_layers(model)

    def _check_rows(self, x: Tensor) -> None:
        if int(x.shape[0]) != self.num_nodes:
            raise InvalidParameterError(
                "x", f"features of the {self.num_nodes} nodes of the release (the aggregates "
                "are per node of the released graph)", f"{int(x.shape[0])} rows")

    @contextmanager
    def _replayed(self):
        """Within: every message-passing call of the model returns the next released
        aggregate (in call order) instead of aggregating; on leaving, the calls made must be
        exactly the release's."""
        calls = [0]

        def frozen(module, inputs, output):
            k = calls[0]
            calls[0] += 1
            if k >= len(self.aggregates):
                raise InvalidParameterError("model", "the forward of the release (same "
                                            "message-passing calls)", "more calls")
            return self.aggregates[k].to(device=output.device, dtype=output.dtype)

        handles = [m.register_aggregate_forward_hook(frozen) for m in self._layers]
        try:
            yield calls
        finally:
            for h in handles:
                h.remove()
        if calls[0] != len(self.aggregates):
            raise InvalidParameterError("model", "the forward of the release (same "
                                        "message-passing calls)", f"{calls[0]} calls")

    def _forward_released(self, x: Tensor, training: bool = False) -> Tensor:
        """The model on ``x`` with the released aggregates, in eval mode (``training``:
        train mode, e.g. dropout, for the refit), gradients on; `__call__` is this under
        ``no_grad``."""
        was = self.model.training
        self.model.train(training)
        try:
            with self._replayed():
                edges = _empty_edges(x.device)
                return (self.model(x, edges) if self._forward is None
                        else self._forward(self.model, x, edges))
        finally:
            self.model.train(was)

    def __call__(self, x: Tensor, edge_index: Tensor | None = None) -> Tensor:
        self._check_rows(x)
        with torch.no_grad():
            return self._forward_released(x)

    def refit(self, x: Tensor, y: Tensor, train_nodes: Tensor, val_nodes: Tensor | None = None,
              *, parameters=None, epochs: int = 200, lr: float = 0.01,
              weight_decay: float = 5e-4, eval_every: int = 5,
              candidates: dict[str, list[Tensor]] | None = None) -> dict:
        """Post-processing: train ``parameters`` (default: every trainable parameter of the
        model) on the released aggregates with the labels of ``train_nodes`` (full batch,
        Adam), keeping the parameters with the best accuracy on ``val_nodes`` (the ones
        given included; without ``val_nodes``, the last).

        Under the edge unit the features and labels are public and the aggregates are
        released: the refit reads no edge and spends no epsilon (a post-processing of the
        release). It is what to do when the release is what the model will read: the
        training noise and the release's noise differ, and only the release's is fixed.

        ``candidates`` names other values of the same parameters (in their order) that the
        validation also weighs, e.g. the model before DP training; they must be
        post-processings of the release too (public data or released values only).

        Returns:
            ``{"epochs", "val_accuracy_before", "val_accuracy", "kept"}``, ``kept`` being
            ``"refit"``, ``"trained"`` (the given parameters validated better) or the name
            of a candidate.
        """
        from gnnprivacy._validation import check_int, check_positive
        from gnnprivacy.training.dp import audit_hooks
        from gnnprivacy.training.metrics import accuracy

        self._check_rows(x)
        training = self._open_training() if self._open_training is not None else None
        if training is not None:
            raise InvalidParameterError(
                "refit", "a closed training (call pt.close() first: the open DP engine "
                "would capture the refit's steps)", repr(training))
        epochs = check_int("epochs", epochs, low=1)
        eval_every = check_int("eval_every", eval_every, low=1)
        params = [p for p in (self.model.parameters() if parameters is None else parameters)
                  if p.requires_grad]
        if not params:
            raise InvalidParameterError("parameters", "at least one trainable parameter",
                                        "none")
        opt = torch.optim.Adam(params, lr=check_positive("lr", lr),
                               weight_decay=float(weight_decay))

        def val_accuracy() -> float:
            if val_nodes is None:
                return float("nan")
            return accuracy(self(x)[val_nodes], y[val_nodes])     # nan without nodes

        def snapshot() -> list[Tensor]:
            return [p.detach().clone() for p in params]

        def load(values: list[Tensor]) -> None:
            with torch.no_grad():
                for p, v in zip(params, values):
                    p.copy_(v)

        before, trained = val_accuracy(), snapshot()
        best, best_params, kept = before, trained, "trained"
        for name, values in (candidates or {}).items():
            if len(values) != len(params):
                raise InvalidParameterError("candidates", f"values of the {len(params)} "
                                            "refitted parameters", f"{name}: {len(values)}")
            load(values)
            acc = val_accuracy()
            if acc > best:
                best, best_params, kept = acc, snapshot(), name
        load(trained)                            # the refit starts from the trained values
        for epoch in range(1, epochs + 1):
            opt.zero_grad()
            out = self._forward_released(x, training=True)
            torch.nn.functional.cross_entropy(out[train_nodes], y[train_nodes]).backward()
            opt.step()
            if epoch % eval_every == 0 or epoch == epochs:
                acc = val_accuracy()
                if math.isnan(best) or acc > best:
                    best, best_params, kept = acc, snapshot(), "refit"
        load(best_params)
        audit_hooks.note_post_processing(self.model)
        self.privacy["refit"] = ("post-processing: parameters fitted on the released "
                                 "aggregates with the public labels (no epsilon)")
        return {"epochs": epochs, "val_accuracy_before": before, "val_accuracy": best,
                "kept": kept}

    def predict_logits(self, data) -> Tensor:
        """Logits of every node of ``data`` (its features; its edges are not read)."""
        return self(data.x)

    def __repr__(self) -> str:
        return (f"EdgePrivatePredictor(calls={len(self.aggregates)}, "
                f"noise_std={self.privacy.get('noise_std')})")
