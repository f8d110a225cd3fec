"""Hyperparameter tuning whose privacy cost is counted (``gnnprivacy tune -c tune.yaml``).

Papernot & Steinke (ICLR 2022): a random number ``K`` of trials (truncated negative
binomial or Poisson, `gnnprivacy.accounting.hparam_tuning`); each trial draws a
setting uniformly from the grid, trains it through `gnnprivacy.method.runner.run`
(the same code path as ``gnnprivacy train``) and scores it on the validation nodes; only the
best trial (highest noisy score) is released. The released model's record carries the total
epsilon (training + selection), beside the figure a paper would print if it ignored the
selection (the per-trial training epsilon).

One trial ``Q`` = (DP training at a per-trial budget ``eps_t``) followed by (a Gaussian
release of the number of correctly classified validation nodes, std ``score_noise *
sensitivity``). ``Q``'s RDP curve is the maximum over the grid of the composition of the
two; `tuned_rdp` gives the tuned algorithm's
curve, converted to ``(epsilon, delta)``. ``eps_t`` is found by a secant search so that the
total is at most the target; each setting is planned as it runs at ``eps_t`` (the adaptive
defaults choose the steps from the epsilon). The recorded total is composed from what ran:
each executed trial's ledger (its RDP curve) in place of its setting's plan, the plans of
the settings not drawn beside them (``Q`` may draw any of them); a total above the target
is refused (issue 22 item 2: Cora dpmlp recorded 7.901 for an executed 7.982).

Selection randomness: ``K``, the settings drawn, each trial's seed and the score noise come
from the OS CSPRNG (the Papernot-Steinke bound assumes them secret). ``reproducible_selection:
true`` (CLI ``--reproducible-selection``) derives them from ``seed`` instead, which is also
the public split seed: the record then says the selection is public and that the total
epsilon does not hold against anyone who knows the seed.

Training noise: the released record carries the chosen trial's configuration, seed included,
so a trial trained with seeded noise could be retrained bit for bit from it, noise and all.
The trials therefore draw their training noise from the OS CSPRNG (``secure_mode: true``)
whenever the selection is secret; ``base.secure_mode: false``, or a reproducible selection,
keeps seeded noise and the record lists "training noise public" under
``privacy.unaccounted``.

The YAML file:

```
name: computers-dpmlp
base: {method: dpmlp, dataset: computers, train_frac: 0.6, val_frac: 0.2, test_frac: 0.2}
grid: {lr: [0.003, 0.01, 0.03], hidden: [64, 128], layers: [2, 3]}
epsilon: 8              # target total epsilon (training + selection)
delta: null             # default: the method's default delta for N training nodes
trials: {distribution: negative_binomial, mean: 10, eta: 1}   # or {distribution: poisson, mean: 10}
score_noise: 5          # std of the validation-count noise, in units of its sensitivity
seed: 0                 # the split seed (public); the selection uses the OS CSPRNG
reproducible_selection: false   # true: the selection from `seed` (recorded as public)
compare: true           # also run the selection without accounting, for comparison
```

Privacy:
    Unit and relation: those of the tuned method (node; add/remove, or replace-one for
    DP-GNN with fixed batches). Covered: the released model and its noisy validation score.
    Public: the grid, the trial distribution, the split (drawn from a public seed), the
    dataset sizes (``N``, ``|V|``, number of validation nodes) and the graph's largest degree
    (the score sensitivity of graph models). Not covered: ``K`` and the other trials (kept
    in the tune record's ``internal`` section and the trial records, which must not be
    published), test metrics (evaluation), and whatever the method itself lists as
    unaccounted. The score sensitivity is 1 for ``dpmlp`` (a node changes only its own
    prediction) and ``1 + max degree`` for the one-layer graph models (a node also changes
    its neighbours' predictions); doubled under replace-one.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from gnnprivacy._validation import check_int, check_positive, check_real
from gnnprivacy.errors import InvalidParameterError, UnknownNameError

__all__ = ["TuneSpec", "tune", "load_tune_spec", "plan_spec", "plan_trial_budget"]

TUNE_KEYS = ("name", "base", "grid", "epsilon", "delta", "trials", "score_noise",
             "score_sensitivity", "seed", "reproducible_selection", "compare", "description")
#: the settings' plans must reproduce the recorded total within this (relative)
TOTAL_RTOL = 1e-9
TUNABLE_METHODS = ("dpmlp", "dpgnn", "heterpoisson", "dpsgd-graph")


@dataclasses.dataclass(frozen=True)
class TuneSpec:
    """A validated tuning description (see the module docstring)."""

    name: str
    base: dict[str, Any]
    grid: dict[str, tuple]
    epsilon: float
    delta: float | None = None
    trials: dict[str, Any] = dataclasses.field(
        default_factory=lambda: {"distribution": "negative_binomial", "mean": 10.0, "eta": 1.0})
    score_noise: float = 5.0
    score_sensitivity: float | None = None
    seed: int = 0
    reproducible_selection: bool = False
    compare: bool = True
    description: str = ""

    def __post_init__(self):
        if not isinstance(self.base, Mapping) or self.base.get("method") not in TUNABLE_METHODS:
            raise InvalidParameterError("base.method", "one of " + ", ".join(TUNABLE_METHODS),
                                        None if not isinstance(self.base, Mapping)
                                        else self.base.get("method"))
        for key in ("epsilon", "seed", "runs_dir"):
            if key in self.base or key in self.grid:
                raise InvalidParameterError(key, "absent from base and grid (set at top level "
                                            "or by the command)", key)
        if not isinstance(self.grid, Mapping) or not self.grid:
            raise InvalidParameterError("grid", "a non-empty mapping of key: [values]", self.grid)
        for key, values in self.grid.items():
            if not isinstance(values, tuple) or not values:
                raise InvalidParameterError(f"grid.{key}", "a non-empty list", values)
        check_positive("epsilon", self.epsilon)
        if self.delta is not None:
            check_real("delta", self.delta, low=0.0, high=1.0, low_open=True, high_open=True)
        check_positive("score_noise", self.score_noise)
        if self.score_sensitivity is not None:
            check_positive("score_sensitivity", self.score_sensitivity)
        check_int("seed", self.seed, low=0)
        if not isinstance(self.reproducible_selection, bool):
            raise InvalidParameterError("reproducible_selection", "true or false",
                                        self.reproducible_selection)
        self.distribution()  # validates trials

    def settings(self) -> list[dict[str, Any]]:
        """The grid's settings (cartesian product; mapping values are merged), as a sweep's."""
        from gnnprivacy.experiments.sweep import grid_cells

        return grid_cells(self.grid)

    def distribution(self):
        """The trial-count distribution."""
        from gnnprivacy.accounting.hparam_tuning import trials_distribution

        t = dict(self.trials)
        unknown = sorted(set(t) - {"distribution", "mean", "eta"})
        if unknown:
            raise UnknownNameError("trials key", unknown[0], ("distribution", "mean", "eta"))
        for key in ("mean", "eta"):  # named as the YAML names them, not as the accountant does
            if key in t and not (isinstance(t[key], (int, float)) and not isinstance(t[key], bool)):
                raise InvalidParameterError(f"trials.{key}", "a number", t[key])
        try:
            return trials_distribution(t.get("distribution", "negative_binomial"),
                                       mean=float(t.get("mean", 10.0)), eta=float(t.get("eta", 1.0)))
        except InvalidParameterError as exc:
            name = {"mu": "mean"}.get(exc.name, exc.name)
            raise InvalidParameterError(f"trials.{name}", exc.expected, exc.received) from None

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "tune") -> TuneSpec:
        """Validate a parsed tune file: every key once under its own name (``base`` and each
        grid value through the settings schema `check_settings`), ``base.delta`` kept as the
        tune's delta, the name safe as a file name."""
        from gnnprivacy.experiments.sweep import check_run_name, settings_of
        from gnnprivacy.method.config import check_settings

        if not isinstance(data, Mapping):
            raise InvalidParameterError("tune file", "a YAML mapping", type(data).__name__,
                                        where=source)
        unknown = sorted(set(data) - set(TUNE_KEYS))
        if unknown:
            raise UnknownNameError(f"tune key in {source}", unknown[0], TUNE_KEYS)
        for key in ("base", "grid", "epsilon"):
            if key not in data:
                raise InvalidParameterError(key, "present", None, where=source)
        if not isinstance(data["grid"], Mapping):
            raise InvalidParameterError("grid", "a non-empty mapping of key: [values]", data["grid"],
                                        where=source)
        base, grid = settings_of(data.get("base") or {}, data["grid"], where=source)
        kw = {k: data[k] for k in TUNE_KEYS if k in data and k not in ("grid", "base")}
        kw.setdefault("name", "tune")
        check_run_name("name", kw["name"], where=source)
        if "delta" in base:  # the tune's delta: the trials and the total are stated at it
            if kw.get("delta") is not None and kw["delta"] != base["delta"]:
                raise InvalidParameterError("base.delta", f"absent or equal to delta ({kw['delta']!r}): "
                                            "the tune has one delta", base["delta"], where=source)
            kw["delta"] = base.pop("delta")
        for key in ("epsilon", "delta", "score_noise", "score_sensitivity"):
            if kw.get(key) is not None:
                check_real(key, kw[key], where=source)
        for key in ("compare", "reproducible_selection"):
            if key in kw and not isinstance(kw[key], bool):
                raise InvalidParameterError(key, "true or false (unquoted)", kw[key], where=source)
        if not isinstance(kw.get("trials", {}), Mapping):
            raise InvalidParameterError("trials", "a mapping {distribution, mean, eta} (e.g. "
                                        "{distribution: poisson, mean: 5})", kw["trials"], where=source)
        kw["epsilon"] = float(kw["epsilon"])
        if kw.get("delta") is not None:
            kw["delta"] = float(kw["delta"])
        return cls(base=base, grid=grid, **kw)


