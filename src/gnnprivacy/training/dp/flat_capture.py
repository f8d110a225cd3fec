"""Record a user's own forward and backward on a batch of disjoint subgraphs.

The user's loop is plain PyTorch (``out = model(batch.x, batch.edge_index)``,
``loss.backward()``, ``optimizer.step()``). `FlatCapture` hooks the model so that

* during a forward pass with gradients enabled, the trainable parameters are frozen
  (``requires_grad=False``): autograd then computes only the gradients with respect to layer
  *outputs*, never the (non-private) weight gradients, so a DP step costs about a
  non-private one;
* every call of a module that owns trainable parameters is recorded with its inputs, and a
  tensor hook stores ``δ``, the gradient of the loss with respect to its output, during the
  user's ``loss.backward()``;
* the root call's arguments are kept, so the engine can check that the forward used the
  batch it handed out, that no edge joins two subgraphs, and, once, that the model does not
  mix subgraphs (`FlatCapture.probe_independence`).

Modules that mix the rows of a batch (batch normalisation, attention across rows, graph-level
norms without a ``batch`` vector) are refused with a message naming the module and what to
use instead.
"""

from __future__ import annotations

import inspect
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from gnnprivacy.training.dp.flat_rules import (MAKE_PRIVATE_SUPPORTED, Call, Contribution, Probe,
                                                UnsupportedModuleError, exact_fallback,
                                                flat_probe_for, flat_rule_for)
from gnnprivacy.training.dp.segments import ROW_ELEMENTS, Segments

__all__ = ["BatchLayout", "FallbackWarning", "FlatCapture", "SubgraphMixingError", "check_model",
           "check_not_compiled", "module_tree", "named_tensors", "same_storage", "tensors_of",
           "trainable"]


class FallbackWarning(UserWarning):
    """A module's per-subgraph gradients come from the exact (slow) fallback: announced
    when the capture is built, and again with the measured cost after the first step."""


class SubgraphMixingError(UnsupportedModuleError):
    """The model or the batch lets one subgraph's data reach another subgraph's rows."""

    def __init__(self, message: str):
        ValueError.__init__(self, message)
        self.path, self.module_type = "", ""


_NO_CONTEXT = nullcontext()


def _refused(path: str, module: nn.Module, why: str | None, *, fallback: bool = True
             ) -> UnsupportedModuleError:
    """A refusal of the capture: the reason and the documented modules (those of
    ``make_private`` when the exact fallback is on, else `DPEngine`'s)."""
    return UnsupportedModuleError(path, module, why,
                                  supported=MAKE_PRIVATE_SUPPORTED if fallback else None)


@dataclass
class BatchLayout:
    """What the engine knows about the batch it handed out.

    Attributes:
        x: the batch's feature matrix (identity-checked against the forward's arguments).
        edge_index: ``(2, E_b)`` local edges.
        batch: ``(N_b,)`` subgraph of every row, non-decreasing.
        num_subgraphs: ``B``.
        data: the yielded batch object itself.
        edges_version: ``edge_index._version`` at the draw when the sampler guarantees that
            every edge of its batches lies inside one subgraph (then `check_inputs` skips
            this very tensor while it is unchanged), else ``None``.
    """

    x: Tensor | None
    edge_index: Tensor
    batch: Tensor
    num_subgraphs: int
    data: object = None
    _ids: Tensor | None = None
    edges_version: int | None = None
    #: the built-in trainers' layout: every trained layer's leading dimension is the
    #: subgraph (rows ``(B, R, ...)``), `for_subgraphs`
    padded: bool = False
    _segments: dict = field(default_factory=dict)

    @classmethod
    def for_subgraphs(cls, num: int, device) -> BatchLayout:
        """The layout of `DPEngine`'s closures: one leading row per subgraph."""
        ids = torch.arange(num, device=device)
        return cls(None, torch.zeros(2, 0, dtype=torch.long, device=device), ids, int(num),
                   padded=True)
    _loops: Tensor | None = None

    @property
    def subgraph_ids(self) -> Tensor:
        """``arange(B)``: the subgraph of each row of a one-row-per-subgraph output."""
        if self._ids is None:
            self._ids = torch.arange(self.num_subgraphs, device=self.batch.device)
        return self._ids

    def segments(self, rows: int, *, edge: bool, loops: bool = False) -> Segments | None:
        """The `Segments` of an output with ``rows`` leading rows (nodes, subgraphs or, for
        edge modules, edges), one object per kind and batch (every layer on those rows
        shares what it derives); ``None`` when the count fits nothing. ``loops``: the rows of
        a convolution that re-adds self-loops (`loops_readded`, the only reading: with a loop
        on every node the count equals the edges', not the order)."""
        if self.padded:
            kind = "subgraphs" if rows == self.num_subgraphs else None
        elif edge and loops:
            kind = "loops" if rows == self.loops_readded().numel() else None
        elif edge:
            kind = ("edges" if rows == self.num_edges else
                    "edges+loops" if rows == self.num_edges + self.num_rows else None)
        else:
            kind = ("nodes" if rows == self.num_rows else
                    "subgraphs" if rows == self.num_subgraphs else None)
        if kind is None:
            return None
        found = self._segments.get(kind)
        if found is None:
            b = self.num_subgraphs
            if kind == "subgraphs":
                found = Segments.regular(b, 1, self.batch.device)
            elif kind == "nodes":
                found = Segments(self.batch, b)
            elif kind == "loops":
                found = Segments(self.loops_readded(), b)
            else:
                dst = self.batch[self.edge_index[1]]
                found = Segments(dst if kind == "edges" else torch.cat([dst, self.batch]), b)
            self._segments[kind] = found
        return found

    @property
    def num_rows(self) -> int:
        return int(self.batch.numel())

    def loops_readded(self) -> Tensor:
        """Subgraph of each row of the batch's edge list after PyG's self-loop handling
        (``add_remaining_self_loops``, and ``remove_self_loops`` + ``add_self_loops`` in
        GATConv): the edges that are not self-loops, in order, then one loop per node. A graph
        whose nodes all carry a self-loop has as many such rows as edges, in another order."""
        if self._loops is None:
            ei = self.edge_index
            keep = ei[0] != ei[1]
            self._loops = torch.cat([self.batch[ei[1][keep]], self.batch])
        return self._loops

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.shape[1])


