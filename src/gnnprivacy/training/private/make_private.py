"""Node-level DP for any PyG model in the user's own training loop.

::

    pt = gp.make_private(model, optimizer, data, sampler="degree_bounded", epsilon=8.0)
    for batch in pt.loader:
        optimizer.zero_grad()
        out = model(batch.x, batch.edge_index)
        loss = F.cross_entropy(out[batch.center], batch.y[batch.center])
        loss.backward()
        optimizer.step()          # per-subgraph clipping, one noise draw, one ledger entry
    print(pt.epsilon)

Why a graph needs more than Opacus: in a GNN one node's data reaches every subgraph it
appears in, so per-example clipping bounds nothing about a node. The loader's sampler bounds
how many subgraphs of a step one node can reach (and knows the event that bound gives); the
engine clips each subgraph's whole gradient (the sum over its rows), adds one Gaussian draw
per step and composes one event per executed step into the accountant.

*Privacy.* Unit node; the relation, what the epsilon covers (``privacy["scope"]``) and what
it does not (``privacy["unaccounted"]``) are those of the sampler (`.samplers`). The
engine enforces what the analysis assumes:

* ``optimizer.step()`` refuses a forward pass that did not use the batch the loader handed
  out, a second step on one batch, and a batch that was skipped (a skip depends on the
  batch, and is no noisy release the accountant could charge);
* no ``edge_index`` passed to the model may join two subgraphs; on the first step the model
  is probed once for mixing (one subgraph's features perturbed, every other subgraph's
  output must stay put);
* the loop around the model is checked too (`.guards.LoopGuard`): the first step's torch
  operations are replayed with one subgraph changed, later steps must run the same ones, and
  no buffer or parameter may change between the draw and the step;
* the loader stops at the planned number of steps; an empty batch is still a noisy step.
"""

from __future__ import annotations

import functools
import math
import os
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import nn

from gnnprivacy._torch_state import torch_state_kept
from gnnprivacy._validation import check_choice, check_int, check_positive, check_real
from gnnprivacy.accounting.units import PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.dp import audit_hooks, clipping
from gnnprivacy.training.dp.engine import DPEngine
from gnnprivacy.training.dp.flat_capture import (BatchLayout, FlatCapture, SubgraphMixingError,
                                                  check_not_compiled, tensors_of, trainable)
from gnnprivacy.training.private.edge_sampler import EdgeSubgraphs
from gnnprivacy.training.private.graph_sampler import GraphSampler
from gnnprivacy.training.private.guards import LoopGuard
from gnnprivacy.training.private.loop_checks import GradSentinels, check_loss_reduction
from gnnprivacy.training.private.samplers import SAMPLERS, SubgraphSampler, make_sampler

__all__ = ["PrivateLoader", "PrivateTraining", "make_private"]

LOSS_REDUCTIONS = ("mean", "sum")
SAMPLERS["graphs"] = GraphSampler       # graph-level DP (unit graph), `.graph_sampler`
SAMPLERS["edges"] = EdgeSubgraphs       # edge-level DP (unit edge), `.edge_sampler`


def _make_generators(seed: int | None, secure: bool) -> dict[str, torch.Generator | None]:
    """Independent streams for sampling, noise and the bounding pass (OS entropy without a
    seed; in secure mode the noise has no generator at all)."""
    names = ("sample", "noise", "subgraphs")
    if seed is None or secure:
        gens = {n: torch.Generator().manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
                for n in names}
    else:
        states = np.random.SeedSequence(int(seed)).spawn(len(names))
        gens = {n: torch.Generator().manual_seed(int(s.generate_state(1, np.uint64)[0] >> 1))
                for n, s in zip(names, states)}
    if secure:
        gens["noise"] = None
    return gens


