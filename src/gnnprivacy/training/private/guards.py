"""Checks of the user's whole loop body, not only the model: what `make_private` verifies
about the code between drawing a batch and ``optimizer.step()``.

The engine clips each subgraph's gradient, which it assembles from the rows of every trained
layer's inputs and output gradients that belong to that subgraph. That bounds one node's
influence only when those rows depend on nothing but the subgraph's own data. The model probe
(`FlatCapture.probe_independence`) checks the model alone; a loop can still break the bound
around it: mixing the batch before the model (``model(b.x - b.x.mean(0), ...)``), a loss
that mixes subgraphs, a teacher run on the whole graph, a buffer that records the data, a
parameter outside the model trained by another optimizer, train-mode batch statistics, a
forward that returns a tuple. `LoopGuard` checks the loop instead:

* on every step (cheap): no buffer or parameter of the model was changed between the draw
  and the step (``state_dict`` would release it without noise), nor between one step and
  the next draw (an in-place edit after ``optimizer.step()``, or a second optimizer over
  shared parameters, moves them without noise); no tensor computed during a step is kept
  on the model or its submodules (``self.prev = h.mean(0).detach()`` carries one batch's
  data into the next steps and into a pickled model); no ``nn.Parameter`` outside the
  model's forward receives a gradient from the loss; the loss's autograd graph holds no
  custom ``torch.autograd.Function`` (its backward, which the engine does not derive, may
  mix rows); and the loop called the same torch functions as on the checked step (so the
  check below covers the code every step runs);
* on the first step with two subgraphs or more, a `torch.overrides.TorchFunctionMode`
  records every torch operation from the draw to the step. It then refuses

  - a read of the private graph itself (``data.x``, ``data.y``, its edges) or of any tensor
    from outside the loop with one row per node or per training node of the graph (a teacher's
    predictions, precomputed features): they carry nodes in no subgraph of the batch;
  - a tensor outside the model's parameters that receives a gradient from the loss (a loss
    temperature trained by a second optimizer), or a model parameter used outside the
    model's forward;
  - any mixing: the recorded operations are replayed twice, as recorded and with one
    subgraph's features and labels changed (dropout masks and other random draws replayed
    as drawn, the grad mode of each operation kept). Every tensor of the step with one row
    per node, subgraph or edge, and its gradient from the loss, must keep the rows of every
    other subgraph; a number taken out of a tensor (``.item()``, ``bool``) that changes with
    the other subgraph and is used again is refused as well.

What the recording cannot see (a tensor computed before the loop that is not per node, e.g.
class weights) is taken as public; `LoopGuard.unaccounted` says so in ``privacy``.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from gnnprivacy.training.dp.flat_capture import (BatchLayout, SubgraphMixingError, module_tree,
                                                  named_tensors, same_storage, tensors_of)

__all__ = ["LoopGuard", "LoopTrace"]

#: operations that run backward passes or register hooks: never replayed
_NEVER = frozenset({"register_hook", "register_post_accumulate_grad_hook", "backward", "grad",
                    "share_memory_", "__set__", "__delete__"})
#: operations that set autograd metadata (replayed only on the replay's own tensors)
_META = _NEVER | {"requires_grad_", "retain_grad"}
_BACKWARDS = (Tensor.backward, torch.autograd.backward, torch.autograd.grad)
#: in-place dunders (the other in-place ops end in "_")
_INPLACE_DUNDERS = frozenset({"__setitem__", "__iadd__", "__isub__", "__imul__",
                              "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__",
                              "__iand__", "__ior__", "__ixor__", "__ilshift__",
                              "__irshift__", "__imatmul__"})
#: conversions to Python values
_TO_PYTHON = frozenset({"item", "tolist", "__bool__", "__int__", "__float__", "__index__",
                        "numpy", "__complex__"})
_RANDOM_WORDS = ("rand", "dropout", "bernoulli", "normal", "uniform", "multinomial",
                 "poisson", "exponential", "rrelu", "gumbel", "cauchy", "geometric")
#: the most operations one recorded step may hold
MAX_OPS = 50_000
#: reads of metadata and autograd bookkeeping: left out of a step's signature (they vary
#: with state that is not data, e.g. whether ``p.grad`` is set yet)
_UNSIGNED = _META | {"__get__", "__set__", "__delete__", "dim", "size", "numel", "stride",
                     "is_contiguous", "data_ptr", "element_size", "__len__", "nelement",
                     "ndimension", "storage_offset", "is_floating_point", "is_complex",
                     "__hash__", "__repr__", "__format__"}


def _name(func) -> str:
    return getattr(func, "__name__", "") or str(func)


def _is_inplace(name: str, kwargs: dict) -> bool:
    if name in _META:
        return False
    if name in _INPLACE_DUNDERS or kwargs.get("out") is not None:
        return True
    return name.endswith("_") and not name.startswith("__")


def _map(value, fn):
    if isinstance(value, Tensor):
        return fn(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_map(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _map(v, fn) for k, v in value.items()}
    return value


class _Op:
    __slots__ = ("func", "name", "args", "kwargs", "result", "rng", "grad_mode", "before")

    def __init__(self, func, name, args, kwargs, grad_mode):
        self.func, self.name, self.args, self.kwargs = func, name, args, kwargs
        self.grad_mode, self.result, self.rng, self.before = grad_mode, None, None, None


_SIGNED: dict = {}          # function -> whether it enters a signature (memo)


class _Muted:
    """`LoopTrace.muted`: a section of the engine's own bookkeeping (the capture's hooks).
    A full trace records its operations for the replay but leaves them out of the
    signature; a light trace does not see them at all (the mode is popped while it runs,
    so they cost no dispatch through Python)."""

    __slots__ = ("_trace", "popped")

    def __init__(self, trace: LoopTrace):
        # a weak reference: the capture holding this section is reachable from the model,
        # which must stay copyable (the recorded operations are not)
        self._trace, self.popped = weakref.ref(trace), []

    @property
    def trace(self) -> LoopTrace:
        return self._trace()

    def __enter__(self):
        trace = self.trace
        if trace is None:
            self.popped.append(None)
            return self
        trace.muted += 1
        top = (trace.light and trace.entered and torch._C._len_torch_function_stack() > 0
               and torch._C._get_function_stack_at(
                   torch._C._len_torch_function_stack() - 1) is trace)
        if top:
            torch._C._pop_torch_function_stack()
        self.popped.append(top)
        return self

    def __exit__(self, *exc):
        popped, trace = self.popped.pop(), self.trace
        if popped is None or trace is None:
            return False
        if popped:
            torch._C._push_on_torch_function_stack(trace)
        trace.muted -= 1
        return False


class LoopTrace(TorchFunctionMode):
    """Records every torch operation (function, arguments, result, the RNG state of random
    ones, the value an in-place one overwrote) while it is entered; with ``light=True`` only
    the functions called (a step's signature, at a few microseconds per operation).

    Operations inside ``with trace.muted:`` (the engine's own bookkeeping) are recorded for
    the replay but are not part of the signature, in both modes."""

    def __init__(self, *, light: bool = False):
        super().__init__()
        self.light = light
        self.ops: list[_Op] = []
        self.funcs: list = []
        self.overflow = False
        self.entered = False
        self.cut = False
        self.muted = 0
        self.muted_section = _Muted(self)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.overflow or len(self.funcs) + len(self.ops) >= MAX_OPS:   # left running
            self.overflow = True
            return func(*args, **kwargs)
        if self.light:
            if self.muted:
                return func(*args, **kwargs)
            self.funcs.append(func)
            if func in _BACKWARDS:
                self.ops.append(_Op(func, _name(func), args, kwargs, True))
            return func(*args, **kwargs)
        name = _name(func)
        op = _Op(func, name, args, kwargs, torch.is_grad_enabled())
        if any(w in name for w in _RANDOM_WORDS):
            op.rng = _rng_state()
        if _is_inplace(name, kwargs):
            target = kwargs.get("out", args[0] if args else None)
            if isinstance(target, Tensor):
                op.before = target.detach().clone()
        op.result = func(*args, **kwargs)
        self.ops.append(op)
        if not self.muted:
            self.funcs.append(func)
        return op.result

    def signature(self) -> tuple:
        """The functions called, without metadata reads and autograd bookkeeping."""
        signed = _SIGNED
        out = []
        for f in self.funcs:
            keep = signed.get(f)
            if keep is None:
                keep = signed[f] = _name(f) not in _UNSIGNED
            if keep:
                out.append(f)
        return tuple(out)

    def start(self) -> None:
        self.__enter__()
        self.entered = True

    def stop(self) -> None:
        """Leave the mode (only ours: modes entered on top of it are put back)."""
        if not self.entered:
            return
        self.entered = False
        above = []
        while torch._C._len_torch_function_stack() > 0:
            top = torch._C._pop_torch_function_stack()
            if top is self:
                break
            above.append(top)
        for mode in reversed(above):
            torch._C._push_on_torch_function_stack(mode)


def _rng_state() -> dict:
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def _set_rng(state: dict) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"])


class _Replay:
    """One replay of a recorded step with some tensors substituted."""

    def __init__(self, trace: LoopTrace, subs: dict[int, Tensor]):
        self.env: dict[int, Tensor] = dict(subs)
        self.python: dict[int, Any] = {}          # op index -> replayed Python value
        devices = [torch.cuda.current_device()] if (torch.cuda.is_available()
                                                    and torch.cuda.is_initialized()) else []
        with torch.random.fork_rng(devices=devices):
            for i, op in enumerate(trace.ops):
                self._run(i, op)

    def get(self, t: Tensor) -> Tensor:
        return self.env.get(id(t), t)

    def _run(self, i: int, op: _Op) -> None:
        if op.name in _NEVER:
            return
        inputs = tensors_of(op.args) + tensors_of(op.kwargs)
        if not any(id(t) in self.env for t in inputs):
            return
        inplace = _is_inplace(op.name, op.kwargs)
        env = self.env
        if inplace and op.before is not None:
            target = op.kwargs.get("out", op.args[0] if op.args else None)
            if isinstance(target, Tensor) and id(target) not in env:
                env[id(target)] = op.before.clone()
        args = _map(op.args, lambda t: env.get(id(t), t))
        kwargs = _map(op.kwargs, lambda t: env.get(id(t), t))
        if op.rng is not None:
            _set_rng(op.rng)
        with torch.set_grad_enabled(op.grad_mode):
            result = op.func(*args, **kwargs)
        if op.name in _TO_PYTHON:
            self.python[i] = result
            return
        if op.name in _META:
            return
        olds, news = tensors_of(op.result), tensors_of(result)
        for old, new in zip(olds, news):
            env[id(old)] = new


def _segments(rows: int, layout: BatchLayout) -> list[Tensor]:
    """Every reading of ``rows`` leading rows as rows of subgraphs (node, subgraph, edge)."""
    out = []
    if rows == layout.num_rows:
        out.append(layout.batch)
    if rows == layout.num_subgraphs and rows != layout.num_rows:
        out.append(torch.arange(rows, device=layout.batch.device))
    if layout.num_edges:
        dst = layout.batch[layout.edge_index[1]]
        if rows == layout.num_edges:
            out.append(dst)
        if rows == layout.num_edges + layout.num_rows:
            out.append(torch.cat([dst, layout.batch]))
        readded = layout.loops_readded()      # the graph's own self-loops replaced (PyG)
        if rows == readded.numel() and rows != layout.num_edges + layout.num_rows:
            out.append(readded)
    return out


def _moved(a: Tensor, b: Tensor, layout: BatchLayout, target: int) -> tuple[float, int] | None:
    """The largest change of ``a`` -> ``b`` outside subgraph ``target`` and the subgraph
    it is in, when it exceeds the float tolerance under every reading of the rows."""
    if a.dim() == 0 or a.shape != b.shape:
        return None
    found = None
    for seg in _segments(a.shape[0], layout):
        other = seg != target
        if not bool(other.any()):
            return None
        x, y = a[other], b[other]
        if x.is_floating_point() or x.is_complex():
            x, y = x.detach().double(), y.detach().double()
            diff = (x - y).abs().nan_to_num(nan=0.0)
            scale = 1.0 + float(x.abs().nan_to_num(nan=0.0, posinf=0.0).max()) if x.numel() \
                else 1.0
            tol = 1e-5 * scale
        else:
            diff, tol = (x != y).double(), 0.5
        if not diff.numel() or float(diff.max()) <= tol:
            return None
        row = int(diff.flatten(1).amax(1).argmax()) if diff.dim() > 1 else int(diff.argmax())
        found = (float(diff.max()), int(seg[other][row]))
    return found


class LoopGuard:
    """The loop checks of `PrivateTraining` (see the module docstring).

    Args:
        model: the user's model.
        graphs: the private graphs (what the user passed and the sampler's training graph).
        per_node_rows: row counts that mark a tensor as per node of the graph.
        optimizer: the DP step's optimizer (its parameters are the ones it updates).
    """

    def __init__(self, model: nn.Module, graphs: list, per_node_rows: set[int],
                 optimizer: torch.optim.Optimizer | None = None):
        self.model, self.optimizer = model, optimizer
        self.params = {id(p): n for n, p in model.named_parameters()}
        self.private = []
        for g in graphs:
            for key in ("x", "y", "edge_index", "edge_attr"):
                t = getattr(g, key, None)
                if isinstance(t, Tensor) and t.numel():
                    self.private.append(t)
        self.per_node_rows = {int(r) for r in per_node_rows if int(r) > 1}
        self.trace: LoopTrace | None = None
        self.verified: set[tuple] = set()          # signatures of the checked steps
        self.check_losses = None                   # ``check_losses(ops, losses)``, or None
        self._state: dict[tuple[str, str], tuple[int, int]] = {}
        self._kept: dict[tuple[int, str], tuple[int, int]] = {}     # tensor attributes
        self._after: tuple[dict, dict] | None = None   # (state, tensor attributes) at the
                                                       # end of the last DP step
        self._at_step: dict | None = None              # the attributes the step's check read

    # ------------------------------------------------------------------ lifecycle
    def begin(self) -> None:
        """At the draw of a batch: note the buffers; record the loop in full until one step
        is checked, then only the functions it calls."""
        self.stop()
        tree = module_tree(self.model)
        self._state, self._kept = self._versions(tree), self._attributes(tree)
        self._since_step(self._state, self._kept)
        self.trace = LoopTrace(light=bool(self.verified))
        self.trace.start()

    def after_step(self) -> None:
        """At the end of a DP step: what the next draw must find unchanged (the tensor
        attributes as the step's check read them: the update changes none)."""
        kept, self._at_step = self._at_step, None
        self._after = (self._versions(), self._attributes() if kept is None else kept)

    def check_between_steps(self) -> None:
        """Nothing changed the model since the last DP step (at a draw, and when the
        training is closed).

        Raises:
            SubgraphMixingError: a parameter or buffer changed, or a tensor attribute was
                set or changed on the model, after ``optimizer.step()``.
        """
        if self._after is not None:
            self._since_step(self._versions(), self._attributes())

    def _since_step(self, state: dict, kept: dict) -> None:
        if self._after is None:
            return
        before, before_kept = self._after
        self._after = None
        if state != before:
            kind, name = next(k for k in before if state.get(k) != before[k])
            raise SubgraphMixingError(
                f"{kind} {name!r} of the model changed after optimizer.step(), before the "
                "next batch: only the DP step may change the model (an in-place edit, or a "
                "second optimizer or module sharing the model's parameters, moves them "
                "without clipping or noise)")
        self._check_kept(before_kept, kept, "between two steps")

    def stop(self, *, cut: bool = False) -> None:
        """Stop recording; ``cut``: the loop stopped iterating the loader while its batch
        was pending (``next(iter(pt.loader))``, a ``break`` before ``optimizer.step()``),
        so the step that follows was not recorded and is refused."""
        if self.trace is not None:
            self.trace.stop()
            self.trace.cut = self.trace.cut or cut

    def muted(self):
        """The current trace's section for the engine's own bookkeeping
        (`LoopTrace.muted_section`), or ``None`` when nothing is traced."""
        return self.trace.muted_section if self.trace is not None else None

    def check(self, layout: BatchLayout, calls: tuple = ()) -> None:
        """At ``optimizer.step()``: the buffer check, and the loop check on a traced step.

        Args:
            layout: the step's batch.
            calls: the capture's record of the trained modules' calls
                (`FlatCapture.call_signature`), part of the step's signature.

        Raises:
            SubgraphMixingError: naming what the loop did.
        """
        self.stop()
        trace, self.trace = self.trace, None
        tree = module_tree(self.model)
        self._check_state(tree)
        self._at_step = self._attributes(tree)
        self._check_kept(self._kept, self._at_step, "during the step")
        if trace is None:
            return
        if trace.cut:
            raise SubgraphMixingError(
                "the loop stopped iterating pt.loader before this batch's optimizer.step() "
                "(e.g. `batch = next(iter(pt.loader))`, or a break), so the step was not "
                "recorded and cannot be checked: draw the batches with `for batch in "
                "pt.loader:` and step inside the loop")
        if trace.light:
            # which tensors were created in this step is not recorded: nn.Parameter leaves
            graph = self._check_leaves(self._losses(trace.ops), None)
            if trace.overflow or (trace.signature(), graph, calls) not in self.verified:
                raise SubgraphMixingError(
                    "the loop ran other torch operations between the draw and "
                    "optimizer.step() than on the checked step: every step must run the same "
                    "code there (evaluate or log after optimizer.step()), since the check "
                    "that it keeps the subgraphs apart ran on that code")
            return
        if trace.overflow:
            raise SubgraphMixingError(
                f"the first step ran more than {MAX_OPS} torch operations between the draw "
                "and optimizer.step(): too many to check that the loop keeps the subgraphs "
                "apart")
        ops = trace.ops
        produced = {id(t) for op in ops if op.name not in _META for t in tensors_of(op.result)}
        batch = _batch_ids(layout)
        self._check_private_reads(ops, produced | batch)
        losses = self._losses(ops)
        if self.check_losses is not None:         # make_private's loss_reduction check
            self.check_losses(ops, losses)
        graph = self._check_leaves(losses, produced | batch)
        if layout.num_subgraphs >= 2:
            self._check_mixing(trace, layout, losses)
            self.verified.add((trace.signature(), graph, calls))

    @property
    def unaccounted(self) -> list[str]:
        """What the loop may read that the checks take as public."""
        notes = ["tensors the loop reads from outside the batch that are not per node of the "
                 "graph (class weights, constants) are taken as public"]
        buffers = [n for n, _ in self.model.named_buffers()]
        if buffers:
            notes.append(f"the model's buffers ({', '.join(buffers[:5])}"
                         f"{', ...' if len(buffers) > 5 else ''}) are released by state_dict "
                         "as set before training (changing them in a step is refused)")
        stepped = ({id(p) for g in self.optimizer.param_groups for p in g["params"]}
                   if self.optimizer is not None else set())
        idle = [n for n, p in self.model.named_parameters()
                if p.requires_grad and id(p) not in stepped]
        if self.optimizer is not None and idle:
            notes.append(f"parameters outside the optimizer ({', '.join(idle[:5])}"
                         f"{', ...' if len(idle) > 5 else ''}) get the noised gradient but no "
                         "update from the DP step; whatever sets them outside it is not covered")
        notes.append("what the loop does with a batch after optimizer.step() (until the next "
                     "batch is drawn) is checked only for changes to the model itself; what "
                     "it logs or stores elsewhere is not")
        return notes

    # ------------------------------------------------------------------ checks
    def _versions(self, tree: list | None = None) -> dict[tuple[str, str], tuple[int, int]]:
        tree = module_tree(self.model) if tree is None else tree
        out = {("buffer", n): (id(b), b._version) for n, b in named_tensors(tree, "_buffers")}
        out.update({("parameter", n): (id(p), p._version) for n, p in named_tensors(tree)})
        return out

    def _attributes(self, tree: list | None = None) -> dict[tuple[int, str], tuple[int, int]]:
        """The tensors the model keeps outside its parameters and buffers
        (`_tensor_attributes`)."""
        return _tensor_attributes(self.model if tree is None else tree)

    def _check_kept(self, before: dict, now: dict, when: str) -> None:
        """No tensor attribute of the model or a submodule was set or changed between
        ``before`` and ``now`` (`_tensor_attributes`)."""
        if now == before:
            return
        for key, value in now.items():
            if before.get(key) != value:
                module, attr = key
                where = next((n for n, m in self.model.named_modules() if id(m) == module), "")
                raise SubgraphMixingError(
                    f"the model keeps a tensor it computed {when} in "
                    f"`{f'{where}.{attr}' if where else attr}`: a tensor derived from one "
                    "batch that outlives the step carries that batch's data into the next "
                    "steps (and into a pickled model) without clipping or noise; keep it "
                    "local to forward, or make it a buffer that the training does not change")

    def _check_state(self, tree: list | None = None) -> None:
        """No buffer or parameter was changed, replaced or added since the draw."""
        now = self._versions(tree)
        if now == self._state:
            return
        for (kind, name), before in self._state.items():
            if now.get((kind, name)) != before:
                if kind == "parameter":
                    raise SubgraphMixingError(
                        f"parameter {name!r} of the model was changed between the draw and "
                        "optimizer.step(): only the DP step may update parameters (a change "
                        "made in the loop is released without noise)")
                raise SubgraphMixingError(
                    f"buffer {name!r} of the model changed during the step: state_dict would "
                    "release it without noise; keep buffers fixed while training (or make "
                    "the statistic a parameter, or drop it)")
        new = sorted(set(now) - set(self._state))
        if new:
            raise SubgraphMixingError(
                f"{new[0][0]} {new[0][1]!r} was added to the model during the step: "
                "state_dict would release it without noise")

    def _is_private(self, t: Tensor) -> bool:
        return any(same_storage(t, p) for p in self.private)

    def _check_private_reads(self, ops: list[_Op], own: set[int]) -> None:
        """No operation reads the private graph or a per-node tensor from outside."""
        for op in ops:
            if op.name in _META:
                continue
            for t in tensors_of(op.args) + tensors_of(op.kwargs):
                i = id(t)
                if i in own or i in self.params:
                    continue
                if self._is_private(t):
                    raise SubgraphMixingError(
                        f"the loop read the training graph itself ({op.name} on a tensor of "
                        f"shape {tuple(t.shape)} from the data given to make_private) between "
                        "the draw and optimizer.step(): a step may read only its batch (a "
                        "full-graph pass, e.g. a teacher, reads nodes in no subgraph)")
                if t.dim() and t.shape[0] in self.per_node_rows:
                    raise SubgraphMixingError(
                        f"the loop read a tensor from outside the batch with one row per node "
                        f"of the graph (shape {tuple(t.shape)}, in {op.name}): it carries "
                        "nodes in no subgraph of the batch (a teacher's predictions, "
                        "precomputed features); compute it from the batch inside the step")

    @staticmethod
    def _losses(ops: list[_Op]) -> list[tuple[Tensor, Tensor | None]]:
        out = []
        for op in ops:
            if op.name not in ("backward", "grad"):
                continue
            outputs = op.args[0] if op.args else op.kwargs.get("tensors",
                                                               op.kwargs.get("outputs"))
            grads = (op.args[1] if len(op.args) > 1 else
                     op.kwargs.get("gradient", op.kwargs.get("grad_tensors",
                                                             op.kwargs.get("grad_outputs"))))
            outputs = tensors_of(outputs)
            grads = tensors_of(grads) if grads is not None else [None] * len(outputs)
            out.extend(zip(outputs, grads + [None] * (len(outputs) - len(grads))))
        return out

    def _check_leaves(self, losses, own: set[int] | None) -> tuple:
        """No tensor that outlives the step receives a gradient from the loss (``own``: the
        tensors created in the step; ``None``: only ``nn.Parameter`` leaves are checked).

        Returns the shape of the losses' autograd graph, part of the step's signature: the
        nodes' names in depth-first order, each with its number of inputs, a node met again
        as the index of its first visit (the model's forward is not traced on later steps:
        what it computes for the loss is compared this way)."""
        seen: dict = {}
        shape: list = []
        stack = [t.grad_fn for t, _ in reversed(losses)]
        while stack:
            node = stack.pop()
            if node is None:
                shape.append(None)
                continue
            if node in seen:
                shape.append(seen[node])
                continue
            seen[node] = len(seen)
            following = node.next_functions
            name = node.name()
            shape.append((name, len(following)))
            stack.extend([n for n, _ in reversed(following)])
            fn = _custom_function(node)
            if fn is not None:
                raise SubgraphMixingError(
                    f"the loss's autograd graph holds a custom torch.autograd.Function "
                    f"({fn}): the engine derives each subgraph's gradient from torch's own "
                    "operations, and a hand-written backward may mix the rows of the batch "
                    "(moving other subgraphs' clipped gradients); write it with torch "
                    "operations (their gradients are checked like the rest of the loop)")
            # only a leaf's AccumulateGrad node holds a variable
            var = node.variable if name == _ACCUMULATE else None
            if isinstance(var, Tensor) and (id(var) not in own if own is not None
                                            else isinstance(var, nn.Parameter)):
                name = self.params.get(id(var))
                if name is not None:
                    raise SubgraphMixingError(
                        f"parameter {name!r} of the model is used outside the model's forward "
                        "(in the loop or the loss): only what the model's modules compute is "
                        "clipped per subgraph; use it inside forward")
                raise SubgraphMixingError(
                    f"a tensor outside the model (shape {tuple(var.shape)}) receives a "
                    "gradient from the loss: only the model's parameters are clipped and "
                    "noised, a second optimizer would release it without noise; make it a "
                    "parameter used in the model's forward, or detach it")
        return tuple(shape)

    def _check_mixing(self, trace: LoopTrace, layout: BatchLayout, losses) -> None:
        counts = torch.bincount(layout.batch, minlength=layout.num_subgraphs)
        target = int(counts.argmax())
        roots = self._roots(layout)
        base = _Replay(trace, {id(t): t.detach().clone() for t in roots.values()})
        changed = _Replay(trace, {id(t): _perturbed(t, layout, target, key)
                                  for key, t in roots.items()})
        ops = trace.ops
        for i, op in enumerate(ops):
            if i in base.python and _differs(base.python[i],
                                             changed.python.get(i, base.python[i])):
                if op.name == "__bool__" or op.name in ("__int__", "__index__") or _reused(
                        op.result, ops[i + 1:]):
                    raise SubgraphMixingError(
                        f"the loop turns a tensor computed from the batch into a Python value "
                        f"({op.name}) that changes with another subgraph's data and is used "
                        "again: its effect cannot be checked; keep the computation in tensors")
        for i, op in enumerate(ops):
            for k, t in enumerate(tensors_of(op.result)):
                if i in base.python:
                    break
                a, b = base.get(t), changed.get(t)
                if a is t or b is t:
                    continue
                hit = _moved(a, b, layout, target)
                if hit is not None:
                    raise _mixing(f"the value of {op.name} (shape {tuple(a.shape)})", target,
                                  hit)
        self._check_gradients(ops, base, changed, losses, layout, target)

    def _roots(self, layout: BatchLayout) -> dict:
        data = layout.data
        out = {"x": layout.x}
        for key in ("y", "edge_attr"):
            t = getattr(data, key, None) if data is not None else None
            if isinstance(t, Tensor) and t.numel():
                out[key] = t
        return out

    def _check_gradients(self, ops, base: _Replay, changed: _Replay, losses,
                         layout: BatchLayout, target: int) -> None:
        if not losses:
            return
        wrt_ops, wrt_a, wrt_b = [], [], []
        for op in ops:
            for t in tensors_of(op.result):
                a, b = base.get(t), changed.get(t)
                if (a is t or b is t or not a.requires_grad or a.dim() == 0
                        or not _segments(a.shape[0], layout)):
                    continue
                wrt_ops.append(op.name)
                wrt_a.append(a)
                wrt_b.append(b)
        if not wrt_a:
            return
        ga = _grads(base, losses, wrt_a)
        gb = _grads(changed, losses, wrt_b)
        for name, a, b in zip(wrt_ops, ga, gb):
            if a is None or b is None:
                continue
            hit = _moved(a, b, layout, target)
            if hit is not None:
                raise _mixing(f"the loss's gradient at {name} (shape {tuple(a.shape)})",
                              target, hit)


#: the autograd node of a leaf tensor (``node.variable``)
_ACCUMULATE = "torch::autograd::AccumulateGrad"


def _custom_function(node) -> str | None:
    """The name of the custom ``torch.autograd.Function`` whose backward ``node`` is
    (``None`` for torch's own operations)."""
    if isinstance(node, torch.autograd.function.BackwardCFunction):
        return getattr(getattr(node, "_forward_cls", None), "__name__", type(node).__name__)
    return None


#: torch's own attributes of every module (hooks, parameters, ...): not a model's state
_MODULE_INTERNALS = frozenset(vars(nn.Module()))


def _tensor_attributes(model: nn.Module | list) -> dict[tuple[int, str], tuple[int, int]]:
    """``(id of the module, attribute) -> (id, version)`` of every tensor the model and its
    submodules (or the modules of a `module_tree`) hold outside their parameters and
    buffers (in an attribute, or one level inside a list, tuple or dict attribute)."""
    out = {}
    internals = _MODULE_INTERNALS
    tree = module_tree(model) if isinstance(model, nn.Module) else model
    for _, module in tree:
        for key, value in module.__dict__.items():
            if key in internals:
                continue
            if isinstance(value, Tensor):
                out[(id(module), key)] = (id(value), value._version)
            elif value and isinstance(value, (list, tuple, dict)):
                items = value.items() if isinstance(value, dict) else enumerate(value)
                for k, v in items:
                    if isinstance(v, Tensor):
                        out[(id(module), f"{key}[{k!r}]")] = (id(v), v._version)
    return out


def _batch_ids(layout: BatchLayout) -> set[int]:
    data = layout.data
    tensors = [layout.x, layout.edge_index, layout.batch]
    if data is not None and callable(getattr(data, "to_dict", None)):
        tensors += tensors_of(list(data.to_dict().values()))
    return {id(t) for t in tensors}


def _grads(replay: _Replay, losses, wrt: list[Tensor]) -> list[Tensor | None]:
    outs, gos = [], []
    for loss, grad in losses:
        out = replay.get(loss)
        if not out.requires_grad:
            continue
        outs.append(out)
        gos.append(None if grad is None else replay.get(grad))
    if not outs:
        return [None] * len(wrt)
    return list(torch.autograd.grad(outs, wrt, grad_outputs=gos, allow_unused=True,
                                    retain_graph=True))


def _differs(a, b) -> bool:
    try:
        return bool(a != b)
    except (TypeError, ValueError):          # numpy arrays
        import numpy as np

        return not np.array_equal(np.asarray(a), np.asarray(b))


def _reused(value, later: list[_Op]) -> bool:
    """Whether a Python value taken from a tensor reappears among later arguments."""
    if not isinstance(value, (int, float, bool)):
        return True
    for op in later:
        for v in list(op.args) + list(op.kwargs.values()):
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v == value:
                return True
            if isinstance(v, (tuple, list)) and value in v:
                return True
    return False


def _perturbed(t: Tensor, layout: BatchLayout, target: int, key: str) -> Tensor:
    """``t`` with the rows of subgraph ``target`` changed (a fixed local stream)."""
    seg = layout.batch if key != "edge_attr" else layout.batch[layout.edge_index[1]]
    if t.shape[0] != seg.shape[0]:
        return t.detach().clone()
    rows = seg == target
    out = t.detach().clone()
    if out.is_floating_point():
        gen = torch.Generator(device=out.device).manual_seed(0)
        noise = torch.randn(out[rows].shape, dtype=out.dtype, generator=gen, device=out.device)
        out[rows] = out[rows] + noise * (1.0 + out.abs().mean())
    else:
        top = max(2, int(out.max()) + 1) if out.numel() else 2
        out[rows] = (out[rows] + 1) % top
    return out


def _mixing(what: str, target: int, hit: tuple[float, int]) -> SubgraphMixingError:
    change, where = hit
    return SubgraphMixingError(
        f"the loop mixes subgraphs: changing subgraph {target}'s features and labels changed "
        f"{what} in subgraph {where} by {change:.3g}. Something between the draw and "
        "optimizer.step() combines rows across the batch (a mean over the batch before the "
        "model or in the loss, train-mode batch statistics, ...); node-level DP needs each "
        "subgraph's gradient to depend on that subgraph only")