def _mixing_reason(module: nn.Module) -> str | None:
    """Why ``module`` mixes subgraphs (and what to use instead), or ``None``."""
    from torch.nn.modules.batchnorm import _BatchNorm
    from torch.nn.modules.instancenorm import _InstanceNorm

    name = type(module).__name__
    if isinstance(module, _BatchNorm) or name in ("BatchNorm", "DiffGroupNorm", "HeteroBatchNorm"):
        return ("batch normalisation computes statistics over every row of the batch, so one "
                "subgraph's data reaches all others; use LayerNorm (torch, or PyG's "
                "LayerNorm(mode='node')) or PyG's GraphNorm/LayerNorm with batch=batch.batch")
    if isinstance(module, _InstanceNorm):
        return ("torch's instance normalisation treats the node rows as one instance; use "
                "LayerNorm, or PyG's InstanceNorm with batch=batch.batch")
    if isinstance(module, nn.RNNBase):
        return ("a recurrent layer returns a tuple and has no per-subgraph rule (PyG's "
                "JumpingKnowledge('lstm') runs one over the layers' outputs); use "
                "JumpingKnowledge('cat') or JumpingKnowledge('max'), or weigh the layers with "
                "a Linear")
    if isinstance(module, (nn.MultiheadAttention, nn.TransformerEncoderLayer,
                           nn.TransformerDecoderLayer, nn.Transformer)):
        return ("attention across the rows of a batch mixes subgraphs; attend along the "
                "subgraphs' edges instead (PyG GATConv or TransformerConv over "
                "batch.edge_index)")
    return None


def _compiled(module: nn.Module) -> str | None:
    """How ``module`` is compiled with ``torch.compile``, or ``None``."""
    if type(module).__name__ == "OptimizedModule" and hasattr(module, "_orig_mod"):
        return "it is the torch.compile wrapper of a model (torch.compile(model))"
    if getattr(module, "_compiled_call_impl", None) is not None:
        return "it was compiled in place (module.compile())"
    forward = module.__dict__.get("forward")
    if forward is not None and hasattr(forward, "_torchdynamo_orig_callable"):
        return "its forward was replaced by torch.compile(module.forward)"
    return None


def check_not_compiled(model: nn.Module) -> None:
    """Refuse a model compiled with ``torch.compile``, or with a compiled part: the per-subgraph
    capture hooks its modules' calls (inputs, output gradients, parameters frozen during the
    forward) and the loop guard records the step's operations, which compiled code bypasses
    or fails on deep inside the compiler.

    Raises:
        UnsupportedModuleError: naming the compiled module and what to pass instead.
    """
    for name, module in model.named_modules():
        how = _compiled(module)
        if how is not None:
            raise _refused(name, module, f"{how}; make_private needs the module itself, "
                           "uncompiled (pass model._orig_mod, or compile a copy for inference "
                           "after training)")