class PrivateLoader:
    """Yields the batches of a `PrivateTraining`, one noisy step each, until the plan.

    One pass yields the remaining planned steps, or one epoch's share of them when
    ``epochs`` was given. Each yielded batch must be followed by exactly one
    ``optimizer.step()`` before the next one is drawn.
    """

    def __init__(self, owner: PrivateTraining):
        self._owner = owner
        self._told_plan_reached = False

    def __len__(self) -> int:
        pt = self._owner
        return min(pt.steps_planned - pt.steps, pt._steps_per_pass())

    def __iter__(self) -> Iterator[Any]:
        pt = self._owner
        if pt.steps >= pt.steps_planned and not self._told_plan_reached:
            import warnings

            self._told_plan_reached = True     # said once: a loop over epochs meets it each pass
            warnings.warn(
                f"pt.loader yields nothing more: the plan's {pt.steps_planned} noisy steps "
                "are done (the epsilon covers those). One pass over the loader runs the whole "
                "plan unless make_private is given epochs= (then each pass is one epoch's "
                "share); for more steps, plan them with steps= or epochs=",
                UserWarning, stacklevel=2)
        try:
            for _ in range(len(self)):
                batch = pt._draw()
                if batch is None:        # an empty batch: released as a noise-only step
                    continue
                yield batch
                pt._check_stepped()
        finally:                         # a loop left after a draw: stop recording it
            pt.guard.stop(cut=pt._pending is not None)

    def __repr__(self) -> str:
        pt = self._owner
        return (f"PrivateLoader(sampler={pt.sampler.name!r}, steps_left="
                f"{pt.steps_planned - pt.steps})")


