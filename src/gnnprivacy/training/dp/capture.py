"""One forward and one backward: capture layer inputs and output gradients.

During a DP step every trainable parameter is temporarily frozen (``requires_grad=False``),
so autograd's backward computes only the gradients with respect to the layer *outputs*
``δ`` (and the input gradients needed to reach lower layers), never the weight gradients
themselves; the engine forms the clipped weight gradients from ``(a, δ)`` instead. This is
why a DP step costs about as much as a non-private one: the weight-gradient matrix product
is done exactly once, already scaled by the clip factors (see `.rules`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

from gnnprivacy.training.dp.rules import GhostRule, UnsupportedModuleError, rule_for

__all__ = ["ActivationCapture", "check_model"]


def check_model(model: nn.Module) -> list[tuple[str, nn.Module, GhostRule]]:
    """The trainable modules of ``model`` with their rules; raise for any unsupported one.

    Raises:
        UnsupportedModuleError: a module owns trainable parameters but has no rule, shares a
            parameter with another module, or is a batch norm (its batch statistics couple
            the subgraphs of a batch).
    """
    found, owner = [], {}
    for name, module in model.named_modules(remove_duplicate=False):
        if isinstance(module, _BatchNorm):
            raise UnsupportedModuleError(
                name, module, "batch normalisation mixes the subgraphs of a batch")
        own = [p for p in module.parameters(recurse=False) if p.requires_grad]
        if not own:
            continue
        rule = rule_for(module)
        if rule is None:
            raise UnsupportedModuleError(name, module)
        if any(owner.get(id(p), module) is not module for p in own):
            raise UnsupportedModuleError(name, module, "it shares (ties) a parameter with "
                                         "another module; call one module several times instead")
        owner.update((id(p), module) for p in own)
        if all(m is not module for _, m, _ in found):
            found.append((name, module, rule))
    return found


class ActivationCapture:
    """Forward hooks recording ``(input, output)`` of every trainable supported module.

    Args:
        model: the model; validated with `check_model`.

    Use `recording` around the forward pass, then `backprops` to get the
    output gradients ``δ`` from the summed per-subgraph losses.
    """

    def __init__(self, model: nn.Module):
        self.model = model
        self.layers = check_model(model)
        self.records: dict[nn.Module, list[tuple[Tensor, Tensor]]] = {}

    def _hook(self, module: nn.Module, args: tuple, output: Tensor) -> Tensor:
        if not isinstance(output, Tensor) or not args or not isinstance(args[0], Tensor):
            raise UnsupportedModuleError("", module, "it must map one tensor to one tensor")
        if not output.requires_grad:
            # Input and (frozen) weights need no grad: make the output a leaf we can
            # differentiate the loss with respect to.
            output = output.detach().requires_grad_(True)
        self.records.setdefault(module, []).append((args[0].detach(), output))
        return output

    @contextmanager
    def recording(self) -> Iterator[None]:
        """Freeze the parameters and record every call of the trainable modules."""
        self.records = {}
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        handles = [m.register_forward_hook(self._hook) for _, m, _ in self.layers]
        for p in trainable:
            p.requires_grad_(False)
        try:
            yield
        finally:
            for p in trainable:
                p.requires_grad_(True)
            for h in handles:
                h.remove()

    def backprops(self, losses: Tensor, row_mask: Tensor | None = None
                  ) -> list[tuple[str, nn.Module, GhostRule, list[Tensor], list[Tensor]]]:
        """Output gradients of every recorded call from ONE backward of ``losses.sum()``.

        Args:
            losses: per-subgraph losses ``(B,)``; term ``i`` must depend on subgraph ``i`` only.
            row_mask: optional ``(B, R)`` boolean mask of real rows; the output gradients of
                padded rows of 3-D activations of that shape are zeroed.

        Returns:
            ``(name, module, rule, inputs, output_grads)`` per recorded module.
        """
        num = losses.shape[0]
        entries = [(n, m, r, self.records[m]) for n, m, r in self.layers if m in self.records]
        outputs = [out for *_, recs in entries for _, out in recs]
        for name, _, _, recs in entries:
            for a, out in recs:
                if a.shape[0] != num or out.shape[0] != num:
                    raise ValueError(
                        f"layer {name!r} saw leading dimension {a.shape[0]} but there are "
                        f"{num} per-subgraph losses; every trainable layer must take one "
                        "block of rows per subgraph (leading dimension = subgraph)")
        if outputs and losses.requires_grad:
            grads = list(torch.autograd.grad(losses.sum(), outputs, allow_unused=True))
        else:  # empty batch, or no trainable layer reached: every gradient is zero
            grads = [None] * len(outputs)
        result, k = [], 0
        for name, module, rule, recs in entries:
            acts, backs = [], []
            for a, out in recs:
                g = grads[k] if grads[k] is not None else torch.zeros_like(out)
                k += 1
                if row_mask is not None and g.dim() == 3 and g.shape[:2] == row_mask.shape:
                    g = g * row_mask.unsqueeze(-1).to(g.dtype)
                acts.append(a)
                backs.append(g.detach())
            result.append((name, module, rule, acts, backs))
        self.records = {}
        return result