def _needs_batch_vector(module: nn.Module) -> bool:
    """PyG normalisations that normalise per graph only when given ``batch``."""
    if not type(module).__module__.startswith("torch_geometric.nn.norm"):
        return False
    if getattr(module, "mode", "graph") == "node":
        return False
    return "batch" in inspect.signature(type(module).forward).parameters


def _edge_level(model: nn.Module) -> dict[int, bool]:
    """ids of modules that map edge rows (GINEConv.lin, ``lin_edge`` of attention convs) ->
    whether their convolution re-adds self-loops (``add_self_loops``: GATConv, GATv2Conv),
    which reorders the rows (`BatchLayout.loops_readded`)."""
    out = {}
    for module in model.modules():
        if type(module).__name__ == "GINEConv" and getattr(module, "lin", None) is not None:
            out[id(module.lin)] = False
        edge = getattr(module, "lin_edge", None)
        if isinstance(edge, nn.Module):
            out[id(edge)] = bool(getattr(module, "add_self_loops", False))
    return out


def _kind(value, batch_ids: set[int]):
    """What a module's input is, for `FlatCapture.call_signature`."""
    if isinstance(value, Tensor):
        return ("batch" if id(value) in batch_ids else "grad" if value.requires_grad
                else "tensor", value.dim())
    return type(value).__name__


def _detach(value):
    if isinstance(value, Tensor):
        return value.detach()
    if isinstance(value, (tuple, list)):
        return type(value)(_detach(v) for v in value)
    if isinstance(value, dict):
        return {k: _detach(v) for k, v in value.items()}
    return value


class _Record:
    __slots__ = ("args", "kwargs", "shape", "dtype", "device", "grad", "rng", "extra")

    def __init__(self, args, kwargs, output: Tensor, rng, extra=None):
        self.args, self.kwargs, self.rng = args, kwargs, rng
        self.extra = extra if extra is not None else {}    # what a rule's probe kept
        self.shape, self.dtype, self.device = output.shape, output.dtype, output.device
        self.grad: Tensor | None = None