class PrivateTraining:
    """The state of node-level DP training in a user's loop (see `make_private`).

    Attributes:
        model, optimizer: the user's objects (``optimizer.step`` is the DP step now).
        loader: a `PrivateLoader`.
        sampler: the `SubgraphSampler`.
        delta: the delta of `epsilon`.
        noise_multiplier: ``z``; the noise std on the clipped sum is ``noise_std``.
        steps_planned: the planned noisy steps; ``steps``: those executed.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, data, *,
                 sampler: str | SubgraphSampler, epsilon: float | None = None,
                 noise_multiplier: float | None = None, delta: float | None = None,
                 max_grad_norm: float = 1.0, epochs: float | None = None,
                 steps: int | None = None, batch_size: int | None = None,
                 secure_mode: bool = False, seed: int | None = None,
                 loss_reduction: str = "mean", allow_large_delta: bool = False,
                 _generators: dict | None = None,
                 _accounting_target: float | None = None):
        """See `make_private`. ``_generators`` (``sample``/``noise``/``subgraphs``)
        and ``_accounting_target`` (the epsilon that sizes the accountant's grid) let the
        library's own trainers run on this path with their random streams and plans."""
        if not isinstance(model, nn.Module):
            raise InvalidParameterError("model", "a torch.nn.Module", type(model).__name__)
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise InvalidParameterError("optimizer", "a torch.optim.Optimizer",
                                        type(optimizer).__name__)
        check_not_compiled(model)          # before any planning: a one-line refusal
        _check_optimizer_params(model, optimizer)
        _refuse_if_private(model, optimizer)
        if (epsilon is None) == (noise_multiplier is None):
            raise InvalidParameterError(
                "epsilon", "exactly one of epsilon (the noise is calibrated) and "
                "noise_multiplier (epsilon is computed)",
                "both" if epsilon is not None else "neither")
        if epochs is not None and steps is not None:
            raise InvalidParameterError("steps", "steps or epochs, not both", "both")
        self.max_grad_norm = check_positive("max_grad_norm", max_grad_norm)
        self.loss_reduction = check_choice("loss_reduction", loss_reduction, LOSS_REDUCTIONS)
        self.secure_mode = bool(secure_mode)
        self.seed = None if seed is None else check_int("seed", seed, low=0)
        self.model, self.optimizer = model, optimizer
        self.sampler = make_sampler(sampler)
        self._gens = (_make_generators(self.seed, self.secure_mode) if _generators is None
                      else dict(_generators))
        self.sampler.setup(data, model=model, generator=self._gens["subgraphs"])
        self.plan = self.sampler.plan(batch_size=batch_size)
        self.delta = (self.plan.default_delta if delta is None
                      else check_real("delta", delta, low=0.0, high=1.0, low_open=True,
                                      high_open=True))
        from gnnprivacy.training import _privacy

        _privacy.check_delta(self.delta, getattr(self.sampler, "num_units",
                                                 self.sampler.num_train),
                             allow_large_delta=bool(allow_large_delta),
                             units=(f"training {self.plan.unit.value}s"
                                    if self.plan.unit is not PrivacyUnit.EDGE else "edges"))
        self.epochs = None if epochs is None else check_positive("epochs", epochs)
        if steps is not None:
            self.steps_planned = check_int("steps", steps, low=1)
        elif epochs is not None:
            self.steps_planned = self.sampler.steps_for_epochs(self.plan, self.epochs)
        else:
            target = float(epsilon) if epsilon is not None else 8.0
            self.steps_planned = self.sampler.default_steps(self.plan, epsilon=target,
                                                            delta=self.delta)
        _privacy.check_planned_steps(self.steps_planned, explicit=steps is not None)
        self.target_epsilon = None if epsilon is None else check_positive("epsilon", epsilon)
        # a release planned after training (edge-private inference): its noise is set by its
        # share, and the training noise is calibrated for the composition of both
        self.release_plan = _planned_release(self.sampler, model, self.target_epsilon,
                                             self.delta)
        self.predictor = None
        self._inference_noise_hooks = []
        if self.release_plan is not None and getattr(self.sampler, "noise_in_training", False):
            from gnnprivacy.training.private.edge_inference import release_noise_in_training

            self._inference_noise_hooks = release_noise_in_training(model, self.release_plan)
        if noise_multiplier is not None:
            self.noise_multiplier = check_real("noise_multiplier", noise_multiplier, low=0.0)
        elif self.release_plan is not None:
            self.noise_multiplier = _privacy.calibrate_with_release(
                self.plan.event_factory, steps=self.steps_planned,
                release=tuple(self.release_plan.events()), epsilon=self.target_epsilon,
                delta=self.delta, kind=self.plan.accountant)
        else:
            self.noise_multiplier = _privacy.calibrate(
                self.plan.event_factory, steps=self.steps_planned, epsilon=self.target_epsilon,
                delta=self.delta, kind=self.plan.accountant)
        self.event = self.plan.event_factory(self.noise_multiplier)
        self.accountant = _privacy.new_accountant(
            self.plan.accountant, self.plan.unit, self.plan.relation,
            epsilon=self.target_epsilon if _accounting_target is None else _accounting_target,
            steps=self.steps_planned)
        self.capture = FlatCapture(model, expected_subgraphs=self.plan.expected_batch_size)
        self._original_step = optimizer.step
        self.engine = DPEngine(
            model, optimizer, clip_norm=self.max_grad_norm,
            noise_multiplier=self.noise_multiplier * self.plan.noise_scale,
            expected_batch_size=self.plan.expected_batch_size, generator=self._gens["noise"],
            secure_mode=self.secure_mode, accountant=self.accountant, step_event=self.event,
            sampling=self.plan.sampling, layout="rows", update=self._original_step)
        self.engine.occurrence_bound = self.plan.occurrence   # what the code audit checks
        self.loader = PrivateLoader(self)
        self._pending: BatchLayout | None = None
        self._probed = False
        self.guard = LoopGuard(model, [data, self.sampler.graph,
                                       *getattr(self.sampler, "source_graphs", ())],
                               {self.sampler.num_nodes, self.sampler.num_train,
                                int(getattr(data, "num_nodes", 0) or 0)}, optimizer)
        self.guard.check_losses = functools.partial(check_loss_reduction,
                                                    expected=self.loss_reduction)
        self.capture.attach()
        self._sentinels = GradSentinels(model)      # clip_grad_norm_ in the loop: refused
        _ACTIVE[model] = _ACTIVE[optimizer] = weakref.ref(self)
        self._own_step = optimizer.__dict__.get("step")   # e.g. an LR scheduler's wrapper
        self._dp_step = _scheduler_aware(self._optimizer_step, optimizer)
        optimizer.step = self._dp_step                  # the DP step from now on
        # zero_grad only resets gradients (no data): run outside the loop trace, as the
        # capture's own bookkeeping (its grad writes are not dispatched through the trace)
        self._own_zero_grad = optimizer.__dict__.get("zero_grad")
        plain_zero_grad = optimizer.zero_grad

        def quiet_zero_grad(set_to_none: bool = True):
            section = self.guard.muted()
            if section is None:
                return plain_zero_grad(set_to_none)
            with section:
                return plain_zero_grad(set_to_none)

        self._quiet_zero_grad = quiet_zero_grad
        optimizer.zero_grad = quiet_zero_grad

    # ------------------------------------------------------------------ facts
    @property
    def steps(self) -> int:
        """Noisy steps executed (each one composed into the accountant)."""
        return self.engine.steps_

    @property
    def noise_std(self) -> float:
        """Std of the Gaussian noise on the clipped per-subgraph gradient sum."""
        return self.engine.noise_std

    @property
    def epsilon(self) -> float:
        """Epsilon spent so far at `delta`, from the accountant (0 before any step)."""
        return 0.0 if self.steps == 0 else float(self.accountant.get_epsilon(self.delta))

    @property
    def ledger(self) -> dict:
        """The accountant's ledger: one entry per executed step's event."""
        return self.accountant.to_dict(self.delta)

    @property
    def privacy(self) -> dict:
        """Unit, relation, scope, what is unaccounted, and the mechanism's parameters."""
        rp = self.release_plan
        release = {} if rp is None else {"inference_release": {
            "calls": rp.calls, "noise_multiplier": rp.noise_multiplier,
            "noise_std": rp.noise_std, "message_clip": rp.clip, "planned_epsilon": rp.epsilon,
            "planned_delta": rp.delta, "released": self.predictor is not None}}
        return {**release, "unit": self.plan.unit.value, "relation": self.plan.relation.value,
                "scope": self.plan.scope,
                "unaccounted": (list(self.plan.unaccounted) + self.guard.unaccounted
                                + self._seed_note()),
                "accountant": self.plan.accountant, "sampler": self.sampler.name,
                "noise_multiplier": self.noise_multiplier, "noise_std": self.noise_std,
                "clip_norm": self.max_grad_norm, "steps": self.steps,
                "steps_planned": self.steps_planned, "delta": self.delta,
                "expected_batch_size": self.plan.expected_batch_size,
                "secure_mode": self.secure_mode, **self.plan.details}

    def _seed_note(self) -> list[str]:
        if self.secure_mode or self.seed is None:
            return []
        return ["seeded noise: anyone with the seed can regenerate it (secure_mode=True for "
                "a release)"]

    # ------------------------------------------------------------------ the loop
    def _steps_per_pass(self) -> int:
        if self.epochs is None:
            return self.steps_planned
        return max(1, math.ceil(self.steps_planned / self.epochs))

    def _draw(self):
        """The next batch, on the model's device; ``None`` for an empty one, which is
        released here as a noise-only step."""
        if self._pending is not None:
            self.guard.stop()
            raise SubgraphMixingError(
                "a batch from pt.loader was drawn but optimizer.step() was not called for "
                "it: every batch must be followed by exactly one step (skipping a batch "
                "depends on it, and no noisy release is there to account for)")
        if self.steps >= self.steps_planned:
            return None
        batch = self.sampler.sample(self._gens["sample"])
        if batch.num_subgraphs == 0:
            self.guard.check_between_steps()      # (a batch is checked when it begins)
            self.engine.release(self._zero_sums(), 0)
            self.guard.after_step()
            return None
        device = next((p.device for p in self.model.parameters()), torch.device("cpu"))
        batch = batch.to(device)
        self._pending = BatchLayout(
            batch.x, batch.edge_index, batch.batch, int(batch.num_subgraphs), batch,
            edges_version=(batch.edge_index._version
                           if getattr(self.sampler, "edges_inside", False) else None))
        self.capture.reset()
        self.capture.batch_ids = {id(t) for t in tensors_of(batch)}
        self.guard.begin()
        self.capture.quiet = self.guard.muted()    # the hooks' and the forward's ops: not the
        #                                            loop's (the forward is compared by its
        #                                            calls and autograd graph)
        return batch

    def _check_stepped(self) -> None:
        if self._pending is not None:
            self.guard.stop()
            self._pending = None
            raise SubgraphMixingError(
                "the loop drew the next batch without calling optimizer.step() on the "
                "previous one: every batch from pt.loader must be followed by exactly one "
                "optimizer.step()")

    def _zero_sums(self) -> dict[str, torch.Tensor]:
        return {n: torch.zeros_like(p) for n, p in self.model.named_parameters()
                if p.requires_grad}

    def _optimizer_step(self, closure=None):
        if closure is not None:
            raise InvalidParameterError("closure", "None (the DP step takes no closure)",
                                        type(closure).__name__)
        self.step()

    def step(self):
        """The DP step (what ``optimizer.step()`` runs): check the batch, clip every
        subgraph's gradient to ``max_grad_norm``, add one noise draw, update, account.

        Raises:
            SubgraphMixingError: no pending batch, a foreign batch, an edge between
                subgraphs, a model that mixes subgraphs, or output rows that fit no batch.
        """
        layout = self._pending
        if layout is None:
            if self.steps >= self.steps_planned:
                raise SubgraphMixingError(
                    f"the plan of {self.steps_planned} noisy steps is spent: the epsilon was "
                    "calibrated for it; make a new PrivateTraining to train further")
            raise SubgraphMixingError(
                "optimizer.step() without a batch from pt.loader: draw batches with "
                "`for batch in pt.loader:` and step once per batch (a batch from another "
                "DataLoader would be accounted as a sampling that did not happen)")
        self._pending = None
        self.guard.stop()
        with torch_state_kept():   # an interrupt inside the step leaves the caller's grad mode
            try:
                sums = self._checked_sums(layout)
            finally:
                self.capture.reset()
                self.capture.quiet = None
            self.engine.release(sums, layout.num_subgraphs)
            self.guard.after_step()

    def _checked_sums(self, layout: BatchLayout) -> dict[str, torch.Tensor]:
        """The batch's checks (inputs, output rows, independence on the first step, the
        loop guard), then the clipped per-subgraph sums."""
        self.capture.check_inputs(layout)
        if getattr(self.sampler, "output", None) == "subgraphs":
            self.capture.check_output_rows(layout)
        if not self._probed:
            self.capture.probe_independence(layout)
            self._probed = True
        self.guard.check(layout, self.capture.call_signature())
        self._sentinels.check()
        scale = float(layout.num_subgraphs) if self.loss_reduction == "mean" else 1.0
        with torch.no_grad():            # detached rows in, sums out: no graph to build
            return self._clipped_sums(layout, scale)

    def _clipped_sums(self, layout: BatchLayout, scale: float) -> dict[str, torch.Tensor]:
        """Every subgraph's whole gradient clipped to ``max_grad_norm``, summed: the
        capture's rules, then the engine's one clipping path (`clipping.clip_contributions`).
        ``scale`` (the realised batch under a mean loss) turns the captured gradients into
        those of the per-subgraph losses; every rule is linear in it, so it is applied once,
        to the norms and the clip factors."""
        contributions = self.capture.contributions(layout)
        return clipping.clip_contributions(contributions, trainable(self.model),
                                           self.engine.groups, layout.num_subgraphs, scale=scale,
                                           device=layout.batch.device).sums

    # ------------------------------------------------------------------ inference
    def release_predictor(self, data=None):
        """Release the edge-private predictor (``sampler="edges"`` with ``inference=
        "noisy"``): every message-passing call's noisy aggregate over ``data`` (default the
        training graph), composed into this accountant; once.

        Returns:
            An `EdgePrivatePredictor`: ``predictor(x)`` gives logits without reading an edge.

        Raises:
            InvalidParameterError: no release was planned, or it was already made.
        """
        from gnnprivacy.training.private.edge_inference import (EdgePrivatePredictor,
                                                                release_aggregates)

        if self.release_plan is None:
            raise InvalidParameterError(
                "sampler", "sampler='edges' with inference='noisy' (a release planned in the "
                "budget)", self.sampler.name + ("" if not hasattr(self.sampler, "inference")
                                                else f", inference={self.sampler.inference!r}"))
        if self.predictor is not None:
            raise InvalidParameterError("release_predictor", "one call (the aggregates are "
                                        "released once: reuse pt.predictor)", "a second call"
                                        if not isinstance(self.predictor, str)
                                        else self.predictor)
        graph = self.sampler.graph if data is None else data
        device = next((p.device for p in self.model.parameters()), torch.device("cpu"))
        released = release_aggregates(self.model, graph.x.to(device),
                                      graph.edge_index.to(device), self.release_plan,
                                      generator=self._gens["noise"], secure_mode=self.secure_mode)
        for event in self.release_plan.events():
            self.accountant.compose(event)
        self.predictor = EdgePrivatePredictor(self.model, released, {
            "unit": "edge", "calls": self.release_plan.calls,
            "noise_std": self.release_plan.noise_std, "epsilon": self.epsilon,
            "delta": self.delta}, open_training=lambda model=self.model: open_training(model))
        return self.predictor

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """Model, optimizer, executed steps, the ledger and the sampling stream's state."""
        state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                 "steps": self.steps, "steps_planned": self.steps_planned,
                 "noise_multiplier": self.noise_multiplier, "ledger": self.ledger,
                 "sample_generator": self._gens["sample"].get_state(),
                 "sampling_stream": self.sampler.stream_state(),
                 "noise_generator": (None if self._gens["noise"] is None
                                     else self._gens["noise"].get_state()),
                 "inference_released": self.predictor is not None}
        audit_hooks.note_checkpoint(self.engine, state["steps"])
        return state

    def load_state_dict(self, state: dict) -> None:
        """Resume: restore model, optimizer and streams, and recompose the executed steps.

        Raises:
            InvalidParameterError: the state was planned with another noise or step count.
        """
        for key, mine in (("noise_multiplier", self.noise_multiplier),
                          ("steps_planned", self.steps_planned)):
            if not math.isclose(float(state[key]), float(mine), rel_tol=1e-12):
                raise InvalidParameterError(
                    "state", f"a checkpoint of this plan ({key} = {mine})", state[key])
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self._gens["sample"].set_state(state["sample_generator"])
        self.sampler.load_stream_state(state.get("sampling_stream"))
        if self._gens["noise"] is not None and state["noise_generator"] is not None:
            self._gens["noise"].set_state(state["noise_generator"])
        done = int(state["steps"]) - self.steps
        if done < 0:
            raise InvalidParameterError("state", f"at least {self.steps} executed steps",
                                        state["steps"])
        if done:
            self.accountant.compose(self.event, done)
            self.engine.steps_ += done
        if state.get("inference_released") and self.release_plan is not None \
                and self.predictor is None:
            # the release was made before the checkpoint: it stays in the ledger, and it is
            # not made again (its aggregates live where it was made)
            for event in self.release_plan.events():
                self.accountant.compose(event)
            self.predictor = "released before the checkpoint"
        audit_hooks.note_resume(self.engine, int(state["steps"]))
        self.guard.after_step()          # the model as the checkpoint left it

    def close(self) -> None:
        """Remove the hooks and give ``optimizer`` its own ``step`` and ``zero_grad`` back.

        Raises:
            SubgraphMixingError: the model was changed after the last ``optimizer.step()``
                (`LoopGuard.check_between_steps`; the hooks are removed either way).
        """
        self.guard.stop()
        try:
            self.guard.check_between_steps()
        finally:
            self._release_hooks()

    def _release_hooks(self) -> None:
        for handle in self._inference_noise_hooks:
            handle.remove()
        self._inference_noise_hooks = []
        self.capture.detach()
        if self.optimizer.__dict__.get("zero_grad") is self._quiet_zero_grad:
            if self._own_zero_grad is not None:
                self.optimizer.zero_grad = self._own_zero_grad
            else:
                del self.optimizer.zero_grad
        self._sentinels.remove()
        for owner in (self.model, self.optimizer):
            ref = _ACTIVE.get(owner)
            if ref is not None and ref() is self:
                del _ACTIVE[owner]
        if self.optimizer.__dict__.get("step") is self._dp_step:
            if self._own_step is not None:
                self.optimizer.step = self._own_step
            else:
                del self.optimizer.step

    def __repr__(self) -> str:
        return (f"PrivateTraining(sampler={self.sampler.name!r}, noise_multiplier="
                f"{self.noise_multiplier:.4g}, clip_norm={self.max_grad_norm:g}, steps="
                f"{self.steps}/{self.steps_planned}, epsilon={self.epsilon:.4g}, "
                f"delta={self.delta:.3g})")


