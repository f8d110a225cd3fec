"""Mutation testing of the privacy-critical code (issue 32 part 2).

`MUTANTS` is the committed list: each replaces one snippet of one function (the clip, the
noise, the sampling rate, the step count, the ledger, the occurrence bound) in memory, and
names the tests that should kill it; every mutant is also run against the code audit
(`--mode code` on the honest paths of `test_code_audit_boundary`). The whole set is one
command, ``python tools/mutation_test.py`` (docs/mutation-testing.md); this module runs a
quick subset in-process and checks that every mutant still applies to the current source.
"""

from __future__ import annotations

import __future__
import importlib
import inspect
import sys
import textwrap
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

#: the code audit as a killer: its honest-path tests fail when the audit flags a mutant
#: (every shipped path, publication and fresh-noise checks included)
AUDIT = ["tests/auditing/test_code_audit_boundary.py", "tests/auditing/test_every_path_audited.py",
         "-k", "flagged_by_its_check and none or per_tensor or every_check_is_made"]
DP = "tests/training/dp/test_dp_clipping.py tests/training/dp/test_dp_engine.py"
SAMPLING = "tests/sampling/test_heter_poisson.py tests/sampling/test_minibatch_samplers.py"
BOUNDED = "tests/sampling/test_degree_bounded.py"
PRIVATE = "tests/training/private/test_make_private.py"
SEGMENTS = "tests/training/dp/test_segments.py"
ACCOUNTING = "tests/accounting/test_accountants.py"
PINS = "tests/privacy_regression/test_pins.py"
EDGES = "tests/training/private/test_edge_sampler.py"
EDGE_AUDIT = "tests/auditing/test_code_audit_edges.py"
EDGE_RELEASE = "tests/training/private/test_edge_inference.py"
EDGE_EVENT = "tests/accounting/test_edge_event.py"
SHARDED = "tests/training/test_sharded_units.py tests/training/test_sharded_private.py"
ROUNDS = "tests/datasets/test_shards_properties.py -k bounding"
SHARDED_EDGES = "tests/training/test_sharded_edges.py"
STATE = "tests/training/private/test_state_between_steps.py"
GROUPS = "tests/training/private/test_graph_groups.py"
EVERY = "tests/auditing/test_every_path_audited.py::test_every_check_is_made_and_passes_on_every_path"


def on_path(path: str) -> str:
    """The honest audit test of one shipped path (`audit_paths.PATHS`) as a killer."""
    return f"{EVERY}[{path}]"


@dataclass(frozen=True)
class Mutant:
    """One in-memory mutation: ``old`` -> ``new`` in ``module:qualname``'s source.

    Attributes:
        id: short name; area: clip | noise | rate | steps | ledger | occurrence.
        tests: the pytest paths (or node ids) expected to kill it (space-separated).
        note: why a survivor survives (empty for a mutant that must be killed).
    """

    id: str
    area: str
    target: str
    old: str
    new: str
    tests: str
    note: str = ""