def load_tune_spec(path: str | Path) -> TuneSpec:
    """Read and validate a tune YAML file."""
    from gnnprivacy.method.config import read_yaml_file

    return TuneSpec.from_dict(read_yaml_file(path, what="tune YAML file"), source=str(path))


# ---------------------------------------------------------------------- planning
def _orders() -> np.ndarray:
    # integer orders: dp_accounting's fractional-order series for sampled Gaussians is slow
    # and may not converge; fewer orders only loosen the bound
    return np.concatenate([np.arange(2.0, 129.0), [160.0, 256.0, 512.0, 1024.0]])


def _trial_plan(values: dict[str, Any], *, num_train: int, num_nodes: int,
                num_features: int | None = None, num_classes: int | None = None):
    """``(event factory, steps, accountant kind, relation)`` of one setting's training."""
    from gnnprivacy.accounting.units import NeighboringRelation
    from gnnprivacy.method.config import resolve_config
    from gnnprivacy.training import _privacy

    config, params = resolve_config(values)
    if config.method == "dpsgd-graph":      # Poisson over the training graphs (make_private)
        q = min(1.0, min(params.batch_size, num_train) / num_train)
        return (_privacy.dpsgd_event_factory(sample_rate=q),
                max(1, math.ceil(float(params.epochs) / q)), "pld",
                NeighboringRelation.ADD_OR_REMOVE)
    kw = params.trainer_kwargs(num_train=num_train, num_nodes=num_nodes,
                               num_features=num_features, num_classes=num_classes)
    method = config.method
    if method == "dpmlp":
        q = min(1.0, kw["batch_size"] / num_train)
        steps = kw["steps"] or math.ceil(kw["epochs"] / q)
        return (_privacy.dpsgd_event_factory(sample_rate=q), steps, "pld",
                NeighboringRelation.ADD_OR_REMOVE)
    if method == "dpgnn":
        m = kw["batch_size"] if kw["batch_size"] is not None else min(10000, num_train)
        steps = kw["steps"] or math.ceil(kw["epochs"] * num_train / m)
        relation = (NeighboringRelation.REPLACE if kw["sampling"] == "fixed"
                    else NeighboringRelation.ADD_OR_REMOVE)
        return (_privacy.dpgnn_event_factory(num_train=num_train, batch_size=m,
                                             max_degree=kw["max_degree"],
                                             sampling=kw["sampling"]), steps, "rdp", relation)
    if method == "heterpoisson":
        if kw["degree_public"]:
            raise InvalidParameterError("degree_public", "false when tuning (the accounted "
                                        "degree would depend on the graph)", True)
        q_b = kw["q_b"] if kw["q_b"] is not None else min(1.0, 4096.0 / num_nodes)
        steps = kw["steps"] or math.ceil(kw["epochs"] / q_b)
        factory = _privacy.heterpoisson_event_factory(
            q_b=q_b, M=kw["M"], max_out_degree=num_nodes - 1,
            overlap_removal=kw["enforce_no_overlap"], mode=kw["accounting"])
        return (factory, steps, _privacy.heterpoisson_accountant_kind(kw["accounting"]),
                NeighboringRelation.ADD_OR_REMOVE)
    raise InvalidParameterError("method", "one of " + ", ".join(TUNABLE_METHODS), method)


