"""The DP-SGD / DP-Adam step: per-subgraph clipping, Gaussian noise, update, accounting.

References: Abadi et al., *Deep Learning with Differential Privacy*, CCS 2016 (DP-SGD);
spec 000 §3.3 (HeterPoisson Algorithm 1: clip 0.5, noise on the sum, Adam on
``g̃ / B_exp``); spec 002 §3.6–3.7 (DP-GNN Algorithms 1 and 3, with the correction that
DP-Adam averages first and applies standard Adam to the noisy mean).

One step, for per-subgraph losses ``ℓ_i`` of a batch of ``B`` subgraphs::

    g_i  = ∇_w ℓ_i                      (all subgraphs at once, never one backward each)
    ḡ    = Σ_i min(1, C/‖g_i‖) g_i       (per clip group, see clipping.py)
    g̃    = ḡ + N(0, σ² I),  σ = noise_multiplier · C_eff     (one fresh draw per step)
    w   ← optimizer.step(grad = g̃ / B_exp)                     (SGD or Adam)

``B_exp`` is the *expected* batch size (``q·N`` for Poisson sampling, ``m`` for fixed
batches), never the realised one, so the update's scale does not depend on the data.

Why not Opacus. Opacus 1.6's ``GradSampleModuleFastGradientClipping`` computes the same
ghost norms but then runs a *second* backward on the rescaled loss to obtain the clipped
sum, which costs about twice a non-private step. Here the weights are frozen during the
single backward (autograd computes only output gradients ``δ``), and the clipped sum is
formed once per layer as ``Aᵀ(c ⊙ Δ)`` — the matrix product a non-private backward would
have done anyway — so a DP step costs close to a non-private one
(``benchmarks/bench_dp_step.py``). Opacus serves as the correctness oracle in the tests.

*Privacy.* Unit and neighbouring relation are those of the accountant's event: the engine
only guarantees that every subgraph's contribution to the noisy sum has norm ≤ ``C_eff``
and that Gaussian noise of std ``σ`` is added once per executed step, including steps with
an empty batch. After every executed step it composes ``step_event`` into ``accountant``
(``accountant.compose(event)``) and calls ``on_step``; epsilon is therefore always
computed from the steps that actually ran.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from gnnprivacy._validation import check_choice, check_positive, check_real
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.dp.audit_hooks import released
from gnnprivacy.training.dp.clipping import (ClipGroup, clip_and_sum, effective_clip_norm,
                                             resolve_groups)
from gnnprivacy.training.dp.flat_capture import FlatCapture, module_tree, named_tensors
from gnnprivacy.training.dp.noise import noised_flat, unflatten

__all__ = ["DPEngine", "SAMPLINGS", "StepInfo", "check_sampling", "make_optimizer"]

#: how an engine's batches are drawn, and the step event each declaration admits
SAMPLINGS = ("poisson", "heterpoisson", "degree_bounded", "full")


def check_sampling(sampling: str | None, event: Any) -> str | None:
    """Refuse an accountant event that does not describe how the batches are drawn.

    An engine that composes a subsampled event must know that its batches were drawn that
    way: a batch from a shuffled ``DataLoader`` (sampling without replacement, fixed size)
    accounted as Poisson sampling would claim an amplification that never happened. The
    library's samplers declare themselves; a caller who draws batches itself must declare
    the sampling and pass the matching event:

    ``"poisson"`` (each unit independently, ``PoissonSampledDpEvent``, or an unsampled
    event at rate 1), ``"heterpoisson"``
    (`HeterPoissonSampler`, ``HeterPoissonDpEvent``),
    ``"degree_bounded"`` (DP-GNN's node batches over bounded subgraphs, ``DpGnnDpEvent``),
    ``"full"`` (every unit in every step, an event without sampling).

    Raises:
        InvalidParameterError: naming ``sampling``.
    """
    if event is None:
        return sampling
    if sampling is None:
        raise InvalidParameterError(
            "sampling", f"one of {list(SAMPLINGS)}: the engine must know how its batches are "
            "drawn to account for them (use the library's samplers, e.g. gp.make_private's "
            "loader, or declare the sampling that matches step_event)", None)
    check_choice("sampling", sampling, SAMPLINGS)
    from dp_accounting import dp_event

    from gnnprivacy.accounting.events import (DpGnnDpEvent, EdgeSubgraphDpEvent,
                                              HeterPoissonDpEvent, ScopedDpEvent)

    inner = event.event if isinstance(event, ScopedDpEvent) else event
    # edge-level subgraphs are Poisson-sampled centres (`EdgeSubgraphDpEvent`)
    expected = {"poisson": (dp_event.PoissonSampledDpEvent, EdgeSubgraphDpEvent),
                "heterpoisson": HeterPoissonDpEvent,
                "degree_bounded": DpGnnDpEvent}.get(sampling)
    sampled = (dp_event.PoissonSampledDpEvent, dp_event.SampledWithoutReplacementDpEvent,
               dp_event.SampledWithReplacementDpEvent, HeterPoissonDpEvent, DpGnnDpEvent,
               EdgeSubgraphDpEvent)
    ok = isinstance(inner, expected) if expected else not isinstance(inner, sampled)
    if sampling == "poisson" and not isinstance(inner, sampled):
        ok = True           # Poisson sampling at rate 1 is every unit in every step
    if not ok:
        raise InvalidParameterError(
            "step_event", f"an event for {sampling!r} sampling"
            + (f" ({_names(expected)})" if expected else " (no subsampling)"),
            type(inner).__name__)
    return sampling


def _names(classes) -> str:
    return " or ".join(c.__name__ for c in (classes if isinstance(classes, tuple) else (classes,)))


@dataclass(frozen=True)
class StepInfo:
    """What ``on_step`` receives after each executed noisy step.

    Attributes:
        step: 1-based index of the executed step.
        num_subgraphs: realised batch size (data-dependent: a diagnostic, not for release);
            on a fixed-shape device (a GPU) the batch's capacity, padding slots included,
            since reading the realised size would stall the device every step.
        noise_std: σ of the Gaussian noise added to the clipped sum.
    """

    step: int
    num_subgraphs: int
    noise_std: float


def make_optimizer(name: str, params, *, lr: float, betas: tuple[float, float] = (0.9, 0.999),
                   eps: float = 1e-8, momentum: float = 0.0) -> torch.optim.Optimizer:
    """``"sgd"`` or ``"adam"`` over ``params`` (DP-SGD / DP-Adam once the engine feeds it)."""
    check_choice("optimizer", name, ("sgd", "adam"))
    lr = check_positive("lr", lr)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum)
    return torch.optim.Adam(params, lr=lr, betas=betas, eps=eps)


class DPEngine:
    """Drives noisy steps of ``optimizer`` on ``model`` with per-subgraph clipping.

    Attribute ``occurrence_bound`` (1): for a Poisson-sampled step event, the most subgraphs
    of one step a unit's data may enter; its noise must cover that many clip norms (the
    code audit checks both against the event).

    Args:
        model: the model; every trainable module needs a ghost rule (``nn.Linear``,
            ``SelfScale`` or registered) and must take the subgraph index as the leading
            dimension of its input.
        optimizer: a ``torch.optim`` optimizer over the model's parameters (SGD → DP-SGD,
            Adam → DP-Adam).
        clip_norm: per-subgraph bound ``C`` or a sequence of `ClipGroup`.
        noise_multiplier: ``σ / C_eff`` (keyword-only; ``0`` only for a labelled
            non-private run).
        expected_batch_size: ``B_exp`` dividing the noisy sum.
        generator: ``torch.Generator`` for the noise (required unless ``secure_mode``).
            Seeded noise is for reproducible research only: whoever knows the seed can
            regenerate every draw and subtract it. Use ``secure_mode`` for a release.
        secure_mode: draw the noise from the OS CSPRNG (via
            `gnnprivacy.mechanisms.gaussian.gaussian_mechanism`); ``generator`` must
            then be ``None``.
        accountant: object with ``compose(event)``; receives ``step_event`` after every step.
        step_event: the privacy event of ONE step (e.g. a dp_accounting ``DpEvent``).
        on_step: optional callback ``on_step(StepInfo)`` after every executed step.
        update_clamp: optional bound applied coordinatewise to ``g̃ / B_exp`` (post-processing;
            spec 000's reference code clamps; off by default).
        sampling: how the batches are drawn (`SAMPLINGS`); required with
            ``accountant``, and checked against ``step_event`` (`check_sampling`).
        layout: ``"subgraph"`` (the closure's trainable layers take the subgraph index as
            leading dimension: `step`) or ``"rows"`` (PyG batches of stacked rows,
            driven by `PrivateTraining` through
            `release`).
        update: what applies the noisy gradient (default ``optimizer.step``).

    Raises:
        UnsupportedModuleError: a trainable module has no rule.
        InvalidParameterError: bad clip norm, noise multiplier or batch size.
    """

    occurrence_bound = 1

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, *,
                 clip_norm: float | Sequence[ClipGroup], noise_multiplier: float,
                 expected_batch_size: float, generator: torch.Generator | None = None,
                 secure_mode: bool = False, accountant: Any = None, step_event: Any = None,
                 on_step: Callable[[StepInfo], Any] | None = None,
                 update_clamp: float | None = None, sampling: str | None = None,
                 layout: str = "subgraph", update: Callable[[], Any] | None = None):
        self.model = model
        self.optimizer = optimizer
        self.layout = check_choice("layout", layout, ("subgraph", "rows"))
        self.capture = FlatCapture(model, fallback=False) if self.layout == "subgraph" else None
        self.groups = resolve_groups(model, clip_norm)
        self.noise_multiplier = check_real("noise_multiplier", noise_multiplier, low=0.0)
        self.expected_batch_size = check_positive("expected_batch_size", expected_batch_size)
        if generator is None and not secure_mode and self.noise_multiplier > 0:
            raise ValueError("DPEngine needs generator= (a torch.Generator) or secure_mode=True")
        if secure_mode and generator is not None:
            raise InvalidParameterError("generator", "None in secure mode (noise from the OS "
                                        "CSPRNG)", type(generator).__name__)
        if (accountant is None) != (step_event is None):
            raise ValueError("pass both accountant= and step_event=, or neither")
        self.sampling = check_sampling(sampling, step_event)
        self._update = update if update is not None else optimizer.step
        self.generator = generator
        self.secure_mode = bool(secure_mode)
        self.accountant = accountant
        self.step_event = step_event
        self.on_step = on_step
        self.update_clamp = None if update_clamp is None else check_positive(
            "update_clamp", update_clamp)
        self.steps_ = 0
        from gnnprivacy.training.dp import audit_hooks

        self._audit = audit_hooks.attach(self)   # a white-box code audit, when one is running

    @property
    def clip_norm(self) -> float:
        """``C_eff``: the bound on one subgraph's whole clipped gradient."""
        return effective_clip_norm(self.groups)

    @property
    def noise_std(self) -> float:
        """``σ = noise_multiplier · C_eff``, the std of each noise coordinate on the sum."""
        return self.noise_multiplier * self.clip_norm

    def clipped(self, closure: Callable[[], Tensor], *,
                row_mask: Tensor | None = None) -> tuple[dict[str, Tensor], int]:
        """The clipped per-subgraph gradient sum of the closure's batch (no noise):
        ``(parameter name -> sum, realised number of subgraphs)``."""
        if self.capture is None:
            raise RuntimeError("a layout='rows' engine is driven by release(), not by a closure")
        with self.capture.recording():
            losses = closure()
        clipped = clip_and_sum(self.capture, losses, self.groups, row_mask=row_mask)
        return clipped.sums, clipped.num_subgraphs

    def noisy_sum(self, closure: Callable[[], Tensor], *,
                  row_mask: Tensor | None = None) -> tuple[dict[str, Tensor], int]:
        """Clipped per-subgraph gradient sum plus one fresh noise draw (no update).

        Returns:
            (parameter name -> noisy sum, realised number of subgraphs).
        """
        sums, num = self.clipped(closure, row_mask=row_mask)
        return self._noised(sums, num), num

    def _noised(self, sums: dict[str, Tensor], num: int) -> dict[str, Tensor]:
        """Noise on the clipped sums; a running code audit adds its canaries to the sums
        first (clipped by the same code) and reads them back after the same noise. What
        leaves is the step's release (`audit_hooks.released`: a publication audit records
        it, or replays a recorded run's)."""
        if self._audit is None:
            return released("engine step", self.add_noise(sums))
        return released("engine step",
                        self._audit.observe(self.add_noise(self._audit.inject(sums)), num))

    def add_noise(self, sums: dict[str, Tensor]) -> dict[str, Tensor]:
        """``sums`` plus one fresh draw of ``N(0, σ² I)`` over all of them: the sums laid
        end to end in one flat vector, one ``randn`` of its length added in one operation,
        the result handed back as views per name (same distribution as a draw per
        parameter, a few operations instead of three per parameter)."""
        return noised_flat(sums, self.noise_std, generator=self.generator,
                           secure=self.secure_mode)

    def step(self, closure: Callable[[], Tensor], *, row_mask: Tensor | None = None) -> StepInfo:
        """One noisy step: clip, add noise, update, then account for it.

        Args:
            closure: runs the forward pass on the sampled batch and returns the per-subgraph
                losses ``(B,)`` (unreduced). An empty batch returns an empty tensor; the
                step still adds noise and is still accounted.
            row_mask: optional ``(B, R)`` mask of real rows of padded subgraphs.
        """
        noisy, num = self.noisy_sum(closure, row_mask=row_mask)
        return self.apply(noisy, num)

    def release(self, clipped_sums: dict[str, Tensor], num_subgraphs: int) -> StepInfo:
        """Noise, update and account for clipped sums computed elsewhere (the user-loop path
        of `PrivateTraining`): the same noise, update
        and ledger entry as `step`."""
        return self.apply(self._noised(clipped_sums, num_subgraphs), num_subgraphs)

    def apply(self, noisy: dict[str, Tensor], num: int) -> StepInfo:
        """Set ``g̃ / B_exp`` as the gradients, update, compose one step event. Sums laid
        end to end in one vector (as `add_noise` returns them) are scaled in one
        operation."""
        params = dict(named_tensors(module_tree(self.model)))
        flat = getattr(noisy, "flat", None)
        if flat is not None:
            scaled = flat / self.expected_batch_size
            if self.update_clamp is not None:
                scaled = scaled.clamp_(-self.update_clamp, self.update_clamp)
            grads = unflatten(scaled, noisy)
        else:
            grads = {}
            for name, total in noisy.items():
                grad = total / self.expected_batch_size
                if self.update_clamp is not None:
                    grad = grad.clamp(-self.update_clamp, self.update_clamp)
                grads[name] = grad
        for name, grad in grads.items():
            p = params[name]
            p.grad = grad if grad.dtype == p.dtype else grad.to(p.dtype)
        self._update()
        self.steps_ += 1
        if self.accountant is not None:
            self.accountant.compose(self.step_event)
        info = StepInfo(self.steps_, num, self.noise_std)
        if self.on_step is not None:
            self.on_step(info)
        return info

    def __repr__(self) -> str:
        return (f"DPEngine(clip_norm={self.clip_norm:g}, noise_multiplier="
                f"{self.noise_multiplier:g}, noise_std={self.noise_std:g}, expected_batch_size="
                f"{self.expected_batch_size:g}, optimizer={type(self.optimizer).__name__}, "
                f"steps={self.steps_})")