MUTANTS = [
    # ------------------------------------------------------------------ clip
    Mutant("clip-factor-2C", "clip", "gnnprivacy.training.dp.clipping:clip_factors",
           "torch.where(norms > c,", "torch.where(norms > 2 * c,", DP),
    Mutant("clip-groups-2C", "clip", "gnnprivacy.training.dp.clipping:clip_contributions",
           "clip_factors(norms, group.clip_norm)",
           "clip_factors(norms, 2 * group.clip_norm)", DP + " " + PRIVATE),
    Mutant("clip-eff-max", "clip", "gnnprivacy.training.dp.clipping:effective_clip_norm",
           "math.sqrt(sum(g.clip_norm ** 2 for g in groups))",
           "max(g.clip_norm for g in groups)", DP),
    Mutant("clip-rows-mean-scale", "clip",
           "gnnprivacy.training.private.make_private:PrivateTraining._checked_sums",
           'scale = float(layout.num_subgraphs) if self.loss_reduction == "mean" else 1.0',
           "scale = 1.0", PRIVATE),
    Mutant("clip-diag-norms", "clip", "gnnprivacy.training.dp.clipping:clip_contributions",
           "total = sq if total is None else total + sq", "total = sq", DP,
           note="equivalent for the release: the total norms are a diagnostic (the clipped "
                "sums use the per-group factors); a test of the reported norms with "
                "several groups would kill it"),
    Mutant("clip-gram-pairs", "clip", "gnnprivacy.training.dp.segments:GramNorms._compute",
           "out.index_add_(1, pairs.owner, cross, alpha=2)",
           "out.index_add_(1, pairs.owner, cross, alpha=0)", SEGMENTS + " " + PRIVATE),
    Mutant("clip-chunk-norms-quarter", "clip", "gnnprivacy.training.dp.segments:_chunked_norms",
           "weight = _chunk_grads(a, d, chunks, ordered=False).square().sum(1)",
           "weight = _chunk_grads(a, d, chunks, ordered=False).square().sum(1) / 4",
           SEGMENTS + " " + PRIVATE),
    Mutant("clip-bookkeeping-unscaled", "clip",
           "gnnprivacy.training.dp.flat_rules:_scaled_product",
           "return (d * c_rows).t() @ a", "return d.t() @ a", PRIVATE),
    Mutant("clip-bookkeeping-unscaled-narrow", "clip",
           "gnnprivacy.training.dp.flat_rules:_scaled_product",
           "return ((a * c_rows).t() @ d).t()", "return (a.t() @ d).t()", PRIVATE),
    Mutant("clip-per-row-norms-quarter", "clip", "gnnprivacy.training.dp.clipping:"
           "clip_contributions", "sq = grads.square().sum(1)",
           "sq = grads.square().sum(1) / 4", SEGMENTS + " " + PRIVATE),
    # ------------------------------------------------------------------ noise
    Mutant("noise-std-reported-half", "noise",
           "gnnprivacy.training.dp.engine:DPEngine.noise_std",
           "return self.noise_multiplier * self.clip_norm",
           "return self.noise_multiplier * self.clip_norm / 2", DP),
    Mutant("noise-add-half", "noise", "gnnprivacy.training.dp.engine:DPEngine.add_noise",
           "noised_flat(sums, self.noise_std,", "noised_flat(sums, self.noise_std / 2,", DP),
    Mutant("noise-draw-half", "noise", "gnnprivacy.training.dp.noise:gaussian_noise",
           "z.mul_(std)", "z.mul_(std / 2)", DP),
    Mutant("noise-one-param", "noise", "gnnprivacy.training.dp.noise:noised_flat",
           "gaussian_noise(flat, std, generator=generator, secure=secure)",
           "gaussian_noise(flat, std, generator=generator, secure=secure) * ("
           "torch.arange(flat.numel(), device=flat.device) >= values[0].numel())", DP),
    Mutant("noise-zero-below-1", "noise", "gnnprivacy.training.dp.noise:gaussian_noise",
           "if std == 0:", "if std < 1:", DP),
    # ------------------------------------------------------------------ sampling rate
    Mutant("rate-heterpoisson-2q", "rate",
           "gnnprivacy.sampling.heter_poisson:HeterPoissonSampler.sample",
           "poisson_subset(cand.numel(), self.q_b, generator)",
           "poisson_subset(cand.numel(), min(1.0, 2 * self.q_b), generator)", SAMPLING),
    Mutant("rate-poisson-2q", "rate", "gnnprivacy.sampling.minibatch:poisson_subset",
           "torch.tensor([float(rate)], dtype=torch.float64)",
           "torch.tensor([min(1.0, 2 * float(rate))], dtype=torch.float64)", SAMPLING),
    Mutant("rate-fixed-2m", "rate", "gnnprivacy.sampling.minibatch:NodeBatchSampler.sample",
           "uniform_subset(self.num_items, self.batch_size, generator)",
           "uniform_subset(self.num_items, min(self.num_items, 2 * self.batch_size), "
           "generator)", SAMPLING),
    Mutant("rate-nodes-plan-2q", "rate",
           "gnnprivacy.training.private.samplers:NodeSubgraphs.plan",
           "self._rate = q", "self._rate = min(1.0, 2 * q)", PRIVATE),
    # ------------------------------------------------------------------ step count
    Mutant("steps-one-more", "steps",
           "gnnprivacy.training.node_dp.base:NodeDPTrainer._run",
           "for t in range(start, steps):", "for t in range(start, steps + 1):",
           "tests/training/dp/test_node_dp_heterpoisson.py"),
    Mutant("steps-loader-one-more", "steps",
           "gnnprivacy.training.private.make_private:PrivateLoader.__len__",
           "return min(pt.steps_planned - pt.steps, pt._steps_per_pass())",
           "return min(pt.steps_planned - pt.steps + 1, pt._steps_per_pass() + 1)", PRIVATE,
           note="equivalent: _draw refuses a step past the plan and yields nothing, so the "
                "extra iteration releases nothing"),
    # ------------------------------------------------------------------ ledger
    Mutant("ledger-skip-first", "ledger", "gnnprivacy.training.dp.engine:DPEngine.apply",
           "if self.accountant is not None:",
           "if self.accountant is not None and self.steps_ > 1:", DP),
    Mutant("ledger-merge-max", "ledger", "gnnprivacy.accounting.ledger:Ledger.record",
           "LedgerEntry(event, last.count + count)",
           "LedgerEntry(event, max(last.count, count))", ACCOUNTING),
    Mutant("ledger-count-ignored", "ledger", "gnnprivacy.accounting.base:Accountant.compose",
           "[leaf, 0])[1] += n", "[leaf, 0])[1] += 1", ACCOUNTING),
    # ------------------------------------------------------------------ occurrence bound
    Mutant("occ-greedy-K+1", "occurrence",
           "gnnprivacy.sampling.degree_bounded:_greedy_pass",
           "if count[u] >= k or u in sv:", "if count[u] > k or u in sv:", BOUNDED),
    Mutant("occ-bound-K", "occurrence",
           "gnnprivacy.sampling.degree_bounded:BoundedSubgraphs.max_occurrence",
           "return self.max_degree + 1", "return self.max_degree", BOUNDED),
    Mutant("occ-moore-minus-1", "occurrence",
           "gnnprivacy.training.private.samplers:occurrence_bound",
           "return 1 + max_degree * sum(", "return max_degree * sum(", PRIVATE),
    # the sharded path (issue 47): the keyed samples, the bounding rounds, one noise draw
    Mutant("rate-keyed-nodes-2q", "rate",
           "gnnprivacy.training.private.samplers:SubgraphSampler._poisson_train_nodes",
           "rng.uniform(STREAM_CENTRAL, self.train_nodes) < self._rate]",
           "rng.uniform(STREAM_CENTRAL, self.train_nodes) < min(1.0, 2 * self._rate)]",
           f"{SHARDED} {SHARDED_EDGES} {on_path('sharded:edges')}"),
    Mutant("rate-keyed-bounded-2m", "rate",
           "gnnprivacy.training.private.samplers:DegreeBoundedSubgraphs._seeds",
           "u <= self._kth_key(u, self._m)", "u <= self._kth_key(u, 2 * self._m)", SHARDED),
    Mutant("noise-sharded-every-rank", "noise",
           "gnnprivacy.training.distributed:DistributedDPEngine.reduce_noised",
           "if rank == self.noise_rank:", "if True:", SHARDED),
    Mutant("occ-rounds-one-sided", "occurrence",
           "gnnprivacy.sampling.bounded_rounds:PartRounds.incoming",
           "agreed = self.prop[prop_rows] == sources[~full]",
           "agreed = self.prop[prop_rows] >= -1", ROUNDS),
    Mutant("occ-rounds-full-at-K+1", "occurrence",
           "gnnprivacy.sampling.bounded_rounds:PartRounds.incoming",
           "rows_k[self.count[rows_k] >= self.k]", "rows_k[self.count[rows_k] > self.k]",
           ROUNDS),
    Mutant("occ-no-overlap-removal", "occurrence",
           "gnnprivacy.sampling.heter_poisson:HeterPoissonSampler.sample",
           "if self.enforce_no_overlap and centers.numel()",
           "if False and self.enforce_no_overlap and centers.numel()", SAMPLING),
    # ------------------------------------------------------------------ the edge unit
    Mutant("occ-edge-undirected-as-one", "occurrence",
           "gnnprivacy.training.private.edge_sampler:edge_occurrence_bound",
           "(2 if undirected else 1)", "1", EDGES),
    Mutant("occ-edge-ball-short", "occurrence",
           "gnnprivacy.training.private.edge_sampler:ball_size",
           "for j in range(hops))", "for j in range(hops - 1))", EDGES),
    Mutant("occ-edge-no-displacement", "occurrence",
           "gnnprivacy.training.private.edge_sampler:edge_bounding_factor",
           "return 2 if max_in_degree is None else 3", "return 1", EDGES),
    Mutant("occ-edge-one-hop-deeper", "occurrence",
           "gnnprivacy.training.private.edge_sampler:subgraph_entries",
           "for _ in range(int(hops)):", "for _ in range(int(hops) + 1):",
           f"{EDGES} {EDGE_AUDIT}"),
    Mutant("rate-edges-plan-2q", "rate",
           "gnnprivacy.training.private.edge_sampler:EdgeSubgraphs.plan",
           "self._rate = q", "self._rate = min(1.0, 2 * q)", EDGE_AUDIT),
    Mutant("noise-edge-group-ignored", "noise",
           "gnnprivacy.accounting.pld_builders:edge_subgraph_pld",
           "m = event.group", "m = event.occurrence", EDGE_EVENT),
    Mutant("noise-edge-release-half", "noise",
           "gnnprivacy.training.private.edge_inference:ReleasePlan.noise_std",
           "return self.noise_multiplier * self.clip * self.row_factor",
           "return self.noise_multiplier * self.clip * self.row_factor / 2", EDGE_RELEASE),
    Mutant("clip-edge-release-messages", "clip",
           "gnnprivacy.training.private.edge_inference:_clip_rows",
           "(bound / norms).clamp(max=1.0)", "(2 * bound / norms).clamp(max=1.0)",
           EDGE_RELEASE),
    Mutant("noise-edge-release-one-row", "noise",
           "gnnprivacy.training.private.edge_inference:plan_release",
           "math.sqrt(2.0) if undirected else 1.0", "1.0", EDGE_RELEASE),
    Mutant("publish-refit-reads-edges", "publication",
           "gnnprivacy.training.edge_dp:EdgeDPTrainer._refit",
           "return self.predictor_.refit(encoded, data.y,",
           "return self.predictor_.refit(encoded.index_add(0, data.edge_index[1], "
           "encoded[data.edge_index[0]]), data.y,", on_path("method:edge-dp")),
    Mutant("publish-refit-global-stream", "publication",
           "gnnprivacy.training.edge_dp:EdgeDPTrainer._refit",
           "torch.manual_seed(seed)", "pass", on_path("method:edge-dp")),
    # ------------------------------------------------------------------ edges over shards
    Mutant("occ-sharded-edges-directed", "occurrence",
           "gnnprivacy.training.sharded_edges:ShardedEdgeSubgraphs.setup",
           'self.undirected_ = (bool(symmetric) if self.edge_unit == "auto"',
           'self.undirected_ = (False if self.edge_unit == "auto"', SHARDED_EDGES,
           note="not by the code audit: it reads the unit (one directed entry or both) from "
                "the event, and a directed unit on a symmetric graph is a scope the record "
                "states (edge_unit='directed'), not a bug it can tell from the run; the "
                "comparison with one process catches it (occurrence 2 there, 1 here)"),
    # ------------------------------------------------------------------ issue 43's classes
    Mutant("occ-graph-drawn-twice", "occurrence",
           "gnnprivacy.training.private.graph_sampler:GraphSampler._nodes_batch",
           "return self.collate(nodes)", "return self.collate(torch.cat([nodes, nodes[:1]]))",
           on_path("make_private:graphs")),
    Mutant("publish-norm-user-loop", "publication",
           "gnnprivacy.training.private.make_private:PrivateTraining.step",
           "self.engine.release(sums, layout.num_subgraphs)",
           "self.engine.release(sums, layout.num_subgraphs); print('clipped norm', "
           "sum(float(v.double().square().sum()) for v in sums.values()) ** 0.5)",
           on_path("make_private:nodes")),
    Mutant("publish-norm-trainer", "publication",
           "gnnprivacy.training.dp.engine:DPEngine.clipped",
           "clipped = clip_and_sum(self.capture, losses, self.groups, row_mask=row_mask)",
           "clipped = clip_and_sum(self.capture, losses, self.groups, row_mask=row_mask); "
           "__import__('logging').getLogger('gnnprivacy').info('clipped norm %s', "
           "sum(float(v.double().square().sum()) for v in clipped.sums.values()))",
           on_path("method:dpgnn")),
    Mutant("noise-reused", "noise", "gnnprivacy.training.dp.engine:DPEngine.add_noise",
           "generator=self.generator,", "generator=self.generator.manual_seed(1),",
           on_path("method:dpgnn")),
    Mutant("noise-event-other", "noise",
           "gnnprivacy.training.private.make_private:PrivateTraining.__init__",
           "self.event = self.plan.event_factory(self.noise_multiplier)",
           "self.event = self.plan.event_factory(2 * self.noise_multiplier)",
           on_path("make_private:nodes")),
    Mutant("rate-event-all-nodes", "rate",
           "gnnprivacy.training.private.samplers:NodeSubgraphs.plan",
           "_privacy.dpsgd_event_factory(sample_rate=q)",
           "_privacy.dpsgd_event_factory(sample_rate=min(1.0, m / self.num_nodes))",
           on_path("make_private:nodes")),
    Mutant("clip-loss-scale", "clip",
           "gnnprivacy.training.dp.clipping:clip_contributions",
           "sq = sq * (scale * scale)", "sq = sq",
           f"{PRIVATE} {on_path('make_private:heterpoisson')}"),
    Mutant("resume-one-fewer", "resume",
           "gnnprivacy.training.private.make_private:PrivateTraining.load_state_dict",
           "self.accountant.compose(self.event, done)",
           "self.accountant.compose(self.event, done - 1)",
           "tests/auditing/test_fresh_noise_and_resume.py::"
           "test_an_honest_resume_passes_as_one_run"),
    Mutant("guard-kept-tensor", "guard",
           "gnnprivacy.training.private.guards:LoopGuard._check_kept",
           "if before.get(key) != value:", "if False:", STATE),
    Mutant("guard-between-steps", "guard",
           "gnnprivacy.training.private.guards:LoopGuard._since_step",
           "if state != before:", "if False:", STATE),
    Mutant("guard-custom-function", "guard",
           "gnnprivacy.training.private.guards:_custom_function",
           "if isinstance(node, torch.autograd.function.BackwardCFunction):", "if False:",
           STATE),
    Mutant("guard-cut-loop", "guard", "gnnprivacy.training.private.guards:LoopGuard.stop",
           "self.trace.cut = self.trace.cut or cut", "self.trace.cut = False", STATE),
    Mutant("units-duplicates-silent", "units",
           "gnnprivacy.training.private.graph_sampler:GraphSampler._set_groups",
           "if loose:", "if False:", GROUPS),
    Mutant("units-group-noise", "units",
           "gnnprivacy.training.private.graph_sampler:GraphSampler.plan",
           "noise_scale=float(k)", "noise_scale=1.0", GROUPS),
]