class FlatCapture(Probe):
    """Hooks on ``model`` for per-subgraph clipping of a user-driven forward/backward.

    Args:
        model: any ``nn.Module``; modules with trainable parameters of their own get a
            registered rule (`.flat_rules`) or the exact fallback.
        expected_subgraphs: the plan's expected subgraphs per step, for the fallback's
            announcement.
        fallback: give modules without a rule the exact fallback (``make_private``); with
            ``False`` they are refused (`DPEngine`, `check_model`).

    Raises:
        UnsupportedModuleError: a module mixes subgraphs, ties a parameter to another
            module, has lazily initialised parameters, is a cached ``GCNConv``, or (without
            ``fallback``) has no rule.
    """

    def __init__(self, model: nn.Module, *, expected_subgraphs: float | None = None,
                 fallback: bool = True):
        self.model = model
        self.layers: list[tuple[str, nn.Module, Callable]] = []
        owner: dict[int, nn.Module] = {}
        check_not_compiled(model)
        for name, module in model.named_modules(remove_duplicate=False):
            why = _mixing_reason(module)
            if why is not None:
                raise _refused(name, module, why, fallback=fallback)
            if type(module).__name__ == "GCNConv" and getattr(module, "cached", False):
                raise _refused(name, module, "cached=True reuses the first "
                                             "batch's normalisation for every batch; build it "
                                             "with cached=False", fallback=fallback)
            own = [p for p in module.parameters(recurse=False) if p.requires_grad]
            if not own:
                continue
            if any(isinstance(p, nn.parameter.UninitializedParameter) for p in own):
                raise _refused(name, module, "its parameters are lazily "
                                             "initialised; give in_channels explicitly or run "
                                             "one forward pass before make_private",
                               fallback=fallback)
            if any(owner.get(id(p), module) is not module for p in own):
                raise _refused(name, module, "it shares (ties) a parameter with "
                                             "another module; call one module several times "
                                             "instead", fallback=fallback)
            owner.update((id(p), module) for p in own)
            rule = flat_rule_for(module)
            if rule is None and not fallback:
                raise _refused(name, module, None, fallback=False)
            if all(m is not module for _, m, _ in self.layers):
                self.layers.append((name, module, rule or exact_fallback))
        self._needs_batch = [(n, m) for n, m in model.named_modules() if _needs_batch_vector(m)]
        self._fallback_timed = False
        slow = [f"{n or '<root>'!r} ({type(m).__name__})" for n, m, r in self.layers
                if r is exact_fallback]
        if slow:
            per_step = ("" if expected_subgraphs is None else
                        f", about {expected_subgraphs:,.0f} per step at this plan's batch size")
            warnings.warn(
                f"module {', '.join(slow)} has no per-subgraph gradient rule: every DP step "
                "computes its parameters' per-subgraph gradients with the exact fallback, one "
                f"vector-Jacobian product of the module per subgraph{per_step} (each about "
                "one backward pass of the module); the first step reports the measured "
                "cost. The modules with rules are listed in docs/own-model.md",
                FallbackWarning, stacklevel=4)
        self._edge_modules = _edge_level(model)
        #: trained parameter elements: with the rows, what materialising costs (`per_row`)
        self._numel = sum(p.numel() for _, m, _ in self.layers
                          for p in m.parameters(recurse=False) if p.requires_grad)
        self.records: dict[nn.Module, list[_Record]] = {}
        self.root_calls: list[tuple[tuple, dict]] = []
        self.output_rows: list[int | None] = []     # rows of each recorded root output
        self._frozen: list[nn.Parameter] = []
        self._active = False
        self._replaying = False
        self._handles: list = []
        self._open: dict[nn.Module, dict] = {}    # probed calls in progress: their extras
        #: a context for the hooks' own tensor operations and for the model's forward, set by
        #: whoever traces the loop (the loop guard's `LoopTrace.muted`: kept out of the step's
        #: signature, and not traced at all on the later, light steps)
        self.quiet = None
        self._sections: list = []
        self._index = {id(m): i for i, (_, m, _) in enumerate(self.layers)}
        #: ids of the current batch's tensors (`call_signature` tells them apart)
        self.batch_ids: set[int] = set()
        self.calls: list[tuple] = []

    # ------------------------------------------------------------------ hooks
    def attach(self) -> None:
        """Register the hooks (idempotent)."""
        if self._handles:
            return
        root = self.model
        self._handles.append(root.register_forward_pre_hook(self._root_pre, with_kwargs=True))
        self._handles.append(root.register_forward_hook(self._root_post, always_call=True))
        for _, module, rule in self.layers:
            probe = None if rule is exact_fallback else flat_probe_for(module)
            if probe is not None:      # a probed rule may fall back: the RNG state too
                self._handles.append(module.register_forward_pre_hook(self._open_call))
                self._handles.extend(probe(module, self))
            elif rule is exact_fallback:
                self._handles.append(module.register_forward_pre_hook(self._rng_pre))
            self._handles.append(module.register_forward_hook(self._hook, with_kwargs=True))
        for _, module in self._needs_batch:
            self._handles.append(module.register_forward_pre_hook(self._batch_pre,
                                                                  with_kwargs=True))

    @contextmanager
    def recording(self) -> Iterator[None]:
        """`DPEngine`'s forward pass: the hooks on while it runs (the model carries none
        between steps), the records of the last one forgotten."""
        self.reset()
        self.attach()
        try:
            yield
        finally:
            self.detach()

    def backward(self, losses: Tensor, row_mask: Tensor | None = None) -> None:
        """``δ`` of every recorded call from one backward of ``losses.sum()`` (`DPEngine`:
        term ``i`` the loss of subgraph ``i``); with ``row_mask`` ``(B, R)``, the output
        gradients of padded rows of ``(B, R, ...)`` outputs are zeroed."""
        if losses.requires_grad:
            losses.sum().backward()
        if row_mask is None:
            return
        for recs in self.records.values():
            for rec in recs:
                g = rec.grad
                if g is not None and g.dim() == 3 and g.shape[:2] == row_mask.shape:
                    rec.grad = g * row_mask.unsqueeze(-1).to(g.dtype)

    def detach(self) -> None:
        """Remove every hook."""
        for h in self._handles:
            h.remove()
        self._handles = []

    def _muted(self):
        return self.quiet if self.quiet is not None else _NO_CONTEXT

    def _root_pre(self, module, args, kwargs):
        if self._replaying:
            self._active = False
            return None
        section = self.quiet
        if section is not None:     # the model's forward: out of the loop trace's signature
            section.__enter__()
        self._sections.append(section)
        if not torch.is_grad_enabled():
            self._active = False
            return None
        self._active = True
        self.root_calls.append((args, kwargs))
        with self._muted():
            self._frozen = [p for _, p in trainable(self.model)]
            for p in self._frozen:
                p.requires_grad_(False)
        return None

    def _root_post(self, module, args, output):
        with self._muted():
            if self._active and not self._replaying:
                self.output_rows.append(output.shape[0] if isinstance(output, Tensor)
                                        and output.dim() else None)
            for p in self._frozen:
                p.requires_grad_(True)
        self._frozen = []
        if not self._replaying and self._sections:
            section = self._sections.pop()
            if section is not None:
                section.__exit__(None, None, None)
        return None

    def _rng_pre(self, module, args):
        if self._active and not self._replaying:
            with self._muted():
                self._pending_rng = _rng_state(module)
        return None

    def _open_call(self, module, args):
        """A probed module's call begins: its extras, and the RNG state (`_rng_pre`)."""
        if self._active and not self._replaying:
            self._open[module] = {}
            self._rng_pre(module, args)
        return None

    def keep(self, module: nn.Module, key: str, value) -> None:
        """`Probe.keep`: store ``value`` for the call of ``module`` in progress."""
        extra = self._open.get(module)
        if extra is not None and self._active and not self._replaying:
            with self._muted():
                extra[key] = _detach(value)

    def watch(self, module: nn.Module, key: str, tensor: Tensor) -> Tensor:
        """`Probe.watch`: the gradient with respect to ``tensor`` goes to the call's
        ``extra[key]`` (a leaf is made when ``tensor`` needs none, as for layer outputs)."""
        extra = self._open.get(module)
        if extra is None or not self._active or self._replaying or not isinstance(tensor, Tensor):
            return tensor
        with self._muted():
            if not tensor.requires_grad:
                tensor = tensor.detach().requires_grad_(True)

            def store(grad):
                extra[key] = grad.detach() if key not in extra else extra[key] + grad.detach()

            tensor.register_hook(store)
        return tensor

    def _batch_pre(self, module, args, kwargs):
        if not self._active or self._replaying:
            return None
        given = kwargs.get("batch", args[1] if len(args) > 1 else None)
        if given is None:
            path = next(n for n, m in self._needs_batch if m is module)
            raise SubgraphMixingError(
                f"module {path!r} ({type(module).__name__}) normalises over all rows of the "
                "batch unless it is given the subgraph vector: call it with "
                "batch=batch.batch (or use mode='node')")
        return None

    def _hook(self, module, args, kwargs, output):
        if not self._active or self._replaying:
            return None
        with self._muted():
            return self._record(module, args, kwargs, output)

    def _record(self, module, args, kwargs, output):
        if not isinstance(output, Tensor):
            name = next(n for n, m, _ in self.layers if m is module)
            raise _refused(name, module, "the DP engine needs modules with "
                                         "trainable parameters to return one tensor")
        if not output.requires_grad:
            output = output.detach().requires_grad_(True)
        rng = getattr(self, "_pending_rng", None)
        self._pending_rng = None
        rec = _Record(_detach(args), _detach(kwargs), output, rng, self._open.pop(module, None))
        self.records.setdefault(module, []).append(rec)
        ids = self.batch_ids
        self.calls.append((self._index[id(module)],
                           tuple(_kind(v, ids) for v in args),
                           tuple((k, _kind(v, ids)) for k, v in kwargs.items())))

        def store(grad, rec=rec):
            rec.grad = grad.detach() if rec.grad is None else rec.grad + grad.detach()

        output.register_hook(store)
        return output

    def call_signature(self) -> tuple:
        """The trained modules' calls since the last `reset`: each module's index with the
        kind of each input (a tensor of the batch itself, one that needs a gradient, another
        tensor, or the type of a value); part of the loop guard's step signature (the
        model's forward is not traced on later steps)."""
        return tuple(self.calls)

    def reset(self) -> None:
        """Forget the recorded calls (after a step)."""
        self.calls = []
        self.records = {}
        self.root_calls = []
        self._open = {}
        self.output_rows = []

    # ------------------------------------------------------------------ checks
    def check_inputs(self, layout: BatchLayout) -> None:
        """Every recorded forward used the batch ``layout`` describes, with its edges inside
        subgraphs.

        Raises:
            SubgraphMixingError: a forward did not receive the batch's tensors, or an
                ``edge_index`` argument joins two subgraphs.
        """
        if not self.root_calls:
            raise SubgraphMixingError(
                "optimizer.step() found no forward pass of the model with gradients enabled "
                "since the last step; run out = model(batch.x, batch.edge_index) and "
                "loss.backward() first")
        own = (layout.x, layout.edge_index, layout.batch)
        for args, kwargs in self.root_calls:
            values = list(args) + list(kwargs.values())
            tensors = [t for v in values for t in tensors_of(v)]
            if not any(v is layout.data for v in values) and not any(
                    same_storage(t, o) for t in tensors for o in own):
                if len(self.root_calls) > 1:      # the batch's forward, and another one
                    raise SubgraphMixingError(
                        "the loop ran the model with gradients enabled on other data than the "
                        "batch from pt.loader between the draw and optimizer.step() (e.g. a "
                        "full-graph pass to monitor accuracy): the DP step cannot tell its "
                        "gradients apart; run such passes after optimizer.step(), before the "
                        "next batch is drawn")
                raise SubgraphMixingError(
                    "the forward pass did not use the batch from pt.loader (none of its x, "
                    "edge_index or batch tensors reached the model): every step must train on "
                    "the batch the loader yielded, which is what the accountant charges for")
            for t in tensors:
                if (t is layout.edge_index and layout.edges_version is not None
                        and t._version == layout.edges_version):
                    continue                 # the sampler's own edges, unchanged since the draw
                if (t.dim() == 2 and t.shape[0] == 2 and not t.is_floating_point()
                        and t.numel() and not same_storage(t, layout.x)):
                    _check_edges(t, layout)

    def check_output_rows(self, layout: BatchLayout) -> None:
        """Every recorded forward returned one row per subgraph (graph-level tasks).

        Raises:
            SubgraphMixingError: an output with another number of rows (one per node).
        """
        for rows in self.output_rows:
            if rows is not None and rows != layout.num_subgraphs:
                raise SubgraphMixingError(
                    f"the model's output has {rows} rows, but the batch has "
                    f"{layout.num_subgraphs} graphs ({layout.num_rows} nodes): a graph-level "
                    "model returns one row per graph; pool the node rows with "
                    "batch=batch.batch (e.g. global_mean_pool(h, batch.batch))")

    def probe_independence(self, layout: BatchLayout) -> None:
        """Re-run the first recorded forward twice in eval mode, once with one subgraph's
        features perturbed, and check that no other subgraph's output moved.

        Also checks, when a module with trainable parameters recorded no call, that the
        forward does not use them: a parent that calls ``child.forward(x)`` directly (PyG's
        ``TAGConv``, ``ChebConv`` beyond its first hops) bypasses the hooks, and those
        parameters would get no gradient at all.

        Raises:
            SubgraphMixingError: naming the subgraphs and the largest change.
            UnsupportedModuleError: a module's parameters are used but its calls were not
                seen.
        """
        if self.root_calls:
            self._check_unseen_calls(*self.root_calls[0])
        if layout.num_subgraphs < 2 or not self.root_calls:
            return
        args, kwargs = self.root_calls[0]
        counts = torch.bincount(layout.batch, minlength=layout.num_subgraphs)
        target = int(counts.argmax())
        x2 = layout.x.clone()
        rows = layout.batch == target
        if x2.is_floating_point():          # a fixed, local stream: no global RNG is touched
            gen = torch.Generator(device=x2.device).manual_seed(0)
            x2[rows] = x2[rows] + torch.randn(x2[rows].shape, dtype=x2.dtype, generator=gen,
                                              device=x2.device) * (1.0 + x2.abs().mean())
        else:
            x2[rows] = x2[rows].flip(0) if rows.sum() > 1 else x2[rows] + 1
        swapped_args, swapped_kwargs = _swap(args, kwargs, layout, x2)
        with self._replay_in_eval(), torch.no_grad():
            before = self.model(*args, **kwargs)
            after = self.model(*swapped_args, **swapped_kwargs)
        if not isinstance(before, Tensor):
            return
        segs = layout.segments(before.shape[0] if before.dim() else -1, edge=False)
        seg = None if segs is None else segs.seg
        if seg is None:
            raise SubgraphMixingError(
                f"the model's output has {before.shape[0]} rows, but the batch has "
                f"{layout.num_rows} node rows and {layout.num_subgraphs} subgraphs: return one "
                "row per node (index batch.center for the loss) or one row per subgraph")
        other = seg != target
        moved = (before[other] - after[other]).abs()
        if moved.numel() and float(moved.max()) > 1e-5 * (1.0 + float(before.abs().max())):
            where = int(seg[other][moved.flatten(1).amax(1).argmax()])
            raise SubgraphMixingError(
                f"the model mixes subgraphs: changing subgraph {target}'s features changed the "
                f"output of subgraph {where} by {float(moved.max()):.3g}. Something in the "
                "forward pass combines rows across the batch (a global mean or pooling "
                "without batch=batch.batch, a normalisation over all rows, ...); node-level DP "
                "needs each subgraph's output to depend on that subgraph only")

    @contextmanager
    def _replay_in_eval(self):
        """The model in eval mode with the capture's hooks off (restored after)."""
        was_training = self.model.training
        self.model.eval()
        self._replaying = True
        try:
            yield
        finally:
            self._replaying = False
            self.model.train(was_training)

    def _check_unseen_calls(self, args, kwargs) -> None:
        unseen = [(n, m) for n, m, _ in self.layers if m not in self.records]
        owned = [(p, n, m) for n, m in unseen for p in m.parameters(recurse=False)
                 if p.requires_grad]
        if not owned:
            return
        with self._replay_in_eval(), torch.enable_grad():
            out = self.model(*args, **kwargs)
            if not isinstance(out, Tensor) or not out.requires_grad:
                return
            grads = torch.autograd.grad(out.sum(), [p for p, _, _ in owned],
                                        allow_unused=True)
        for g, (_, name, module) in zip(grads, owned):
            if g is not None:
                raise UnsupportedModuleError(
                    name, module, "its parameters are used in the forward pass but the "
                    "module's own calls were not seen (a parent calls its .forward() "
                    "directly, as PyG's TAGConv and ChebConv do), so they would get no "
                    "gradient; call the module itself (module(x)) or use another layer")

    # ------------------------------------------------------------------ gradients
    def contributions(self, layout: BatchLayout) -> dict[nn.Parameter, Contribution]:
        """Per-parameter `Contribution` from the recorded calls, for the captured ``δ`` as
        they are (every rule is linear in ``δ``: a caller whose loss is a mean scales the
        norms and the clip factors itself, as `make_private` does).

        Args:
            layout: the batch.

        Raises:
            SubgraphMixingError: a recorded output's rows match neither the nodes, the
                subgraphs nor (for edge modules) the edges of the batch.
        """
        out: dict[nn.Parameter, Contribution] = {}
        start, fallback_s = time.perf_counter(), {}
        for name, module, rule in self.layers:
            recs = self.records.get(module, [])
            calls = []
            for rec in recs:
                segs = layout.segments(rec.shape[0] if rec.shape else -1,
                                       edge=id(module) in self._edge_modules,
                                       loops=self._edge_modules.get(id(module), False))
                if segs is None:
                    raise SubgraphMixingError(_rows_fit_nothing(name, module, rec, layout))
                if segs.per_row is None and segs.width is None:
                    segs.per_row = segs.rows * self._numel <= ROW_ELEMENTS
                grad = rec.grad if rec.grad is not None else torch.zeros(
                    rec.shape, dtype=rec.dtype, device=rec.device)
                calls.append(Call(rec.args, rec.kwargs, grad, segs, {"rng": rec.rng},
                                  dict(rec.extra)))
            if not calls:
                continue
            found = None if rule is exact_fallback else rule(module, calls)
            if found is None:
                began = time.perf_counter()
                found = self._replay(module, calls)
                fallback_s[f"{name or '<root>'!r} ({type(module).__name__})"] = (
                    time.perf_counter() - began)
            out.update(found)
        if fallback_s and not self._fallback_timed:
            self._fallback_timed = True
            rest = time.perf_counter() - start - sum(fallback_s.values())
            each = ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in fallback_s.items())
            warnings.warn(
                f"exact fallback on the first DP step ({layout.num_subgraphs} subgraphs): "
                f"{each}, against {rest * 1e3:.0f} ms for the rules of every other module; "
                "every step pays about this (it grows with the number of subgraphs)",
                FallbackWarning, stacklevel=2)
        return out

    def _replay(self, module: nn.Module, calls: list[Call]) -> dict[nn.Parameter, Contribution]:
        """The exact fallback with the capture's hooks off and each call's RNG state back."""
        for call in calls:
            state = call.cache.get("rng")
            call.cache["context"] = (lambda state=state: _restored_rng(state))
        self._replaying = True
        try:
            return exact_fallback(module, calls)
        finally:
            self._replaying = False


