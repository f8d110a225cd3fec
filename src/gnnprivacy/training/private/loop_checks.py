"""Two mistakes in a `make_private` loop that would otherwise pass without a word.

* **A loss reduced another way than declared.** The DP step reads each subgraph's gradient
  from the captured rows; under ``loss_reduction="mean"`` it multiplies them by the batch's
  size (the loss averaged over the subgraphs), under ``"sum"`` it takes them as they are. A
  loop that sums (``F.cross_entropy(..., reduction="sum")``) while ``make_private`` was told
  ``"mean"`` has every per-subgraph gradient scaled by the batch size, so the clipping cuts
  them B times harder than asked (the privacy bound still holds: each clipped contribution
  is at most the clip norm; the training is silently another one). `check_loss_reduction`
  reads the recorded operations of the first step (`guards.LoopTrace`) and refuses a loss
  whose reduction is plainly the other one: a loss function's ``reduction=`` argument, or a
  ``.sum()``/``.mean()`` of its per-example losses, handed to ``backward`` as it is (any
  other arithmetic on the way, e.g. ``/ batch.num_graphs``, gives no verdict).
* **Gradient clipping in the loop.** Under ``make_private`` the parameters' ``.grad`` holds
  no gradient between ``loss.backward()`` and ``optimizer.step()``: the DP step clips each
  subgraph's gradient itself (``max_grad_norm``) and sets the noised sum. So
  ``torch.nn.utils.clip_grad_norm_`` there does nothing at all. `GradSentinels` puts a zero
  tensor in every trainable parameter's ``.grad`` after each forward pass with gradients
  on; ``optimizer.step()`` refuses the step when one of them was changed in place (what
  ``clip_grad_norm_``, ``clip_grad_value_`` and ``p.grad.mul_`` do).
"""

from __future__ import annotations

from torch import Tensor, nn

from gnnprivacy.training.dp.flat_capture import SubgraphMixingError, tensors_of

__all__ = ["GradSentinels", "check_loss_reduction"]

#: torch.nn.functional losses with a ``reduction`` argument (default ``"mean"``)
LOSSES = frozenset({
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "poisson_nll_loss",
    "gaussian_nll_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
    "multilabel_margin_loss", "multi_margin_loss", "hinge_embedding_loss",
    "margin_ranking_loss", "cosine_embedding_loss", "triplet_margin_loss"})


def _reduction(op) -> str | None:
    """How the loss op ``op`` reduces: its ``reduction`` argument (the legacy
    ``size_average``/``reduce`` arguments: no verdict)."""
    if op.kwargs.get("size_average") is not None or op.kwargs.get("reduce") is not None:
        return None
    value = op.kwargs.get("reduction", "mean")
    return value if isinstance(value, str) else None


def _plain_reduction(ops, producer: dict, loss: Tensor) -> str | None:
    """``"sum"``/``"mean"`` when ``loss`` is plainly reduced that way, else ``None``."""
    op = producer.get(id(loss))
    if op is None:
        return None
    if op.name in LOSSES:
        reduction = _reduction(op)
        return reduction if reduction in ("sum", "mean") else None
    if op.name in ("sum", "mean") and not op.kwargs.get("dim") and len(op.args) <= 1:
        inner = [producer.get(id(t)) for t in tensors_of(op.args)]
        if len(inner) == 1 and inner[0] is not None and inner[0].name in LOSSES \
                and _reduction(inner[0]) == "none":
            return op.name
    return None


def check_loss_reduction(ops, losses, expected: str) -> None:
    """Refuse a loss handed to ``backward`` whose reduction is plainly not ``expected``.

    Args:
        ops: the recorded operations of a step (`guards.LoopTrace.ops`).
        losses: ``[(loss, grad)]`` handed to ``backward`` (`guards.LoopGuard._losses`).
        expected: ``make_private``'s ``loss_reduction``.

    Raises:
        SubgraphMixingError: naming both reductions and the fix.
    """
    producer = {}
    for op in ops:
        for t in tensors_of(op.result):
            producer[id(t)] = op
    for loss, _ in losses:
        found = _plain_reduction(ops, producer, loss)
        if found is not None and found != expected:
            raise SubgraphMixingError(
                f"the loss is reduced with {found!r} over the batch, but make_private was "
                f"told loss_reduction={expected!r}: each subgraph's gradient would be read "
                f"batch-size times too {'large' if found == 'sum' else 'small'} (clipped that "
                f"much {'harder' if found == 'sum' else 'less'} than max_grad_norm says); pass "
                f"loss_reduction={found!r} to make_private (or reduce the loss with "
                f"{expected!r})")


class GradSentinels:
    """Zero tensors in the trainable parameters' ``.grad`` after each forward pass with
    gradients enabled; `check` at ``optimizer.step()`` refuses one changed in place (see
    the module docstring). One zero tensor per parameter, allocated once."""

    def __init__(self, model: nn.Module):
        import torch

        self.params = [p for p in model.parameters() if p.requires_grad]
        self.zeros = [torch.zeros_like(p) for p in self.params]
        self.versions: list[int] | None = None
        self.handle = model.register_forward_hook(self._install)

    def _install(self, module, args, output) -> None:
        import torch

        if not torch.is_grad_enabled():
            return
        with torch._C.DisableTorchFunction():    # unseen by the loop guard's recording
            self._put()

    def _put(self) -> None:
        seen = self.versions
        for i, (p, z) in enumerate(zip(self.params, self.zeros)):
            if seen is not None and z._version != seen[i]:     # changed since: zero again
                z.zero_()
            p.grad = z
        self.versions = [z._version for z in self.zeros]

    def check(self) -> None:
        """Raises `SubgraphMixingError` when a sentinel still in ``.grad`` was changed."""
        import torch

        if self.versions is None:
            return
        with torch._C.DisableTorchFunction():
            changed = [p.grad is z and z._version != v
                       for p, z, v in zip(self.params, self.zeros, self.versions)]
        for changed_one in changed:
            if changed_one:
                raise SubgraphMixingError(
                    "p.grad was changed between loss.backward() and optimizer.step() (e.g. "
                    "torch.nn.utils.clip_grad_norm_ or clip_grad_value_): under make_private "
                    "p.grad holds no gradient there, the DP step clips each subgraph's "
                    "gradient itself and sets the noised sum; remove the call (the clip "
                    "bound is make_private's max_grad_norm)")

    def remove(self) -> None:
        self.handle.remove()