def _resolve(target: str):
    """``(owner, name, current attribute)`` of ``module:qualname``."""
    module_name, qualname = target.split(":")
    owner = importlib.import_module(module_name)
    *path, name = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)
    return owner, name, inspect.getattr_static(owner, name)


def _source(obj) -> str:
    func = obj.fget if isinstance(obj, property) else obj
    return textwrap.dedent(inspect.getsource(func))


def mutated(mutant: Mutant):
    """The mutated attribute (function, method or property) compiled in its module."""
    owner, name, current = _resolve(mutant.target)
    src = _source(current)
    if src.count(mutant.old) != 1:
        raise LookupError(f"mutant {mutant.id}: {mutant.old!r} occurs {src.count(mutant.old)} "
                          f"times in {mutant.target}, expected once (stale mutant)")
    module = sys.modules[mutant.target.split(":")[0]]
    namespace = dict(vars(module))
    exec(compile(src.replace(mutant.old, mutant.new), f"<mutant {mutant.id}>", "exec",
                 flags=__future__.annotations.compiler_flag, dont_inherit=True), namespace)
    return owner, name, current, namespace[name]


@contextmanager
def applied(mutant: Mutant):
    """Apply ``mutant`` in memory (every module that imported the function by name sees it
    too); undone on exit."""
    owner, name, current, new = mutated(mutant)
    patches = [(owner, name, current)]
    if inspect.ismodule(owner):          # a function imported by name elsewhere
        for mod in list(sys.modules.values()):
            if (getattr(mod, "__name__", "").startswith("gnnprivacy") and mod is not owner
                    and getattr(mod, name, None) is current):
                patches.append((mod, name, current))
    for obj, attr, _ in patches:
        setattr(obj, attr, new)
    try:
        yield
    finally:
        for obj, attr, old in patches:
            setattr(obj, attr, old)


