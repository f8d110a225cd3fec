"""Ready sweeps that reproduce the papers' tables: ``gnnprivacy reproduce NAME [--quick]``.

Each file ``experiments/configs/<name>.yaml`` is a sweep file (see
`gnnprivacy.experiments.sweep`) with three extra keys:

- ``references``: ids of the published tables (``reporting/references/*.yaml``) it reproduces,
  which the report puts beside our numbers;
- ``quick``: overrides giving a small variant for CI (``base`` entries are merged into the base,
  ``grid`` entries replace whole grid keys, ``seeds``/``seed`` replace the repeats/root seed);
- ``notes``: what differs from the paper's protocol (datasets, budgets), shown by ``--list``;
- ``report_metrics``: the run metrics the report tabulates (default ``[test_accuracy]``); those
  no run of the sweep has (e.g. a control only some attacks compute) are left out.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from gnnprivacy.errors import InvalidParameterError, UnknownNameError
from gnnprivacy.experiments.sweep import REPRODUCTION_KEYS as _EXTRA_KEYS
from gnnprivacy.experiments.sweep import SweepSpec
_QUICK_KEYS = ("base", "grid", "seeds", "seed", "description")


@dataclass(frozen=True)
class Reproduction:
    """A packaged reproduction: its full and quick sweeps and the tables it reproduces."""

    name: str
    description: str
    notes: str
    references: tuple[str, ...]
    full: SweepSpec
    quick: SweepSpec
    path: Path
    report_metrics: tuple[str, ...] = ("test_accuracy",)

    def spec(self, *, quick: bool = False) -> SweepSpec:
        return self.quick if quick else self.full

    def datasets(self, *, quick: bool = False) -> list[str]:
        """The datasets its runs load (sorted)."""
        spec = self.spec(quick=quick)
        return sorted({str(c.get("dataset", spec.base.get("dataset", "csbm"))) for c in spec.cells()})

    def missing_datasets(self, data_root: str | None = None, *, quick: bool = False) -> list[str]:
        """The datasets of `datasets` that are not available under ``data_root`` (resolved
        as in ``load_dataset``), each with why (``"cora (raw files missing)"``)."""
        from gnnprivacy.datasets.paths import resolve_root
        from gnnprivacy.datasets.status import dataset_status

        root = resolve_root(data_root)
        out = []
        for name in self.datasets(quick=quick):
            try:
                status = dataset_status(name, root)
            except UnknownNameError:
                out.append(f"{name} (not a registered dataset)")
                continue
            if not status.available:
                why = ("raw files missing" if status.missing_files else "corrupt raw files"
                       if status.corrupt_files else "packages missing")
                out.append(f"{name} ({why})")
        return out

    def count(self, *, quick: bool = False) -> int:
        """Number of runs (grid cells x repeats)."""
        spec = self.spec(quick=quick)
        return len(spec.cells()) * (spec.repeats if spec.seeds is not None else 1)


def config_dir() -> Path:
    """The folder holding the packaged reproduction configs."""
    return Path(str(resources.files("gnnprivacy.experiments") / "configs"))


def _quick_spec(raw: dict[str, Any], source: str) -> SweepSpec:
    quick = raw.get("quick") or {}
    unknown = sorted(set(quick) - set(_QUICK_KEYS))
    if unknown:
        raise UnknownNameError(f"quick key in {source}", unknown[0], _QUICK_KEYS)
    data = {k: v for k, v in raw.items() if k not in _EXTRA_KEYS}
    data["name"] = f"{raw['name']}-quick"
    data["base"] = {**(raw.get("base") or {}), **(quick.get("base") or {})}
    data["grid"] = {**(raw.get("grid") or {}), **(quick.get("grid") or {})}
    for key in ("seeds", "seed", "description"):
        if key in quick:
            data[key] = quick[key]
    return SweepSpec.from_dict(data, source=f"{source} (quick)")


def load_reproduction(path: str | Path) -> Reproduction:
    """Parse one reproduction config file."""
    import yaml

    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise InvalidParameterError("reproduction config", f"valid YAML ({exc})", str(path)) from None
    if not isinstance(raw, dict) or "name" not in raw:
        raise InvalidParameterError("reproduction config", "a sweep mapping with a name", str(path))
    full = SweepSpec.from_dict({k: v for k, v in raw.items() if k not in _EXTRA_KEYS}, source=str(path))
    return Reproduction(name=raw["name"], description=str(raw.get("description", "")),
                        notes=str(raw.get("notes", "")), references=tuple(raw.get("references") or ()),
                        full=full, quick=_quick_spec(raw, str(path)), path=path,
                        report_metrics=tuple(raw.get("report_metrics") or ("test_accuracy",)))


def list_reproductions(directory: str | Path | None = None) -> list[Reproduction]:
    """All packaged reproductions, sorted by name."""
    folder = Path(directory) if directory else config_dir()
    return sorted((load_reproduction(p) for p in folder.glob("*.yaml")), key=lambda r: r.name)


def get_reproduction(name: str, directory: str | Path | None = None) -> Reproduction:
    """The reproduction called ``name``; unknown names raise ``UnknownNameError`` listing them."""
    found = {r.name: r for r in list_reproductions(directory)}
    if name not in found:
        raise UnknownNameError("reproduction", name, found)
    return found[name]


#: packaged configs that reproduce no paper (the library's own tables): not part of ``--all``
NOT_PAPERS = ("utility-defaults",)


@dataclass
class ReproductionRun:
    """What `reproduce_all` did: per reproduction its sweep result (None: not run), the report."""

    results: dict[str, Any]
    skipped: dict[str, str]
    report: Any
    paths: list[Path]

    @property
    def ok(self) -> bool:
        """No run failed (reproductions skipped for missing data do not count as failures)."""
        return all(r is None or r.ok for r in self.results.values())


def _available(spec: SweepSpec, missing: list[str]) -> SweepSpec | None:
    """``spec`` without the grid's unavailable datasets (None when nothing is left to run)."""
    names = {m.split(" ", 1)[0] for m in missing}
    if not names:
        return spec
    if "dataset" in spec.grid:
        keep = tuple(d for d in spec.grid["dataset"] if str(d) not in names)
        if not keep:
            return None
        return dataclasses.replace(spec, grid={**spec.grid, "dataset": keep})
    return None


