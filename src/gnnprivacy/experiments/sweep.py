"""Sweeps: the cartesian product of a grid of configurations, repeated over seeds, resumable.

A sweep file (YAML):

```
name: csbm-mlp                 # required; letters, digits, '.', '_', '-'
description: optional text
base: {method: mlp, dataset: csbm, epochs: 50}    # flat config shared by every run
grid:                          # key -> non-empty list; the runs are the cartesian product
  lr: [0.01, 0.001]
  dataset:                     # an element that is a mapping sets several keys together
    - {dataset: cora, group_size: 25}
    - {dataset: citeseer, group_size: 70}
seeds: 3                       # repeats per grid cell (default 1)
seed: 0                        # the sweep's root seed (default 0)
imports: [my_package.methods]  # optional modules every worker imports (extra methods)
```

Seeds: the run seed of repeat ``k`` is drawn from ``numpy.random.SeedSequence(seed).spawn(seeds)[k]``
(its first 32-bit word). Every cell uses the *same* ``seeds`` list, so repeat ``k`` of one cell and
repeat ``k`` of another share their seed (and hence, by default, their split): differences between
cells are paired comparisons, with less variance than independent seeds would give, and adding a
cell to the grid never changes the seeds of the others. To use explicit seeds instead (e.g. a
paper's seeds 1, 2, 3) put ``seed: [1, 2, 3]`` in the grid and leave ``seeds`` out.

Per-method keys: a key of ``base`` or ``grid`` that the run's method does not take, but another
method of the sweep does, is left out of that run (``method: [gcn, dpmlp]`` x ``epsilon: [4, 8]``
runs gcn once, without epsilon, and dpmlp twice); a key no method of the sweep takes is an error.
The bundled reproduction configs (``experiments/configs/*.yaml``) are sweep files too: their
extra keys ``references``, ``quick`` and ``notes`` are ignored here (``gnnprivacy reproduce``
uses them). ``gnnprivacy sweep --template`` prints a commented example.

Run ids: each run's id is ``<method>-<dataset>-<sha256 prefix>`` of its *resolved* configuration
(every RunConfig field and method parameter, defaults included; locations that do not change the
result -- ``runs_dir``, ``data_root`` -- excluded; integral floats normalised so ``2`` and ``2.0``
agree). A restarted sweep therefore recognises finished runs by their record file alone, and two
sweeps that share a run share its record.

Execution (`run_sweep`): every configuration is resolved *before* anything runs (a bad key
fails the whole sweep with nothing written), runs whose record exists are skipped, the others go
to an executor (`gnnprivacy.experiments.executors`). A worker trains through
`gnnprivacy.method.runner.run`, which publishes the split and, last, the record naming
it with its checksum, each by atomic rename (`ResultStore.publish`), so a SIGKILL, a full
disk or a read-only folder at any moment leaves either a complete run or none. With
``resume: true`` the run's checkpoints live in ``RUNS/checkpoints/``, so the rerun of a killed
sweep continues a run from its last checkpoint. A run that raises is written as
``<run_id>.failed.json`` (error and traceback) and retried by the next invocation of the sweep.
Before starting a run a worker *claims* it (``RUNS/.claims/<run_id>.claim``, created atomically,
holding its pid and host; see `ResultStore.claim`), so two sweeps started on the same runs
directory share the work instead of both running everything; a claim whose process died is
retaken; a run still claimed by a live process counts as not finished here (the summary names
the holder, and the exit status is 1). A record file that does not parse, or whose companions are
incomplete, is not counted as finished: the run is redone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gnnprivacy.errors import InvalidParameterError, UnknownNameError
from gnnprivacy.method.config import read_yaml_file
from gnnprivacy.records.store import ResultStore

SWEEP_KEYS = ("name", "description", "base", "grid", "seeds", "seed", "imports")
#: keys of the bundled reproduction configs (experiments/configs/*.yaml) that a plain sweep ignores
REPRODUCTION_KEYS = ("references", "quick", "notes", "report_metrics")

#: printed by ``gnnprivacy sweep --template``: a commented sweep that runs in about a minute
SWEEP_TEMPLATE = """\
# A gnnprivacy sweep: every combination of the `grid` values, each repeated `seeds` times.
# Run it with:   gnnprivacy sweep -c sweep.yaml --runs-dir runs/my-sweep
# Then:          gnnprivacy results runs/my-sweep
#                gnnprivacy report runs/my-sweep -o reports/my-sweep
# Rerunning the same command skips the finished runs (each run has an id derived from its config).