def by_id(mutant_id: str) -> Mutant:
    return next(m for m in MUTANTS if m.id == mutant_id)


# ---------------------------------------------------------------------- the quick subset
@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.id)
def test_every_mutant_applies_to_the_current_source(mutant):
    owner, name, current, new = mutated(mutant)
    assert type(new) is type(current) and new is not current


QUICK = [("clip-groups-2C", "dpgnn"), ("noise-one-param", "heterpoisson"),
         ("ledger-skip-first", "dpmlp"), ("rate-nodes-plan-2q", "dpmlp"),
         ("noise-std-reported-half", "dpmlp")]
#: issue 43's classes the code audit kills, each on the shipped path of its killer
QUICK_PATHS = [(m.id, m.tests.split()[-1].split("[")[1][:-1]) for m in MUTANTS
               if m.tests.split()[-1].startswith(EVERY)]


@pytest.mark.parametrize("mutant_id, path", QUICK)
def test_quick_mutants_are_killed_by_the_code_audit(mutant_id, path):
    """A few mutants, in-process: the code audit of an honest path flags each one (and the
    same audit passes without the mutant: the honest tests of test_code_audit_boundary)."""
    import gnnprivacy as gp
    from test_code_audit_boundary import audit_path

    data = gp.load_dataset("csbm", num_nodes=400, seed=0)
    with applied(by_id(mutant_id)):
        result = audit_path(path, data)
    assert result.violation, result.summary()


