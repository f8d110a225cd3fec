"""The run configuration: one frozen dataclass, the single source of truth for ``train``.

Common fields live in `RunConfig`; each method adds its own hyperparameters (a frozen
dataclass registered with the method). A YAML file, the CLI and sweeps all resolve to
``RunConfig`` + method params; `resolve_config` merges and validates them, and the
resolved form is saved with every run record.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gnnprivacy._validation import check_int, check_probability
from gnnprivacy.errors import InvalidParameterError, UnknownNameError

DEFAULT_RUNS_DIR = "runs"


@dataclass(frozen=True)
class RunConfig:
    """Settings common to every method (data, split, seed, output)."""

    method: str = field(default="gcn", metadata={"help": "training method (see `gnnprivacy train --help`)"})
    dataset: str = field(default="csbm", metadata={"help": "dataset name (see `gnnprivacy datasets`)"})
    data_root: str | None = field(default=None, metadata={
        "help": "folder with the raw datasets (else $GNNPRIVACY_DATA, else ~/.cache/gnnprivacy)"})
    dataset_args: str | None = field(default=None, metadata={
        "help": "extra dataset arguments as key=value pairs separated by commas "
                "(e.g. csbm: num_nodes=20000,homophily=0.9)"})
    split: str | None = field(default=None, metadata={
        "help": "split kind: random | public | inductive (default: public for cora/citeseer, else random)"})
    train_frac: float | None = field(default=None, metadata={"help": "fraction of nodes for training"})
    val_frac: float | None = field(default=None, metadata={"help": "fraction of nodes for validation"})
    test_frac: float | None = field(default=None, metadata={"help": "fraction of nodes for testing"})
    seed: int = field(default=0, metadata={"help": "run seed; split, init, sampling and noise seeds derive from it"})
    split_seed: int | None = field(default=None, metadata={"help": "seed of the split (default: the run seed)"})
    runs_dir: str = field(default=DEFAULT_RUNS_DIR, metadata={"help": "where run records are written"})
    device: str = field(default="cpu", metadata={"help": "torch device (cpu, cuda)"})
    task: str | None = field(default=None, metadata={
        "help": "node | graph (graph classification on TU datasets; default: the method's)"})
    resume: bool = field(default=False, metadata={
        "help": "continue a killed private run from its last checkpoint under "
                "<runs_dir>/checkpoints (same configuration and seed)"})

    def __post_init__(self):
        check_int("seed", self.seed, low=0)
        if self.split_seed is not None:
            check_int("split_seed", self.split_seed, low=0)
        fracs = {k: getattr(self, k) for k in ("train_frac", "val_frac", "test_frac")}
        for k, v in fracs.items():
            if v is not None:
                check_probability(k, v)
        total = sum(v for v in fracs.values() if v is not None)
        if total > 1 + 1e-9:
            raise InvalidParameterError(
                "train_frac + val_frac + test_frac", "fractions summing to <= 1", fracs)
        if self.dataset_args is not None:
            parse_dataset_args(self.dataset_args)
        if self.data_root is not None and not os.path.isdir(os.path.expanduser(self.data_root)):
            raise InvalidParameterError("data_root", "an existing directory", self.data_root)
        if self.device != "cpu":  # refuse an unusable device before any work (imports torch)
            from gnnprivacy.training.device import resolve_device

            resolve_device(self.device)


def parse_dataset_args(text: str | None) -> dict[str, Any]:
    """Parse ``"a=1,b=0.5,c=name"`` into ``{"a": 1, "b": 0.5, "c": "name"}``.

    Raises:
        InvalidParameterError: not ``key=value`` pairs, or a key given twice.
    """
    out: dict[str, Any] = {}
    if not text:
        return out
    if not isinstance(text, str):
        raise InvalidParameterError("dataset_args", "comma-separated key=value pairs (or a mapping)", text)
    for item in text.split(","):
        key, sep, raw = item.partition("=")
        key, raw = key.strip(), raw.strip()
        if not sep or not key.isidentifier() or not raw:
            raise InvalidParameterError("dataset_args", "comma-separated key=value pairs", text)
        if key in out:
            raise InvalidParameterError("dataset_args", f"each key once ({key!r} is given twice)", text)
        for cast in (int, float):
            try:
                out[key] = cast(raw)
                break
            except ValueError:
                continue
        else:
            out[key] = {"true": True, "false": False}.get(raw.lower(), raw)
    return out


RUN_FIELDS = tuple(f.name for f in dataclasses.fields(RunConfig))


def resolve_config(values: dict[str, Any]):
    """Split a flat mapping into ``(RunConfig, method params)``; unknown keys raise.

    Args:
        values: flat mapping (from YAML, CLI or a sweep) of RunConfig fields and the chosen
            method's parameter fields. ``None`` values mean "use the default".

    Raises:
        UnknownNameError: a key is neither a RunConfig field nor a parameter of the method;
            the message lists the valid keys.
    """
    from gnnprivacy.method.registry import get_method

    values = {k.replace("-", "_"): v for k, v in values.items() if v is not None}
    for key in ("runs_dir", "data_root"):  # a pathlib.Path is a path too
        if isinstance(values.get(key), os.PathLike):
            values[key] = os.fspath(values[key])
    if isinstance(values.get("dataset_args"), dict):  # YAML mapping -> the CLI's key=value form
        values["dataset_args"] = ",".join(f"{k}={v}" for k, v in values["dataset_args"].items())
    run_values = {k: v for k, v in values.items() if k in RUN_FIELDS}
    _check_run_types(run_values)
    if "dataset" in run_values:
        run_values["dataset"] = _canonical_dataset(run_values["dataset"])
    spec = get_method(run_values.get("method", RunConfig.method))
    param_names = {f.name for f in dataclasses.fields(spec.params)}
    unknown = sorted(set(values) - set(RUN_FIELDS) - param_names)
    if unknown:
        raise UnknownNameError(f"config key (for method {spec.name!r})", unknown[0],
                               set(RUN_FIELDS) | param_names)
    task = run_values.get("task") or spec.task
    if task not in ("node", "graph") or task != spec.task:
        raise InvalidParameterError(
            "task", f"{spec.task!r}, the task of method {spec.name!r} (graph methods: "
            "dpsgd-graph, graph)", task)
    if task == "graph":
        run_values.update(task="graph", dataset=run_values.get("dataset", "").lower())
    config = RunConfig(**run_values)
    params = spec.make_params({k: v for k, v in values.items() if k in param_names})
    return config, params


_KIND_WORDS = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false"}


def _check_run_types(values: dict[str, Any]) -> None:
    """Each RunConfig field of ``values`` has its declared type (from YAML ``method: [gcn]`` is a
    list, not a method name)."""
    for f in dataclasses.fields(RunConfig):
        if f.name not in values:
            continue
        kind = next(t.strip() for t in str(f.type).split("|") if t.strip() != "None")
        value = values[f.name]
        ok = {"str": isinstance(value, str),
              "int": isinstance(value, int) and not isinstance(value, bool),
              "float": isinstance(value, (int, float)) and not isinstance(value, bool),
              "bool": isinstance(value, bool)}[kind]
        if not ok:
            raise InvalidParameterError(f.name, _KIND_WORDS[kind], value)


def _canonical_dataset(name: str) -> str:
    """The registered spelling of a dataset name (``CORA`` -> ``cora``); other names (a user's
    own graph) unchanged."""
    from gnnprivacy.datasets.registry import get_spec

    try:
        return get_spec(name).info.name
    except UnknownNameError:
        return name


def config_to_dict(config: RunConfig, params) -> dict[str, Any]:
    """The flat resolved configuration (RunConfig fields then method params)."""
    out = dataclasses.asdict(config)
    out.update(dataclasses.asdict(params))
    return out


def read_yaml_file(path: str | os.PathLike, *, what: str = "YAML file") -> Any:
    """Parse a YAML file; a missing or malformed file raises ``InvalidParameterError`` naming it."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise InvalidParameterError("config", f"an existing {what}", str(path))
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidParameterError("config", f"a UTF-8 text {what} (byte {exc.start} is not UTF-8: "
                                    "a binary file?)", str(path)) from None
    except OSError as exc:
        raise InvalidParameterError("config", f"a readable {what} ({exc.strerror})", str(path)) from None
    try:
        return yaml.load(text, Loader=_unique_key_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise InvalidParameterError("config", f"valid YAML ({_yaml_problem(exc)})", str(path)) from None


def _yaml_problem(exc) -> str:
    """One line: the problem and its line (PyYAML's own message spans several lines)."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if not problem:
        return " ".join(str(exc).split())
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    context = getattr(exc, "context", None)
    return f"{context + ': ' if context else ''}{problem}{where}"


def _unique_key_loader():
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        """``yaml.SafeLoader`` that refuses a key given twice in one mapping (PyYAML keeps the
        last one silently)."""

        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if isinstance(key, (str, int, float, bool)) and key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"the key {key!r} is given twice (the last one would silently win)",
                        key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader



def load_yaml_config(path: str | os.PathLike) -> dict[str, Any]:
    """Read a flat YAML mapping; malformed files raise ``InvalidParameterError`` naming the file."""
    loaded = read_yaml_file(path)
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise InvalidParameterError("config", "a YAML mapping of option: value", type(loaded).__name__)
    return loaded


__all__ = ["RunConfig", "resolve_config", "config_to_dict", "load_yaml_config", "UnknownNameError"]