name: my-sweep                  # letters, digits, '.', '_', '-'
description: GCN (non-private) vs DP-MLP at two privacy budgets on a small synthetic graph

base:                           # settings shared by every run: any `gnnprivacy train` option
  dataset: csbm                 # see `gnnprivacy datasets`
  dataset_args: num_nodes=500,num_features=32,num_classes=3
  epochs: 20

grid:                           # key: [values]; the runs are the cartesian product
  method: [gcn, dpmlp]          # see `gnnprivacy train --help`
  epsilon: [4, 8]               # a method that takes no epsilon (gcn) runs once without it

seeds: 2                        # repeats per grid cell (seeds derived from `seed`)
seed: 0                         # root seed of the sweep
"""
ID_EXCLUDED_KEYS = ("runs_dir", "data_root", "resume")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: the most runs one sweep (grid cells x seeds) or tune grid may describe; larger grids are a
#: typo (``seeds: 100000000``) that would fill memory before the first run
MAX_SWEEP_RUNS = 100_000


def check_run_name(key: str, name: Any, *, where: str | None = None) -> str:
    """A sweep's or tune's name: letters, digits, ``.``, ``_``, ``-`` (it names files in the runs
    directory, so ``../../x`` would write outside it)."""
    if not isinstance(name, str) or not _NAME_RE.match(name) or len(name) > 100:
        raise InvalidParameterError(key, "a non-empty name of at most 100 letters, digits, '.', '_', '-' "
                                    "(it names files in the runs directory)", name, where=where)
    return name


def settings_of(base: Any, grid: Any, *, where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A sweep's or tune's ``base`` and ``grid`` through the settings schema
    (`gnnprivacy.method.config.check_settings`): each setting once under its own name, in any
    spelling (``train-frac`` and ``train_frac``), also across base and grid (a grid value that
    is a mapping sets its keys too); grid lists become tuples; the number of grid cells is
    bounded by `MAX_SWEEP_RUNS`."""
    from gnnprivacy.method.config import check_settings

    if not isinstance(base, Mapping):
        raise InvalidParameterError("base", "a mapping of config key: value", base, where=where)
    base_spelling: dict[str, set[str]] = {}
    for key in base:
        base_spelling.setdefault(str(key).replace("-", "_"), set()).add(key)
    base = check_settings(dict(base), where="base.")
    if not isinstance(grid, Mapping):
        raise InvalidParameterError("grid", "a non-empty mapping of key: [values]", grid, where=where)
    names = check_settings({k: [] for k in grid}, where="grid.")  # spelled once
    out: dict[str, Any] = {}
    cells = 1
    for (key, values), name in zip(grid.items(), names):
        if not isinstance(values, list):
            out[name] = values  # refused by the spec with its own message
            continue
        for value in values:
            if isinstance(value, Mapping):  # several keys together; may override base's value
                check_settings(dict(value), where=f"grid.{name}[].")
                respelled = [k for k in value if isinstance(k, str) and k not in
                             base_spelling.get(k.replace("-", "_"), (k,))]
                if respelled:
                    raise InvalidParameterError(f"grid.{name}", "each setting spelled one way in base and "
                                                f"grid ({respelled[0]!r} is spelled differently in base)",
                                                respelled[0], where=where)
            else:
                check_settings({name: value}, where="grid.")
        if name in base:
            raise InvalidParameterError(f"grid.{name}", f"keys not also set in base ({name!r} is in both: one "
                                        "would silently replace the other)", name, where=where)
        out[name] = tuple(values)
        cells *= max(1, len(values))
        if cells > MAX_SWEEP_RUNS:
            raise InvalidParameterError("grid", f"at most {MAX_SWEEP_RUNS} combinations", f"{cells}+",
                                        where=where)
    return base, out


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep description (see the module docstring for the YAML form)."""

    name: str
    base: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, tuple] = field(default_factory=dict)
    seeds: int | None = None
    seed: int = 0
    imports: tuple[str, ...] = ()
    description: str = ""

    def __post_init__(self):
        where = f"sweep {self.name!r}"
        check_run_name("name", self.name)
        if not isinstance(self.base, Mapping):
            raise InvalidParameterError("base", "a mapping of config key: value", self.base, where=where)
        _check_grid(self.grid, where)
        for key in ("runs_dir",):
            if key in self.base or key in self.grid:
                raise InvalidParameterError(key, "absent from a sweep file (use --runs-dir)", key, where=where)
        both = sorted(set(self.base) & set(self.grid))
        if both:
            raise InvalidParameterError("grid", "keys not also set in base", both[0], where=where)
        explicit_seed = _has_explicit_seed(self)
        if self.seeds is not None:
            if not isinstance(self.seeds, int) or isinstance(self.seeds, bool) or self.seeds < 1:
                raise InvalidParameterError("seeds", "an integer >= 1 (repeats per grid cell)", self.seeds, where=where)
            if explicit_seed:
                raise InvalidParameterError("seeds", "absent when 'seed' is set in base or grid", self.seeds, where=where)
        cells = math.prod(len(v) for v in self.grid.values())
        if cells * self.repeats > MAX_SWEEP_RUNS:
            raise InvalidParameterError(
                "seeds" if self.seeds else "grid", f"at most {MAX_SWEEP_RUNS} runs in all (grid cells x "
                f"seeds; here {cells} x {self.repeats})", self.seeds if self.seeds else cells, where=where)
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise InvalidParameterError("seed", "a non-negative integer (the sweep's root seed)", self.seed, where=where)

    @property
    def repeats(self) -> int:
        return self.seeds or 1

    def run_seeds(self) -> list[int]:
        """The per-repeat run seeds: ``SeedSequence(seed).spawn(repeats)``, first 32-bit word each."""
        children = np.random.SeedSequence(self.seed).spawn(self.repeats)
        return [int(c.generate_state(1, dtype=np.uint32)[0]) for c in children]

    def cells(self) -> list[dict[str, Any]]:
        """The grid cells (cartesian product, first key varying slowest), mappings merged."""
        return grid_cells(self.grid)

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "sweep") -> SweepSpec:
        """Validate a parsed YAML mapping; unknown keys raise ``UnknownNameError``."""
        if not isinstance(data, Mapping):
            raise InvalidParameterError("sweep file", "a YAML mapping with name, base, grid", type(data).__name__,
                                        where=source)
        unknown = sorted(set(data) - set(SWEEP_KEYS) - set(REPRODUCTION_KEYS))
        if unknown:
            raise UnknownNameError(f"sweep key in {source}", unknown[0], SWEEP_KEYS)
        if "name" not in data:
            raise InvalidParameterError("name", "present (the sweep's name)", None, where=source)
        grid = data.get("grid")
        if grid is None:
            raise InvalidParameterError("grid", "a non-empty mapping of key: [values]", grid, where=source)
        imports = data.get("imports") or ()
        if isinstance(imports, str) or not all(isinstance(m, str) for m in imports):
            raise InvalidParameterError("imports", "a list of module names", imports, where=source)
        base, grid = settings_of(data.get("base") or {}, grid, where=source)
        description = data.get("description") or data.get("notes") or ""
        return cls(name=data["name"], base=base, grid=grid,
                   seeds=data.get("seeds"), seed=data.get("seed", 0), imports=tuple(imports),
                   description=str(description))


def _check_grid(grid: Any, where: str) -> None:
    if not isinstance(grid, Mapping) or not grid:
        raise InvalidParameterError("grid", "a non-empty mapping of key: [values]", grid, where=where)
    for key, values in grid.items():
        if not isinstance(values, tuple):
            raise InvalidParameterError(f"grid.{key}", "a list of values", values, where=where)
        if not values:
            raise InvalidParameterError(f"grid.{key}", "a non-empty list of values", [], where=where)


def load_sweep(path: str | Path) -> SweepSpec:
    """Read and validate a sweep YAML file (malformed YAML raises ``InvalidParameterError``)."""
    data = read_yaml_file(path, what="sweep YAML file")
    return SweepSpec.from_dict(data, source=str(path))


def _canonical(value: Any) -> Any:
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value


def run_id_for(resolved: Mapping[str, Any]) -> str:
    """The deterministic id of a resolved configuration (see the module docstring)."""
    payload = {k: _canonical(v) for k, v in resolved.items() if k not in ID_EXCLUDED_KEYS}
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
    slug = re.sub(r"[^A-Za-z0-9.-]+", "_", f"{resolved.get('method')}-{resolved.get('dataset')}")
    return f"{slug}-{digest[:16]}"


def _method_keys(spec: SweepSpec) -> tuple[dict[str, set[str]], set[str]]:
    """Parameter names of every method the sweep uses, and the RunConfig fields."""
    from gnnprivacy.method.config import RUN_FIELDS
    from gnnprivacy.method.registry import get_method

    methods = {str(c.get("method", spec.base.get("method", "gcn"))) for c in spec.cells()}
    return ({m: {f.name for f in dataclasses.fields(get_method(m).params)} for m in methods},
            set(RUN_FIELDS))


def _drop_foreign_keys(values: dict[str, Any], params: dict[str, set[str]], run_fields: set[str],
                       source: str) -> dict[str, Any]:
    """Remove the keys this run's method does not take but another method of the sweep does.

    A key that no method of the sweep takes is an error (a typo, most likely) naming the key,
    the sweep's methods and the valid keys.
    """
    method = str(values.get("method", "gcn"))
    taken_by_any = set().union(*params.values()) | run_fields
    out = {}
    for key, value in values.items():
        norm = key.replace("-", "_")
        if norm not in taken_by_any:
            raise UnknownNameError(
                f"config key in {source} (taken by none of the sweep's methods {sorted(params)})",
                key, taken_by_any)
        if norm in run_fields or norm in params.get(method, set()):
            out[key] = value
    return out


def import_modules(names: tuple[str, ...]) -> None:
    """Import the sweep's ``imports`` here (workers import them too); missing ones raise clearly."""
    import importlib

    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise InvalidParameterError("imports", f"importable module names ({exc})", name) from None


