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
AUDIT = ["tests/auditing/test_code_audit_boundary.py", "-k",
         "flagged_by_its_check and none or per_tensor"]
DP = "tests/training/dp/test_dp_clipping.py tests/training/dp/test_dp_engine.py"
SAMPLING = "tests/sampling/test_heter_poisson.py tests/sampling/test_minibatch_samplers.py"
BOUNDED = "tests/sampling/test_degree_bounded.py"
PRIVATE = "tests/training/private/test_make_private.py"
ACCOUNTING = "tests/accounting/test_accountants.py"
PINS = "tests/privacy_regression/test_pins.py"
SHARDED = "tests/training/test_sharded_units.py tests/training/test_sharded_private.py"
ROUNDS = "tests/datasets/test_shards_properties.py -k bounding"


@dataclass(frozen=True)
class Mutant:
    """One in-memory mutation: ``old`` -> ``new`` in ``module:qualname``'s source.

    Attributes:
        id: short name; area: clip | noise | rate | steps | ledger | occurrence.
        tests: the pytest paths expected to kill it (space-separated).
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
    Mutant("clip-groups-2C", "clip", "gnnprivacy.training.dp.clipping:clip_and_sum",
           "clip_factors(group_norms[k], group.clip_norm)",
           "clip_factors(group_norms[k], 2 * group.clip_norm)", DP),
    Mutant("clip-eff-max", "clip", "gnnprivacy.training.dp.clipping:effective_clip_norm",
           "math.sqrt(sum(g.clip_norm ** 2 for g in groups))",
           "max(g.clip_norm for g in groups)", DP),
    Mutant("clip-rows-2C", "clip",
           "gnnprivacy.training.private.make_private:PrivateTraining._clipped_sums",
           "clipping.clip_factors(total.sqrt(), self.max_grad_norm)",
           "clipping.clip_factors(total.sqrt(), 2 * self.max_grad_norm)", PRIVATE),
    Mutant("clip-diag-norms", "clip", "gnnprivacy.training.dp.clipping:clip_and_sum",
           "total_sq = total_sq + sq", "total_sq = sq", DP,
           note="equivalent for the release: the total norms are a diagnostic (the clipped "
                "sums use the per-group factors); a test of the reported norms with "
                "several groups would kill it"),
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
           "gnnprivacy.training.private.samplers:NodeSubgraphs.sample",
           "rng.uniform(STREAM_CENTRAL, self.train_nodes) < self._rate]",
           "rng.uniform(STREAM_CENTRAL, self.train_nodes) < min(1.0, 2 * self._rate)]",
           SHARDED),
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
