"""What the code audit observes at the boundary of one engine (``gp.audit(..., mode="code")``).

The canaries of `gnnprivacy.training.dp.audit_hooks` measure the noise and the clip the
engine applies to *its own* block; this observer watches the tensors that cross the engine's
boundary instead, so a bug that treats the canaries right and the model wrong still shows:

* **membership**: the subgraphs each executed step trained on, read from the model's own
  inputs (a `StarBatch`, DP-GNN's padded rows ``(nodes, mask)``) or from the batch the
  `make_private` loader drew (``n_id``, ``batch``, ``center``, noted by the audit);
* **pre-noise sums**: the clipped sums handed to the noise, and, for the first
  ``replay_steps`` steps, the per-subgraph gradients recomputed independently (the step's
  forward replayed on a hook-free copy of the model with the same random state, one
  backward per subgraph from the output gradient the step's backward produced), clipped
  per group at the reported norms;
* **releases**: every ``optimizer.step`` (pre- and post-hooks): the gradient it applies,
  whose difference from the pre-noise sum is the noise each parameter received, and the
  parameters after it, so a change after the last observed step is seen.

The statistics are computed by `gnnprivacy.auditing.outside`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

__all__ = ["EngineObserver", "Membership", "membership_of"]


@dataclass
class Membership:
    """The subgraphs of one step: ``centers[i]`` is subgraph ``i``'s unit (the node sampled
    at the event's rate), and every ``(node, subgraph)`` pair in it; ``edges`` (when the
    batch carries them): every entry ``(source node, target node, subgraph)``, ``[3, E]``."""

    centers: Tensor
    nodes: Tensor
    subgraphs: Tensor
    edges: Tensor | None = None


def _star(b) -> Membership:
    num = int(b.num_subgraphs)
    centers = b.centers.detach().cpu().long()
    nodes = torch.cat([centers, b.periph_nodes.detach().cpu().long()])
    subs = torch.cat([torch.arange(num), b.periph_subgraph.detach().cpu().long()])
    ids = getattr(b, "node_ids", None)
    if ids is not None:              # local ids of a feature slice -> the graph's node ids
        ids = ids.detach().cpu().long()
        centers, nodes = ids[centers], ids[nodes]
    return Membership(centers, nodes, subs)


def _rows(nodes: Tensor, mask: Tensor) -> Membership:
    nodes, mask = nodes.detach().cpu().long(), mask.detach().cpu().bool()
    rows = torch.arange(nodes.shape[0]).unsqueeze(1).expand_as(nodes)
    return Membership(nodes[:, 0].clone(), nodes[mask], rows[mask])


def _loader_batch(d) -> Membership:
    n_id, seg = d.n_id.detach().cpu().long(), d.batch.detach().cpu().long()
    ei = getattr(d, "edge_index", None)
    edges = None
    if isinstance(ei, Tensor) and ei.dim() == 2 and ei.shape[0] == 2:
        ei = ei.detach().cpu().long()
        edges = torch.stack([n_id[ei[0]], n_id[ei[1]], seg[ei[1]]])
    centers = n_id[d.center.detach().cpu().long()]
    public = getattr(d, "public_rows", None)     # rows of nodes that are no privacy unit
    if isinstance(public, Tensor):
        keep = ~public.detach().cpu().bool()
        n_id, seg = n_id[keep], seg[keep]
    return Membership(centers, n_id, seg, edges)


def _graph_batch(d) -> Membership:
    """A batch of whole graphs (unit graph, or the individual ``group[i]`` of graph ``i``):
    subgraph ``i`` is training graph ``g_id[i]``, and every row is read as its graph's
    unit, so a graph whose rows lie in two subgraphs of a step (or that is drawn twice)
    occurs twice."""
    g_id, seg = d.g_id.detach().cpu().long(), d.batch.detach().cpu().long()
    group = getattr(d, "group", None)          # the individual of each graph, when grouped
    unit = g_id if group is None else group.detach().cpu().long()
    return Membership(unit, unit[seg], seg)


def membership_of(values) -> Membership | None:
    """The membership in a model's inputs or a loader's batch (``None`` when none is
    recognisable): a star batch, DP-GNN's ``(nodes, mask)`` rows, a batch of whole graphs
    (``g_id``, ``batch``), or a batch with ``n_id``, ``batch`` and ``center``."""
    values = list(values)
    for v in values:
        if all(hasattr(v, k) for k in ("centers", "periph_nodes", "periph_subgraph")):
            return _star(v)
        if all(getattr(v, k, None) is not None for k in ("g_id", "batch")):
            return _graph_batch(v)
        if all(getattr(v, k, None) is not None for k in ("n_id", "batch", "center")):
            return _loader_batch(v)
    tensors = [v for v in values if isinstance(v, Tensor)]
    for a, b in zip(tensors, tensors[1:]):
        if (a.dim() == 2 and b.dim() == 2 and a.shape == b.shape and b.dtype == torch.bool
                and not a.is_floating_point() and a.shape[1] >= 1):
            return _rows(a, b)
    return None


def rows_disagree(batch, sampler) -> str | None:
    """Whether a loader batch carries other data than its membership names: each row's
    features and label must be the training data's at the row's id (``n_id``; for a batch
    of whole graphs, every row of graph ``g_id[i]`` in subgraph ``i``), so a sampler whose
    ids hide a copied or foreign row is seen. ``None`` when they agree, or when the sampler
    reads its rows elsewhere (a shard fetching remote rows)."""
    g_id = getattr(batch, "g_id", None)
    if g_id is not None and hasattr(sampler, "graph_rows"):
        g_id, seg = g_id.detach().cpu().long(), batch.batch.detach().cpu().long()
        try:
            starts, sizes, labels = sampler.graph_rows(g_id)
        except (IndexError, KeyError):
            return "a subgraph names no training graph"
        if seg.numel() != int(sizes.sum()) or not bool(
                (torch.bincount(seg, minlength=g_id.numel()) == sizes).all()):
            return "the rows of a subgraph are not its graph's nodes"
        start = torch.repeat_interleave(starts - torch.cumsum(sizes, 0) + sizes, sizes)
        rows = start + torch.arange(seg.numel())
        expect_x, expect_y = sampler._x[rows], sampler._y[labels]
    elif getattr(batch, "n_id", None) is not None and hasattr(sampler, "graph") and \
            getattr(type(sampler)._rows, "__qualname__", "") == "SubgraphSampler._rows":
        ids = batch.n_id.detach().cpu().long()
        expect_x, expect_y = sampler.graph.x[ids], sampler.graph.y[ids]
    else:
        return None
    for name, got, want in (("features", batch.x, expect_x), ("labels", batch.y, expect_y)):
        got = got.detach().cpu()
        if got.shape != want.shape or not torch.equal(got.to(want.dtype), want):
            return f"the batch's {name} are not the training data's at its ids"
    return None


#: noise coordinates kept per parameter and release, for the freshness check
FRESH_COORDS = 256


def _coordinates(n: int, k: int) -> Tensor:
    """A fixed set of at most `FRESH_COORDS` of ``n`` coordinates (the ``k``-th parameter's;
    the same at every release)."""
    if n <= FRESH_COORDS:
        return torch.arange(n)
    gen = torch.Generator().manual_seed(7919 * (k + 1))
    return torch.randperm(n, generator=gen)[:FRESH_COORDS].sort().values


@dataclass
class _Forward:
    args: tuple
    kwargs: dict
    rng: Tensor
    delta: Tensor | None = None


def _hook_free_copy(model: torch.nn.Module) -> torch.nn.Module:
    twin = copy.deepcopy(model)
    for m in twin.modules():
        for hooks in (m._forward_hooks, m._forward_pre_hooks, m._backward_hooks,
                      m._backward_pre_hooks):
            hooks.clear()
    return twin


@dataclass
class EngineObserver:
    """Boundary observations of one engine (see the module docstring).

    Args:
        engine: the `DPEngine`.
        replay_steps: steps whose clipped sum is recomputed independently.
    """

    engine: Any
    replay_steps: int = 2
    members: list = field(default_factory=list)        # Membership | None per step
    sizes: list = field(default_factory=list)          # realised subgraphs per step
    clip_checks: list = field(default_factory=list)    # dicts, one per replayed step
    releases: int = 0                                  # optimizer steps observed
    unnoised: list = field(default_factory=list)       # releases without an engine sum
    row_faults: list = field(default_factory=list)     # batches whose rows are not the
                                                       # data their membership names
    saves: list = field(default_factory=list)          # checkpoints: (claimed, executed)
    resumes: list = field(default_factory=list)        # resumes: (claimed, composed)
    noise_sq: dict = field(default_factory=dict)       # name -> [sum r^2, count]
    noise_samples: list = field(default_factory=list)  # per release: name -> the noise at
                                                       # fixed coordinates (`FRESH_COORDS`)
    changed_after_last: bool = False
    post_processed: int = 0

    def __post_init__(self) -> None:
        self._forwards: list[_Forward] = []
        self._batch = self._sampler = None
        self._coords: dict[str, Tensor] = {}
        self._pre: dict[str, Tensor] | None = None
        self._last: dict[str, Tensor] | None = None
        model, opt = self.engine.model, self.engine.optimizer
        self._names = {id(p): n for n, p in model.named_parameters()}
        from gnnprivacy._fixed_shapes import fixed_shapes

        device = next((p.device for p in model.parameters()), torch.device("cpu"))
        self._padded = bool(fixed_shapes(device))
        self._handles = [
            model.register_forward_pre_hook(self._on_forward, with_kwargs=True),
            model.register_forward_hook(self._on_output),
            opt.register_step_pre_hook(self._on_release),
            opt.register_step_post_hook(self._after_release)]

    # ------------------------------------------------------------------ model hooks
    def _on_forward(self, module, args, kwargs):
        if torch.is_grad_enabled():
            self._forwards.append(_Forward(args, dict(kwargs), torch.get_rng_state()))
        return None

    def _on_output(self, module, args, output):
        if not self._forwards or not isinstance(output, Tensor) or not output.requires_grad:
            return None
        rec = self._forwards[-1]

        def store(grad, rec=rec):
            rec.delta = grad.detach() if rec.delta is None else rec.delta + grad.detach()

        output.register_hook(store)
        return None

    def note_batch(self, batch, sampler=None) -> None:
        """The batch a loader drew for the next step, and its sampler (the audit's sampler
        wrapper)."""
        self._batch = batch
        self._sampler = sampler

    # ------------------------------------------------------------------ engine boundary
    def noised(self, sums: dict[str, Tensor], num: int) -> None:
        """Called with the pre-noise sums of one executed step (before the update)."""
        forwards, self._forwards = self._forwards, []
        batch, self._batch = self._batch, None
        used = next((f for f in forwards if f.delta is not None), None)
        member = membership_of(list(used.args) + list(used.kwargs.values())) if used else None
        if member is None and batch is not None:
            member = membership_of([batch])
        if self._padded:               # fixed-shape batches carry padding: not read
            member = None
        self.members.append(member)
        self.sizes.append(int(num))
        if member is not None and member.centers.numel() != int(num):
            self.row_faults.append(f"step {len(self.sizes) - 1}: the engine clipped {int(num)} "
                                   f"subgraphs, the batch's membership names "
                                   f"{member.centers.numel()}")
        elif batch is not None and self._sampler is not None:
            fault = rows_disagree(batch, self._sampler)
            if fault is not None:
                self.row_faults.append(f"step {len(self.sizes) - 1}: {fault}")
        self._pre = {n: s.detach().clone() for n, s in sums.items()}
        if used is not None and num > 0 and len(self.clip_checks) < self.replay_steps:
            seg = None if batch is None else getattr(batch, "batch", None)
            self.clip_checks.append(self._replay(used, sums, num, seg))

    def _replay(self, fwd: _Forward, sums: dict[str, Tensor], num: int, seg) -> dict:
        """Per-subgraph gradients recomputed on a hook-free copy, clipped per group at the
        reported norms, against the engine's pre-noise sum."""
        from gnnprivacy.training.dp.clipping import clip_factors

        twin = _hook_free_copy(self.engine.model)
        params = dict(twin.named_parameters())
        names = [n for n in sums if n in params]
        state = torch.get_rng_state()
        torch.set_rng_state(fwd.rng)
        try:
            with torch.enable_grad():
                out = twin(*fwd.args, **fwd.kwargs)
        finally:
            torch.set_rng_state(state)
        delta = fwd.delta
        if out.shape != delta.shape:
            return {"checked": False, "why": "the replayed output differs in shape"}
        if out.shape[0] == num:
            rows = torch.arange(num, device=out.device)
        elif seg is not None and seg.shape[0] == out.shape[0]:
            rows = seg.to(out.device)
        else:
            return {"checked": False, "why": "output rows cannot be assigned to subgraphs"}
        shape = (-1,) + (1,) * (delta.dim() - 1)
        per = [torch.zeros((num,) + params[n].shape, dtype=torch.float64) for n in names]
        for s in range(num):
            mask = (rows == s).to(delta.dtype).view(shape)
            grads = torch.autograd.grad(out, [params[n] for n in names], delta * mask,
                                        retain_graph=s + 1 < num, allow_unused=True)
            for k, g in enumerate(grads):
                if g is not None:
                    per[k][s] = g.detach().double().cpu()
        index = {n: k for k, n in enumerate(names)}
        engine_sum = {n: sums[n].detach().double().cpu() for n in names}
        best = None
        for scale in (1.0, float(num)):             # sum or mean reduction of the loss
            ref = {n: torch.zeros(params[n].shape, dtype=torch.float64) for n in names}
            whole = torch.zeros(num, dtype=torch.float64)   # each subgraph's clipped norm^2
            for group in self.engine.groups:
                mine = [n for n in group.names if n in index]
                if not mine:
                    continue
                norm = torch.stack([(per[index[n]] * scale).flatten(1).square().sum(1)
                                    for n in mine]).sum(0).sqrt()
                factor = clip_factors(norm, group.clip_norm)
                whole += (factor * norm).square()
                for n in mine:
                    w = factor.view((-1,) + (1,) * (per[index[n]].dim() - 1))
                    ref[n] = (per[index[n]] * scale * w).sum(0)
            diff = sum(float((engine_sum[n] - ref[n]).square().sum()) for n in names) ** 0.5
            size = sum(float(ref[n].square().sum()) for n in names) ** 0.5
            if best is None or diff < best["difference"]:
                best = {"checked": True, "difference": diff, "reference_norm": size,
                        "engine_norm": sum(float(engine_sum[n].square().sum())
                                           for n in names) ** 0.5,
                        "max_clipped_norm": float(whole.sqrt().max()), "loss_scale": scale,
                        "subgraphs": num}
        return best

    # ------------------------------------------------------------------ optimizer hooks
    def _on_release(self, optimizer, args, kwargs):
        pre, self._pre = self._pre, None
        grads = {self._names[id(p)]: p.grad for g in optimizer.param_groups
                 for p in g["params"] if id(p) in self._names and p.grad is not None}
        if pre is None:
            self.unnoised.append(sorted(grads))
            return None
        missing = sorted(set(grads) - set(pre))
        if missing:
            self.unnoised.append(missing)
        if self.engine.update_clamp is not None:
            return None
        scale = self.engine.expected_batch_size
        sample = {}
        for name, s in pre.items():
            g = grads.get(name)
            if g is None:
                continue
            r = g.detach().double() * scale - s.double()
            acc = self.noise_sq.setdefault(name, [0.0, 0])
            acc[0] += float(r.square().sum())
            acc[1] += int(r.numel())
            index = self._coords.get(name)
            if index is None:
                index = self._coords[name] = _coordinates(r.numel(), len(self._coords))
            sample[name] = r.reshape(-1)[index.to(r.device)].cpu()
        self.noise_samples.append(sample)
        return None

    def _after_release(self, optimizer, args, kwargs):
        self.releases += 1
        self._keep_released()
        return None

    def _keep_released(self) -> None:
        """The parameters now are the released ones (`finish` compares against them)."""
        self._last = {n: p.detach().clone() for n, p in self.engine.model.named_parameters()}

    def note_post_processing(self) -> None:
        """A declared post-processing changed the parameters (`audit_hooks.
        note_post_processing`): counted, and its result taken as the released state."""
        self.post_processed += 1
        self._keep_released()

    @property
    def executed(self) -> int:
        """Steps of this run executed so far: the releases observed, plus those a resume
        carried over from a checkpoint."""
        return self.releases + sum(composed for _, composed in self.resumes)

    def finish(self) -> None:
        """Remove the hooks; note whether the parameters moved after the last release."""
        for h in self._handles:
            h.remove()
        self._handles = []
        if self._last is not None:
            now = dict(self.engine.model.named_parameters())
            self.changed_after_last = any(
                n in now and not torch.equal(now[n].detach(), v) for n, v in self._last.items())