@dataclass(frozen=True)
class SweepTask:
    """One run of a sweep: its deterministic id, resolved flat config and place in the grid."""

    run_id: str
    values: dict[str, Any]
    cell: int
    repeat: int
    sweep: str = ""


def expand_sweep(spec: SweepSpec, *, runs_dir: str | Path, data_root: str | None = None) -> list[SweepTask]:
    """Resolve every run of ``spec`` (validating all of them); duplicates are dropped.

    Raises:
        UnknownNameError: a config key is unknown (the message names it and the valid keys).
        InvalidParameterError: a value is invalid.
    """
    from gnnprivacy.method.config import config_to_dict, resolve_config

    import_modules(spec.imports)
    params, run_fields = _method_keys(spec)
    seeds = spec.run_seeds() if spec.seeds is not None or not _has_explicit_seed(spec) else [None]
    tasks, seen = [], set()
    for c, cell in enumerate(spec.cells()):
        for k, seed in enumerate(seeds):
            values = {**spec.base, **cell, "runs_dir": str(runs_dir)}
            if data_root is not None:
                values["data_root"] = data_root
            if seed is not None:
                values["seed"] = seed
            values = _drop_foreign_keys(values, params, run_fields, f"sweep {spec.name!r}")
            resolved = config_to_dict(*resolve_config(values))
            run_id = run_id_for(resolved)
            if run_id not in seen:
                seen.add(run_id)
                tasks.append(SweepTask(run_id, resolved, c, k, spec.name))
    return tasks