def _rows_fit_nothing(name: str, module: nn.Module, rec: _Record, layout: BatchLayout) -> str:
    rows = rec.shape[0] if rec.shape else "no"
    if layout.padded:
        return (f"layer {name!r} saw leading dimension {rows} but there are "
                f"{layout.num_subgraphs} per-subgraph losses; every trainable layer must take "
                "one block of rows per subgraph (leading dimension = subgraph)")
    return (f"module {name!r} ({type(module).__name__}) produced {rows} rows, but the batch "
            f"has {layout.num_rows} node rows, {layout.num_subgraphs} subgraphs and "
            f"{layout.num_edges} edges: every row of a trained layer must belong to one "
            "subgraph of the batch")


def check_model(model: nn.Module) -> list[tuple[str, nn.Module, Callable]]:
    """The trainable modules of ``model`` with their rules, as `DPEngine` trains them;
    raise for any module without a rule, one that mixes subgraphs (batch normalisation)
    or one that ties a parameter to another module.

    Raises:
        UnsupportedModuleError: naming the module, why, and the supported modules.
    """
    return FlatCapture(model, fallback=False).layers


def module_tree(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """``list(model.named_modules())`` (each module once, in that order) without a generator
    per level: the DP step walks the model several times."""
    out: list[tuple[str, nn.Module]] = []
    seen: set[int] = set()

    def visit(prefix: str, module: nn.Module) -> None:
        seen.add(id(module))
        out.append((prefix, module))
        for name, child in module._modules.items():
            if child is not None and id(child) not in seen:
                visit(f"{prefix}.{name}" if prefix else name, child)

    visit("", model)
    return out


def named_tensors(tree: list[tuple[str, nn.Module]], kind: str = "_parameters"
                  ) -> list[tuple[str, Tensor]]:
    """``named_parameters()`` (``kind="_parameters"``) or ``named_buffers()``
    (``"_buffers"``) of the modules of `module_tree`, each tensor once, as torch names them."""
    out: list[tuple[str, Tensor]] = []
    seen: set[int] = set()
    for prefix, module in tree:
        for name, t in getattr(module, kind).items():
            if t is not None and id(t) not in seen:
                seen.add(id(t))
                out.append((f"{prefix}.{name}" if prefix else name, t))
    return out


def trainable(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """The ``(name, parameter)`` pairs of ``model`` that require gradients."""
    return [(n, p) for n, p in named_tensors(module_tree(model)) if p.requires_grad]


def tensors_of(value) -> list[Tensor]:
    """Every tensor inside ``value``: a tensor, nested tuples, lists and dicts, or a PyG
    ``Data``/``Batch`` (its stores' tensors); anything else holds none."""
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors_of(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors_of(v)]
    stores = getattr(value, "to_dict", None)
    if callable(stores) and hasattr(value, "edge_index"):
        return [t for t in value.to_dict().values() if isinstance(t, Tensor)]
    return []


def same_storage(a: Tensor, b: Tensor) -> bool:
    """Whether ``a`` and ``b`` are views of one memory (both non-empty, on one device)."""
    return a is b or (a.device == b.device and a.untyped_storage().data_ptr()
                      == b.untyped_storage().data_ptr() and a.numel() and b.numel())


def _check_edges(edge_index: Tensor, layout: BatchLayout) -> None:
    n = layout.num_rows
    if int(edge_index.max()) >= n or int(edge_index.min()) < 0:
        raise SubgraphMixingError(
            f"an edge_index passed to the model refers to node {int(edge_index.max())}, but "
            f"the batch has {n} rows: use batch.edge_index (local ids)")
    src, dst = layout.batch[edge_index[0]], layout.batch[edge_index[1]]
    bad = (src != dst).nonzero().flatten()
    if bad.numel():
        e = int(bad[0])
        raise SubgraphMixingError(
            f"edge {e} of the edge_index passed to the model joins subgraph {int(src[e])} to "
            f"subgraph {int(dst[e])} ({bad.numel()} such edges): messages would carry one "
            "subgraph's data into another, which per-subgraph clipping cannot bound")


def _swap(args, kwargs, layout: BatchLayout, x2: Tensor):
    """``args``/``kwargs`` with the batch's feature matrix (or the batch object) replaced."""
    def sub(v):
        if isinstance(v, Tensor) and same_storage(v, layout.x) and v.shape == layout.x.shape:
            return x2.to(v.dtype)
        if v is layout.data and v is not None:
            copy = v.clone()
            copy.x = x2
            return copy
        return v
    return tuple(sub(a) for a in args), {k: sub(v) for k, v in kwargs.items()}


def _rng_state(module: nn.Module) -> dict:
    """CPU (and current CUDA device) RNG state, so a replay draws the same dropout masks."""
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


@contextmanager
def _restored_rng(state):
    devices = [torch.cuda.current_device()] if state and "cuda" in state else []
    with torch.random.fork_rng(devices=devices):
        if state:
            torch.set_rng_state(state["cpu"])
            if "cuda" in state:
                torch.cuda.set_rng_state(state["cuda"])
        yield