def _plans_at(settings, epsilon: float, **sizes) -> list:
    """The distinct plans of ``settings`` trained at ``epsilon`` (what each trial runs)."""
    plans: dict = {}
    for s in settings:
        plan = _trial_plan({**s, "epsilon": epsilon}, **sizes)
        plans.setdefault((plan[0], plan[1]), plan)
    return list(plans.values())


def _trial_rdp(plans, epsilon_t: float, delta: float, orders: np.ndarray,
               score_rdp: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """Max over settings of the RDP of one trial trained at ``epsilon_t``; noise multipliers."""
    from gnnprivacy.accounting.rdp_builders import event_rdp
    from gnnprivacy.training import _privacy

    curve = np.zeros_like(orders)
    noises = []
    for factory, steps, kind, relation in plans:
        nm = _privacy.calibrate(factory, steps=steps, epsilon=epsilon_t, delta=delta, kind=kind)
        noises.append(nm)
        curve = np.maximum(curve, steps * event_rdp(factory(nm), relation=relation,
                                                    orders=orders))
    return curve + score_rdp, noises


def plan_trial_budget(plans, *, epsilon: float, delta: float, distribution, score_std: float,
                      tol: float = 0.02, max_evaluations: int = 8) -> dict[str, Any]:
    """Largest per-trial training epsilon whose tuned total is at most ``epsilon``.

    Args:
        plans: ``(factory, steps, kind, relation)`` per distinct setting, or a function of
            the per-trial epsilon returning them (the steps may depend on it).
        epsilon: the target epsilon of the whole tuning.
        delta: the delta it is stated at.
        distribution: the trial-count distribution.
        score_std: std of the score noise divided by the score's sensitivity.
        tol: stop once the total is within ``tol`` (relative) below ``epsilon``.
        max_evaluations: accountant evaluations before settling for the best feasible point.

    Returns:
        ``{"training_epsilon", "total_epsilon", "noise_multipliers", "orders", "rdp"}``.

    Raises:
        InvalidParameterError: even an almost-free training leaves no room (the selection
            alone costs more than ``epsilon``).
    """
    from gnnprivacy.accounting.hparam_tuning import tuned_epsilon

    orders = _orders()
    score_rdp = orders / (2.0 * score_std ** 2)

    def total(eps_t):
        at = plans(eps_t) if callable(plans) else plans
        curve, noises = _trial_rdp(at, eps_t, delta, orders, score_rdp)
        return tuned_epsilon(orders, curve, distribution, delta), noises, curve

    # total(eps_t) is close to affine in eps_t: a few secant steps on that line, keeping the
    # largest feasible point (every evaluation is an exact accountant computation).
    tried: dict[float, tuple] = {}

    def evaluate(x):
        tried[x] = total(x)
        return tried[x][0]

    for x in (0.5 * epsilon, 0.25 * epsilon):
        evaluate(x)
    for _ in range(max_evaluations - 2):
        feasible = [x for x, r in tried.items() if r[0] <= epsilon]
        if feasible and tried[max(feasible)][0] >= (1 - tol) * epsilon:
            break
        (x1, t1), (x2, t2) = sorted(((x, r[0]) for x, r in tried.items()),
                                    key=lambda p: abs(p[1] - epsilon))[:2]
        slope = (t1 - t2) / (x1 - x2) if x1 != x2 else 1.0
        x_new = x1 + (epsilon * (1 - tol / 2) - t1) / slope if slope > 0 else 0.5 * x1
        x_new = min(max(x_new, 1e-4 * epsilon), epsilon)
        if x_new in tried:
            x_new *= 0.97
        evaluate(x_new)
    feasible = [x for x, r in tried.items() if r[0] <= epsilon]
    if not feasible:
        x = min(tried)
        while tried[x][0] > epsilon and x > 1e-4 * epsilon:
            x *= 0.5 * epsilon / tried[x][0]
            evaluate(x)
        feasible = [x for x, r in tried.items() if r[0] <= epsilon]
        if not feasible:
            raise InvalidParameterError("epsilon", "large enough for the selection (at a "
                                        f"training epsilon of {x:.3g} the total is "
                                        f"{tried[x][0]:.3g})", epsilon)
    best = (max(feasible), *tried[max(feasible)])
    eps_t, tot, noises, curve = best
    return {"training_epsilon": eps_t, "total_epsilon": tot, "noise_multipliers": noises,
            "orders": orders, "rdp": curve}


# ---------------------------------------------------------------------- running
def _graph_max_degree(data) -> int:
    import torch

    if data.edge_index.numel() == 0:
        return 0
    return int(torch.bincount(data.edge_index[0], minlength=int(data.num_nodes)).max())


def _as_spec(spec) -> TuneSpec:
    if isinstance(spec, (str, Path)):
        return load_tune_spec(spec)
    return spec if isinstance(spec, TuneSpec) else TuneSpec.from_dict(spec)


def plan_spec(spec: TuneSpec | Mapping[str, Any] | str | Path, *,
              data_root: str | None = None) -> dict[str, Any]:
    """Load the data once and plan the per-trial training epsilon (nothing is trained).

    Returns:
        A dict with ``training_epsilon``, ``total_epsilon``, ``delta``, ``settings`` (flat
        values per grid setting), ``score_sensitivity``, ``num_train``, ``num_nodes``,
        ``num_val``, ``config``, ``distribution`` and ``budget``.
    """
    from gnnprivacy.method.config import resolve_config
    from gnnprivacy.method.registry import get_method
    from gnnprivacy.method.data import load_run_data, split_kind

    spec = _as_spec(spec)
    base = dict(spec.base)
    if data_root is not None:
        base["data_root"] = data_root
    settings = [{**base, **s} for s in spec.settings()]
    graph_task = resolve_config({**settings[0], "epsilon": spec.epsilon})[0].task == "graph"
    if graph_task or split_kind(resolve_config({**settings[0], "epsilon": spec.epsilon})[0]
                                ) != "public":
        base.setdefault("split_seed", spec.seed)  # one split shared by every trial
        settings = [{**base, **s} for s in spec.settings()]
    config, _ = resolve_config({**settings[0], "epsilon": spec.epsilon})
    from gnnprivacy.training.defaults import graph_sizes

    data = load_run_data(config)
    if graph_task:      # a GraphSet: the units are graphs, scored on the validation graphs
        sizes = {"num_train": data.split.sizes["train"], "num_nodes": len(data.graphs),
                 "num_features": data.num_features, "num_classes": data.num_classes}
        num_val = data.split.sizes["val"]
    else:
        sizes = graph_sizes(data)
        num_val = int(data.val_mask.sum()) if getattr(data, "val_mask", None) is not None else 0
    num_train, num_nodes = sizes["num_train"], sizes["num_nodes"]
    if num_val == 0:
        raise InvalidParameterError("val_frac", "> 0 (selection needs validation nodes)",
                                    base.get("val_frac"))
    method = get_method(config.method)
    delta = spec.delta if spec.delta is not None else method.default_delta(
        num_nodes if config.method == "heterpoisson" else num_train)
    def plans(eps_t):
        return _plans_at(settings, eps_t, **sizes)

    at_target = plans(spec.epsilon)
    if spec.score_sensitivity is not None:
        sens = float(spec.score_sensitivity)
    else:
        # dpmlp: a node changes only its own prediction; dpsgd-graph: a validation graph
        # changes the count by one (a training graph acts through the DP-trained model)
        sens = (1.0 if config.method in ("dpmlp", "dpsgd-graph")
                else 1.0 + _graph_max_degree(data))
    if any(p[3].value == "replace" for p in at_target):
        sens *= 2.0
    dist = spec.distribution()
    budget = plan_trial_budget(plans, epsilon=spec.epsilon, delta=delta, distribution=dist,
                               score_std=spec.score_noise)
    return {"training_epsilon": budget["training_epsilon"],
            "total_epsilon": budget["total_epsilon"], "delta": delta, "settings": settings,
            "score_sensitivity": sens, "num_train": num_train, "num_nodes": num_nodes,
            "num_features": sizes["num_features"], "num_classes": sizes["num_classes"],
            "num_val": num_val, "config": config, "distribution": dist, "budget": budget}


class SelectionRandomness:
    """Where ``K``, the settings drawn, the trial seeds and the score noise come from.

    Args:
        seed: ``None`` (default): every draw from the OS CSPRNG (`os.urandom`, through
            `gnnprivacy.mechanisms._random.RandomSource`); an integer: a numpy stream
            from ``SeedSequence([seed, 0x7E5E])`` (reproducible, hence public when the
            seed is).

    The methods are those `TrialDistribution.sample` and `tune` call.
    """

    def __init__(self, seed: int | None = None):
        self.public = seed is not None
        self.seed = seed
        if self.public:
            self._rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x7E5E]))
        else:
            from gnnprivacy.mechanisms._random import RandomSource

            self._source = RandomSource(secure=True)

    def random(self) -> float:
        """``U[0, 1)``."""
        if self.public:
            return float(self._rng.random())
        return float(self._source.uniform(1)[0])

    def integers(self, high: int) -> int:
        """Uniform on ``{0, ..., high - 1}`` (rejection on 64-bit words: unbiased)."""
        if self.public:
            return int(self._rng.integers(high))
        limit = (2 ** 64 // high) * high
        while True:
            word = int(self._source.words(1)[0])
            if word < limit:
                return word % high

    def normal(self, loc: float, scale: float) -> float:
        """``N(loc, scale^2)``."""
        if self.public:
            return float(self._rng.normal(loc, scale))
        return loc + scale * float(self._source.normal(1)[0])

    def poisson(self, mu: float) -> int:
        """``Poisson(mu)`` (inversion on one uniform)."""
        if self.public:
            return int(self._rng.poisson(mu))
        from scipy.stats import poisson

        return int(poisson.ppf(self.random(), mu))

    def describe(self) -> dict[str, Any]:
        """What the record says about it."""
        if self.public:
            return {"randomness": "public seed", "seed": self.seed, "selection public": True,
                    "note": "K, the settings drawn, the trial seeds and the score noise are "
                            "reproducible from the seed (also the public split seed): the "
                            "total epsilon does not hold against anyone who knows it"}
        return {"randomness": "OS CSPRNG (os.urandom)", "selection public": False}


def tune(spec: TuneSpec | Mapping[str, Any] | str | Path, *, runs_dir: str | Path = "runs",
         data_root: str | None = None, compare: bool | None = None,
         reproducible_selection: bool | None = None,
         log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Tune with accounted selection; write and return the chosen model's record.

    Args:
        spec: a `TuneSpec`, its mapping, or a YAML path.
        runs_dir: where the tune record goes (``<runs_dir>/tune-<name>.json``); the trial
            records go to ``<runs_dir>/tune-<name>-trials/`` (internal, not to publish).
        data_root: dataset folder (overrides ``base.data_root``).
        compare: also run every setting once at the full target epsilon and select on the
            exact validation accuracy (the unaccounted practice), for comparison.
        reproducible_selection: draw the selection from ``spec.seed`` instead of the OS
            CSPRNG (overrides the spec; recorded as a public selection).
        log: message sink.

    Writing: the runs directory is checked before any work; a name whose tune record exists is
    refused (a second tune would overwrite it and mix its trials with the first's), and so is a
    name another live process is tuning (a claim, as in sweeps). The tune record is written
    last, atomically: a tune stopped before it (a signal, a full disk) has no record, and the
    trials it left are removed, with a message, by the next tune of that name.

    Returns:
        The tune record (a dict): the chosen trial's run record with ``epsilon`` replaced by
        the total, and a ``tuning`` section (see the module docstring).

    Raises:
        InvalidParameterError: the name is taken (see above), or the runs directory is not
            writable.
    """
    from gnnprivacy.records.store import ResultStore

    spec = _as_spec(spec)
    log = log or (lambda m: None)
    store, claim = ResultStore(runs_dir), f"tune-{spec.name}"
    store.ensure_writable()
    record = Path(runs_dir) / f"tune-{spec.name}.json"
    if record.exists():
        raise InvalidParameterError(
            "name", f"a tune name not yet used in {runs_dir} (a second tune would overwrite "
            f"{record} and mix its trials with the first's; choose another name or runs "
            "directory)", spec.name)
    try:
        if not store.claim(claim):
            raise InvalidParameterError("name", f"a name no running tune uses (tune {spec.name!r} is "
                                        f"being run by {store.claim_owner(claim)})", spec.name)
        _remove_unfinished_tune(Path(runs_dir), spec.name, log)
        return _run_tune(spec, runs_dir=runs_dir, data_root=data_root, compare=compare,
                         reproducible_selection=reproducible_selection, log=log)
    finally:  # also when a signal landed inside claim(): release() drops only a claim this process holds
        store.release(claim)


def _remove_unfinished_tune(runs_dir: Path, name: str, log: Callable[[str], None]) -> None:
    """Remove the trial folders of an earlier tune of ``name`` that stopped before its record."""
    import shutil

    for folder in (runs_dir / f"tune-{name}-trials", runs_dir / f"tune-{name}-compare"):
        if folder.is_dir():
            count = len(list(folder.glob("*.json")))
            log(f"removing {folder}: {count} record(s) of an unfinished earlier tune {name!r} "
                "(it stopped before writing its tune record)")
            shutil.rmtree(folder)


def _run_tune(spec: TuneSpec, *, runs_dir: str | Path, data_root: str | None,
              compare: bool | None, reproducible_selection: bool | None,
              log: Callable[[str], None] | None) -> dict[str, Any]:
    """The body of `tune` (the name is checked and claimed by the caller)."""
    from gnnprivacy.method.runner import run
    from gnnprivacy.records.record import write_json_atomic

    spec = _as_spec(spec)
    log = log or (lambda m: None)
    compare = spec.compare if compare is None else compare
    t0 = time.perf_counter()
    plan = plan_spec(spec, data_root=data_root)
    settings, config, dist, budget = plan["settings"], plan["config"], plan["distribution"], plan["budget"]
    num_train, num_nodes, num_val = plan["num_train"], plan["num_nodes"], plan["num_val"]
    delta, sens, eps_t = plan["delta"], plan["score_sensitivity"], plan["training_epsilon"]
    log(f"tune {spec.name}: {len(settings)} settings, E[K] = {dist.mean():.3g}; per-trial "
        f"training epsilon {eps_t:.4g} -> total {budget['total_epsilon']:.4g} "
        f"(target {spec.epsilon:g}, delta {delta:.3g})")

    public = spec.reproducible_selection if reproducible_selection is None else bool(
        reproducible_selection)
    rng = SelectionRandomness(spec.seed if public else None)
    secure = _trial_secure_mode(spec, public)
    k = dist.sample(rng)
    trial_dir = Path(runs_dir) / f"tune-{spec.name}-trials"
    trials = []
    for i in range(k):
        j = rng.integers(len(settings))
        seed = rng.integers(2 ** 31)
        rec = run({**settings[j], "epsilon": eps_t, "delta": delta, "seed": seed,
                   "secure_mode": settings[j].get("secure_mode", secure),
                   "runs_dir": str(trial_dir)}, log=None, save=True)
        _check_noise(rec, {**settings[j], "epsilon": eps_t}, eps_t, delta, _plan_sizes(plan))
        correct = float(rec.metrics.get("val_accuracy", 0.0)) * num_val
        noisy = correct + rng.normal(0.0, spec.score_noise * sens)
        trials.append({"trial": i, "setting": j, "seed": seed, "run_id": rec.run_id,
                       "noisy_val_accuracy": noisy / num_val, "record": rec})
        log(f"  trial {i + 1}/{k}: setting {j} {spec.settings()[j]}  noisy val "
            f"{noisy / num_val:.4f}")
    total = executed_total(trials, settings, plan, spec)
    public_parts = ["the grid and the trial distribution", "the split (public seed)",
                    "dataset sizes (N train, |V|, validation count)"]
    if config.method not in ("dpmlp", "dpsgd-graph"):
        public_parts.append("the graph's largest degree (score sensitivity)")
    unaccounted = ["test metrics (evaluation)", "the number of trials K and the other trials "
                   "(internal; do not publish)"]
    if rng.public:
        public_parts.append("the selection's randomness (K, settings, trial seeds, score "
                            "noise: reproducible from the seed)")
        unaccounted.append("selection public: the Papernot-Steinke total assumes secret "
                           "selection randomness (reproducible_selection)")
    if not all(t["record"].privacy.get("secure_mode") for t in trials):
        unaccounted.append("training noise public: the trials ran with seeded noise "
                           "(secure_mode false), so the released model's config (its seed) "
                           "regenerates its noise and the model bit for bit; set base "
                           "secure_mode: true (the default when the selection is secret)")
    tuning = {
        "name": spec.name, "target_epsilon": spec.epsilon, "delta": delta,
        "total_epsilon": total, "planned_total_epsilon": budget["total_epsilon"],
        "total_from": "each executed trial's ledger, and the plans of the settings not drawn",
        "selection": rng.describe(),
        "training_epsilon_per_trial": eps_t,
        "epsilon_if_selection_ignored": eps_t,
        "distribution": dist.to_dict(), "settings": spec.settings(),
        "score": {"metric": "number of correct validation predictions + Gaussian noise",
                  "sensitivity": sens, "noise_std": spec.score_noise * sens,
                  "noise_std_accuracy": spec.score_noise * sens / num_val},
        "covers": ["the released model", "its noisy validation score"],
        "public": public_parts,
        "unaccounted": unaccounted,
        "reference": "Papernot & Steinke, Hyperparameter Tuning with Renyi Differential "
                     "Privacy, ICLR 2022 (Theorem 2 / Theorem 6)",
    }
    if not trials:  # Poisson may draw K = 0: nothing is released
        out = {"run_id": f"tune-{spec.name}", "method": config.method, "dataset": config.dataset,
               "epsilon": total, "delta": delta, "released": None,
               "tuning": tuning, "internal": {"trials": 0}}
        write_json_atomic(Path(runs_dir) / f"tune-{spec.name}.json", out)
        return out
    best = max(trials, key=lambda t: t["noisy_val_accuracy"])
    chosen = best["record"].to_dict()
    tuning["chosen_setting"] = spec.settings()[best["setting"]]
    tuning["chosen_noisy_val_accuracy"] = best["noisy_val_accuracy"]
    out = {**chosen, "run_id": f"tune-{spec.name}", "epsilon": total,
           "delta": delta, "tuning": tuning}
    # the exact validation metrics are not released (only the noisy score is covered)
    out["metrics"] = {k: v for k, v in chosen["metrics"].items() if not k.startswith("val_")}
    out["metrics"]["val_accuracy_noisy"] = best["noisy_val_accuracy"]
    out["privacy"] = {**chosen["privacy"], "training_epsilon": chosen["epsilon"],
                      "scope": "training of the released model and the selection among "
                               "K random trials (Papernot-Steinke)",
                      "unaccounted": list(chosen["privacy"].get("unaccounted", []))
                      + tuning["unaccounted"]}
    out["internal"] = {"trials": [{k2: v for k2, v in t.items() if k2 != "record"}
                                  | {"val_accuracy": t["record"].metrics.get("val_accuracy"),
                                     "test_accuracy": t["record"].metrics.get("test_accuracy")}
                                  for t in trials], "num_trials": k}
    if compare:
        out["comparison"] = _compare(settings, spec, delta, runs_dir, log, run)
        log(f"  without accounting: best setting {out['comparison']['chosen_setting']} test "
            f"{out['comparison']['test_accuracy']:.4f} at nominal epsilon {spec.epsilon:g}")
    out["timings"] = {**chosen.get("timings", {}), "tune_seconds": time.perf_counter() - t0}
    write_json_atomic(Path(runs_dir) / f"tune-{spec.name}.json", out)
    log(f"chosen: setting {tuning['chosen_setting']} test "
        f"{chosen['metrics'].get('test_accuracy', float('nan')):.4f}, total epsilon "
        f"{total:.4g} (training {eps_t:.4g})")
    return out


def _trial_secure_mode(spec: TuneSpec, public: bool) -> bool:
    """Whether the trials draw their training noise from the OS CSPRNG: ``base.secure_mode``
    when the spec sets it, else whenever the selection is secret. Seeded trial noise would be
    regenerable from the seed the released record carries (``config.seed``)."""
    given = spec.base.get("secure_mode", spec.base.get("secure-mode"))
    return (not public) if given is None else bool(given)


def executed_total(trials, settings, plan: dict[str, Any], spec: TuneSpec) -> float:
    """The tuned total composed from what ran: ``Q``'s RDP curve is the maximum of each
    executed trial's ledger (its RDP curve) and of the plans of the settings no trial drew
    (at the per-trial epsilon), plus the score's; converted like the plan.

    Raises:
        SpentBudgetError: the total exceeds the target (a trial ran something other than
            what was planned).
    """
    from gnnprivacy.accounting.hparam_tuning import tuned_epsilon
    from gnnprivacy.accounting.verify import SpentBudgetError, ledger_rdp

    orders = _orders()
    eps_t, delta = plan["training_epsilon"], plan["delta"]
    curve = np.zeros_like(orders)
    for t in trials:
        curve = np.maximum(curve, ledger_rdp(t["record"].privacy["ledger"], orders))
    drawn = {t["setting"] for t in trials}
    undrawn = [s for j, s in enumerate(settings) if j not in drawn]
    if undrawn:
        at = _plans_at(undrawn, eps_t, **_plan_sizes(plan))
        curve = np.maximum(curve, _trial_rdp(at, eps_t, delta, orders, 0.0 * orders)[0])
    curve = curve + orders / (2.0 * spec.score_noise ** 2)
    total = tuned_epsilon(orders, curve, plan["distribution"], delta)
    if not total <= spec.epsilon * (1.0 + TOTAL_RTOL):
        raise SpentBudgetError(
            f"tune {spec.name}: the trials' executed ledgers compose to epsilon {total:.6g}, "
            f"above the target {spec.epsilon:g}; no tune record is written")
    return total


def _plan_sizes(plan: dict) -> dict:
    """The graph sizes a tuning plan was made for (feature/class counts: None in old plans)."""
    return {"num_train": plan["num_train"], "num_nodes": plan["num_nodes"],
            "num_features": plan.get("num_features"), "num_classes": plan.get("num_classes")}


def _check_noise(rec, values, eps_t, delta, sizes) -> None:
    """The trial must have used (at least) the noise the budget was planned with."""
    from gnnprivacy.training import _privacy

    factory, steps, kind, _ = _trial_plan(values, **sizes)
    planned = _privacy.calibrate(factory, steps=steps, epsilon=eps_t, delta=delta, kind=kind)
    used = float(rec.privacy.get("noise_multiplier", math.nan))
    if not used >= planned * (1 - 1e-9) or int(rec.privacy.get("steps", steps)) > steps:
        raise RuntimeError(f"trial {rec.run_id} used noise {used:.6g} / {rec.privacy.get('steps')}"
                           f" steps; the tuning budget was planned for {planned:.6g} / {steps}")


def _compare(settings, spec: TuneSpec, delta: float, runs_dir, log, run) -> dict[str, Any]:
    """Every setting once at the full target, selected on the exact validation accuracy."""
    rows = []
    for j, s in enumerate(settings):
        rec = run({**s, "epsilon": spec.epsilon, "delta": delta, "seed": spec.seed,
                   "runs_dir": str(Path(runs_dir) / f"tune-{spec.name}-compare")}, save=True)
        rows.append({"setting": j, "val_accuracy": rec.metrics.get("val_accuracy"),
                     "test_accuracy": rec.metrics.get("test_accuracy"), "run_id": rec.run_id})
    best = max(rows, key=lambda r: r["val_accuracy"])
    return {"selection": "exact validation accuracy, not accounted",
            "nominal_epsilon": spec.epsilon,
            "honest_epsilon_note": f"{len(settings)} runs at epsilon {spec.epsilon:g} each; "
                                   "the selection is not covered",
            "chosen_setting": spec.settings()[best["setting"]],
            "val_accuracy": best["val_accuracy"], "test_accuracy": best["test_accuracy"],
            "rows": rows}