def _has_explicit_seed(spec: SweepSpec) -> bool:
    return "seed" in spec.base or "seed" in spec.grid or any(
        isinstance(v, Mapping) and "seed" in v for vals in spec.grid.values() for v in vals)


@dataclass(frozen=True)
class TaskOutcome:
    """What a worker reports back for one task."""

    run_id: str
    status: str  # "ok" | "failed" | "skipped" | "elsewhere" (claimed by another process)
    error: str | None = None  #: the failure; for "elsewhere": who holds the claim
    metrics: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0


def execute_task(task: SweepTask) -> TaskOutcome:
    """Worker body: claim one run, train it and publish it into the runs directory (or record
    the failure). Its checkpoints (``resume: true``) live in ``RUNS/checkpoints/``, so a killed
    sweep's rerun continues from them."""
    from gnnprivacy.method.runner import run

    store = ResultStore(task.values["runs_dir"])
    if store.has_record(task.run_id):
        return TaskOutcome(task.run_id, "skipped")
    t0 = time.perf_counter()
    try:
        if not store.claim(task.run_id):
            return TaskOutcome(task.run_id, "elsewhere", error=store.claim_owner(task.run_id))
        if store.has_record(task.run_id):  # finished by another process just before we claimed it
            return TaskOutcome(task.run_id, "skipped")
        with _worker_progress(task) as progress:
            record = run(task.values, run_id=task.run_id, save=True, progress=progress,
                         info={"sweep": task.sweep, "seed_index": task.repeat})
        return TaskOutcome(task.run_id, "ok", metrics=dict(record.metrics), seconds=time.perf_counter() - t0)
    except Exception as exc:  # noqa: BLE001 - every failure is recorded, the sweep goes on
        store.write_failure(task.run_id, task.values, exc)  # best effort (a full disk)
        return TaskOutcome(task.run_id, "failed", error=f"{type(exc).__name__}: {exc}",
                           seconds=time.perf_counter() - t0)
    finally:  # also when a signal landed inside claim(): release() drops only a claim this process holds
        store.release(task.run_id)