def _planned_release(sampler, model, epsilon, delta):
    """The sampler's planned inference release (`edge_inference.ReleasePlan`), or ``None``."""
    if getattr(sampler, "inference", None) != "noisy":
        return None
    from gnnprivacy.training.private.edge_inference import plan_release

    share = float(sampler.inference_share)
    return plan_release(model, sampler.graph.x, undirected=bool(sampler.undirected_),
                        clip=sampler.message_clip,
                        epsilon=None if epsilon is None else share * epsilon,
                        delta=0.5 * delta, noise_multiplier=sampler.inference_noise_multiplier)



def _scheduler_aware(step, optimizer: torch.optim.Optimizer):
    """``step`` as the optimizer's ``step``, in the form torch's LR schedulers expect: marked
    as their wrapper (so a scheduler created before `make_private` does not warn that
    ``optimizer.step()`` was overridden, and one created after does not wrap it again) and
    recording the call (``_opt_called``) as their wrapper does."""
    def dp_step(closure=None):
        optimizer._opt_called = True
        return step(closure)

    dp_step._wrapped_by_lr_sched = True
    return dp_step


#: model or optimizer -> the open `PrivateTraining` using it (weakly: a discarded one is gone)
_ACTIVE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def open_training(owner) -> PrivateTraining | None:
    """The open `PrivateTraining` that uses ``owner`` (a model or optimizer), or ``None``."""
    ref = _ACTIVE.get(owner)
    return ref() if ref is not None else None