@pytest.mark.parametrize("mutant_id, path", QUICK_PATHS)
def test_issue_43_mutants_are_killed_by_the_audit_of_their_path(mutant_id, path):
    """Each of issue 43's classes the code audit covers (a graph drawn twice, a published
    norm, a reused draw, an event under another noise, the rate over all nodes, the loss
    scale), in-process: the audit of the path it breaks flags it."""
    from audit_paths import audit

    with applied(by_id(mutant_id)):
        result = audit(path)
    assert result.violation, result.summary()


SLOW_KILLS = [m for m in MUTANTS if m.area in ("guard", "units", "resume")]


@pytest.mark.slow
@pytest.mark.parametrize("mutant", SLOW_KILLS, ids=lambda m: m.id)
def test_guard_unit_and_resume_mutants_are_killed_by_their_tests(mutant):
    """Issue 43's loop-guard, unit and resume mutants: their tests fail under each (one
    process per mutant, as tools/mutation_test.py runs them)."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, str(root / "tools" / "mutation_test.py"),
                           "--apply", mutant.id, "--", *mutant.tests.split()],
                          cwd=root, capture_output=True, text=True, timeout=1800)
    assert proc.returncode != 0, f"{mutant.id} survived {mutant.tests}: {proc.stdout[-500:]}"


def test_the_mutation_tool_refuses_a_stale_mutant(monkeypatch, capsys):
    """A mutant whose snippet no longer occurs fails every run it is applied to; the tool
    stops before running (exit 2, naming it) instead of counting it as killed. Control: the
    same mutant with its snippet present gets past the check (a run with no killer)."""
    import dataclasses
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("mutation_tool",
                                                  root / "tools" / "mutation_test.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    real = by_id("rate-keyed-nodes-2q")
    stale = dataclasses.replace(real, old=real.old + "  # moved")
    monkeypatch.setattr(tool.test_mutants, "by_id", lambda i: stale)
    assert tool.main(["--only", "rate-keyed-nodes-2q"]) == 2
    assert "stale mutant" in capsys.readouterr().err
    ran = []
    monkeypatch.setattr(tool.test_mutants, "by_id", lambda i: real)
    monkeypatch.setattr(tool, "_killed", lambda *a: ran.append(a) or (True, 0.0, ""))
    assert tool.main(["--only", "rate-keyed-nodes-2q"]) == 0 and len(ran) == 2