#: set (by ``gnnprivacy sweep`` when stderr is not a terminal) to make workers log step progress
STEP_PROGRESS_ENV = "GNNPRIVACY_STEP_PROGRESS"


def _worker_progress(task: SweepTask):
    """Plain step-progress lines of one run (prefixed with its id), when ``$GNNPRIVACY_STEP_PROGRESS``
    is set; else no progress."""
    from contextlib import contextmanager, nullcontext

    if not os.environ.get(STEP_PROGRESS_ENV) or os.environ.get("GNNPRIVACY_QUIET"):
        return nullcontext(None)

    @contextmanager
    def plain():
        from gnnprivacy.experiments.progress import plain_progress

        with plain_progress() as make:
            yield lambda description, total: make(f"{task.run_id} ({description})", total, unit="step")

    return plain()


@dataclass
class SweepResult:
    """Summary of one invocation of `run_sweep`."""

    name: str
    runs_dir: str
    total: int
    skipped: int
    succeeded: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  #: (run_id, error)
    elsewhere: list[str] = field(default_factory=list)  #: runs another process was running
    holders: list[str] = field(default_factory=list)  #: who holds those runs' claims (pid, host)

    @property
    def ok(self) -> bool:
        """Every run of the sweep is finished: none failed, none is still being run elsewhere."""
        return not self.failed and not self.elsewhere


def run_sweep(spec: SweepSpec, *, runs_dir: str | Path, executor: str = "local", workers: int | None = None,
              address: str | None = None, data_root: str | None = None, progress: Callable | None = None,
              log: Callable[[str], None] | None = None) -> SweepResult:
    """Run (or resume) a sweep; see the module docstring for the guarantees.

    Args:
        spec: the sweep.
        runs_dir: the results store (created; must be writable).
        executor: ``"local"`` (process pool) or ``"ray"``.
        workers: parallel workers (default: ``os.cpu_count()``, capped at the number of runs; on a
            Ray cluster given by ``address``: no cap, Ray schedules every run).
        address: Ray cluster address (``executor="ray"`` only).
        data_root: folder with the raw datasets, overriding ``data_root`` in the sweep.
        progress: ``progress(description, total)`` factory (see `gnnprivacy.experiments.progress`).
        log: message sink.

    Returns:
        A `SweepResult`; failed runs are listed there and in ``<run_id>.failed.json``.
    """
    from gnnprivacy.experiments.executors import make_executor

    log = log or (lambda message: None)
    store = ResultStore(runs_dir)
    tasks = expand_sweep(spec, runs_dir=runs_dir, data_root=data_root)
    make_executor(executor, workers=workers, address=address)  # validate before touching anything
    store.ensure_writable()
    store.clean_stale_staging()
    done = store.completed_ids()
    todo = [t for t in tasks if t.run_id not in done]
    result = SweepResult(spec.name, str(runs_dir), total=len(tasks), skipped=len(tasks) - len(todo))
    log(f"sweep {spec.name}: {len(tasks)} runs, {result.skipped} already finished, {len(todo)} to run")
    if not todo:
        return result
    n_workers = workers if (workers or address) else min(len(todo), os.cpu_count() or 1)
    bar = progress(f"sweep {spec.name}", len(todo)) if progress else None
    with make_executor(executor, workers=n_workers, address=address, imports=spec.imports) as ex:
        for task, outcome in ex.imap_unordered(execute_task, todo):
            if isinstance(outcome, BaseException):
                store.write_failure(task.run_id, task.values, outcome)  # best effort
                outcome = TaskOutcome(task.run_id, "failed", error=f"{type(outcome).__name__}: {outcome}")
            if outcome.status == "failed":
                result.failed.append((task.run_id, outcome.error or ""))
                log(f"run {task.run_id} failed: {outcome.error}")
            elif outcome.status == "elsewhere":
                result.elsewhere.append(task.run_id)
                result.holders.append(outcome.error or "another process")
                log(f"run {task.run_id} is being run by {outcome.error or 'another process'} (claimed); "
                    "skipped here")
            elif outcome.status == "skipped":  # finished by another process since we listed it
                result.skipped += 1
            else:
                result.succeeded.append(task.run_id)
            if bar is not None:
                bar.update(1)
    return result


def grid_cells(grid: Mapping[str, list]) -> list[dict[str, Any]]:
    """Cartesian product of ``grid`` (first key varying slowest); a value that is a mapping
    is merged into the cell (so one grid axis can set several keys together)."""
    keys = list(grid)
    out = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        cell: dict[str, Any] = {}
        for key, value in zip(keys, combo):
            cell.update(value if isinstance(value, Mapping) else {key: value})
        out.append(cell)
    return out