def _refuse_if_private(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """A second `make_private` on a model or optimizer that an open one still uses would stack
    two DP steps and two sets of hooks (its errors then blamed the batch): refused, naming
    which and the fix."""
    for what, owner in (("model", model), ("optimizer", optimizer)):
        earlier = open_training(owner)
        if earlier is not None:
            raise InvalidParameterError(
                what, f"a {what} that no open make_private uses (call .close() on the earlier "
                "one first, or give this one a new model and optimizer)",
                f"the {what} of {earlier!r}")


def _check_optimizer_params(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    mine = {id(p) for p in model.parameters()}
    foreign = [p for g in optimizer.param_groups for p in g["params"] if id(p) not in mine]
    if foreign:
        raise InvalidParameterError(
            "optimizer", "an optimizer over the model's own parameters (the DP engine clips "
            "and noises only what the model's modules use)",
            f"{len(foreign)} parameter(s) not in the model, first of shape "
            f"{tuple(foreign[0].shape)}")
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        raise InvalidParameterError("model", "at least one trainable parameter", "none")


def make_private(model: nn.Module, optimizer: torch.optim.Optimizer, data, *,
                 sampler: str | SubgraphSampler, epsilon: float | None = None,
                 noise_multiplier: float | None = None, delta: float | None = None,
                 max_grad_norm: float = 1.0, epochs: float | None = None,
                 steps: int | None = None, batch_size: int | None = None,
                 secure_mode: bool = False, seed: int | None = None,
                 loss_reduction: str = "mean", **unknown: Any) -> PrivateTraining:
    """Make the user's own PyG model and loop node-level differentially private.

    Args:
        model: any ``nn.Module`` taking the batch's tensors (e.g. ``model(x, edge_index)``);
            PyG ``GCNConv``, ``SAGEConv``, ``GraphConv``, ``GINConv``/``GINEConv`` (trained
            ``eps`` included), ``GATConv``, torch and PyG ``Linear``, ``LayerNorm``,
            ``Embedding``, ``Dropout`` have exact rules; any other differentiable module an
            exact per-subgraph fallback (slow: announced by a ``FallbackWarning``). Modules
            that mix the rows of a batch (``BatchNorm``, attention across rows) are refused.
            The batches carry the graph's edge attributes (``batch.edge_attr``, ...).
        optimizer: a ``torch.optim`` optimizer over the model's parameters; its ``step``
            becomes the DP step (SGD gives DP-SGD, Adam DP-Adam).
        data: the PyG ``Data`` graph with ``x``, ``y``, ``edge_index`` and ``train_mask``;
            with ``sampler="graphs"`` the training graphs (a PyG ``Dataset`` or a list of
            ``Data``, each with ``x``, ``edge_index`` and one label row ``y``), unit graph.
        sampler: ``"heterpoisson"``, ``"degree_bounded"``, ``"nodes"``, ``"graphs"``
            (`graph_sampler`: Poisson over whole graphs) or a sampler object
            with options (`gnnprivacy.training.private.samplers`).
        epsilon: target epsilon (the noise multiplier is calibrated for the planned steps);
            or ``noise_multiplier``: fixed ``z``, the epsilon is computed (``0``: a labelled
            non-private run, epsilon infinite). Exactly one.
        delta: default per sampler (``|V|^-1.1`` for heterpoisson, ``1 / (10 N_train)``
            otherwise).
        max_grad_norm: per-subgraph clip bound ``C``.
        epochs: expected passes over the training nodes (the plan); default: the library's
            adaptive rule for the graph size and epsilon.
        steps: the number of steps (the plan), instead of ``epochs``.
        batch_size: expected subgraphs per step (default adaptive).
        secure_mode: noise from the OS CSPRNG, sampling seeds from OS entropy.
        seed: seeds sampling and noise (reproducible research only); ``None``: OS entropy.
        loss_reduction: ``"mean"`` (the loss averages over the batch's subgraphs, e.g.
            ``F.cross_entropy(out[batch.center], ...)``) or ``"sum"``.

    Returns:
        A `PrivateTraining`.

    Raises:
        InvalidParameterError: bad arguments (an unknown option is named, with the valid
            ones; a ``torch.utils.data.DataLoader`` option such as ``num_workers`` with why
            ``pt.loader`` takes none); UnsupportedModuleError: a module that cannot be
            clipped per subgraph; a model or optimizer that an open ``make_private`` still
            uses (close it first).
    """
    if unknown:
        _refuse_options(unknown)
    return PrivateTraining(model, optimizer, data, sampler=sampler, epsilon=epsilon,
                           noise_multiplier=noise_multiplier, delta=delta,
                           max_grad_norm=max_grad_norm, epochs=epochs, steps=steps,
                           batch_size=batch_size, secure_mode=secure_mode, seed=seed,
                           loss_reduction=loss_reduction)


#: ``torch.utils.data.DataLoader`` options users carry over from their own loops
_LOADER_OPTIONS = ("num_workers", "shuffle", "drop_last", "pin_memory", "collate_fn",
                   "prefetch_factor", "persistent_workers", "generator",
                   "worker_init_fn", "timeout")


def _refuse_options(unknown: dict) -> None:
    import inspect

    from gnnprivacy.errors import UnknownNameError

    name = sorted(unknown)[0]
    if name in _LOADER_OPTIONS:
        raise InvalidParameterError(
            name, "not given: pt.loader is not a torch DataLoader; it draws each batch itself "
            "(Poisson sampling in this process, the draw the accountant charges for), so it "
            "takes no workers, shuffling or collation", unknown[name])
    valid = [p for p in inspect.signature(make_private).parameters
             if p not in ("model", "optimizer", "data", "unknown")]
    raise UnknownNameError("make_private option", name, valid)
