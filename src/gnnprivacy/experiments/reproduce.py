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