def reproduce_all(*, quick: bool = False, runs_root: str | Path = "runs",
                  out_dir: str | Path = "reports/reproduction", docs_page: str | Path | None = None,
                  names: list[str] | None = None, report_only: bool = False, executor: str = "local",
                  workers: int | None = None, address: str | None = None, data_root: str | None = None,
                  progress: Any = None, log: Any = None, command: str | None = None,
                  force: bool = False) -> ReproductionRun:
    """Run every packaged paper reproduction and write one report with verdicts.

    Each reproduction runs as a sweep into ``runs_root/<name>[-quick]`` (finished runs are
    skipped, so a killed run resumes where it stopped), restricted to the datasets available
    under ``data_root``; then ``out_dir/report.{md,html}`` is written
    (`gnnprivacy.reporting.reproduction`), and ``docs_page`` (e.g. ``docs/reproduction.md``)
    when given.

    Args:
        quick: the small CI variants (one seed, fewer steps and budgets).
        runs_root: folder holding one runs directory per reproduction.
        out_dir: report folder.
        docs_page: also write this Markdown page, figures in a folder named after it.
        names: only these reproductions (default: every paper reproduction).
        report_only: run nothing; report on what the runs directories hold.
        executor: ``"local"`` (process pool) or ``"ray"``, as for
            `gnnprivacy.experiments.sweep.run_sweep`.
        workers: parallel workers per reproduction (default: the machine's cores).
        address: Ray cluster address (``executor="ray"`` only).
        data_root: folder with the raw datasets.
        progress: ``progress(description, total)`` factory, as for ``run_sweep``.
        log: message sink (one line per reproduction started or skipped, and the sweeps' lines).
        command: the command line named in the report (default: the equivalent CLI call).
        force: replace files in ``out_dir`` (and beside ``docs_page``) that gnnprivacy did not
            write (without it they are refused, before any run).

    Returns:
        A `ReproductionRun`; ``ok`` is False when some run failed (the report is still written).
    """
    from gnnprivacy._files import OutputFolder, check_writable_dir
    from gnnprivacy.experiments.sweep import run_sweep
    from gnnprivacy.reporting.reproduction import Part, build_reproduction, write_docs_page, write_reproduction

    log = log or (lambda message: None)
    available = [r for r in list_reproductions() if r.name not in NOT_PAPERS]
    if names:
        known = {r.name: r for r in available}
        for n in names:
            if n not in known:
                raise UnknownNameError("reproduction", n, known)
        available = [known[n] for n in names]
    check_writable_dir(out_dir, name="output", create=False)
    OutputFolder(out_dir, name="output", force=force).check(["report.md", "report.html"])
    if docs_page is not None:
        check_writable_dir(Path(docs_page).parent, name="docs page folder", create=False)
        OutputFolder(Path(docs_page).parent, name="--docs", force=force).check([Path(docs_page).name])
    results: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    parts = []
    for i, repro in enumerate(available, 1):
        spec = repro.spec(quick=quick)
        runs_dir = Path(runs_root) / spec.name
        missing: list[str] = []
        if not report_only or data_root is not None:  # reporting on the runs needs no data
            missing = repro.missing_datasets(data_root, quick=quick)
        results[repro.name] = None
        if not report_only:
            runnable = _available(spec, missing)
            if runnable is None:
                skipped[repro.name] = f"no dataset available ({', '.join(missing)})"
                log(f"[{i}/{len(available)}] {repro.name}: skipped, {skipped[repro.name]}")
            else:
                log(f"[{i}/{len(available)}] {repro.name}: {len(runnable.cells()) * runnable.repeats} runs "
                    f"into {runs_dir}" + (f" (unavailable here: {', '.join(missing)})" if missing else ""))
                results[repro.name] = run_sweep(runnable, runs_dir=runs_dir, executor=executor, workers=workers,
                                                address=address, data_root=data_root, progress=progress, log=log)
        parts.append(Part(spec.name, repro.description, repro.notes, repro.references, repro.report_metrics,
                          str(runs_dir), tuple(missing), seeds=tuple(spec.run_seeds()) if spec.seeds else (),
                          seed=spec.seed if spec.seeds else None))
    command = command or ("gnnprivacy reproduce --all" + (" --quick" if quick else ""))
    report = build_reproduction(parts, command=command, quick=quick, data_root=data_root)
    paths = write_reproduction(report, out_dir, force=force)
    if docs_page is not None:
        paths.append(write_docs_page(report, docs_page, force=force))
    return ReproductionRun(results, skipped, report, paths)
