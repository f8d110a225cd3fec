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

from gnnprivacy._validation import check_int, check_probability, number_text_hint
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
        "help": "node | graph (graph classification on TU datasets) | link (link prediction: "
                "link, link-edge-dp, link-node-dp; default: the method's)"})
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

    values = {k.replace("-", "_"): _plain(v) for k, v in values.items() if v is not None}
    for key in ("runs_dir", "data_root"):  # a pathlib.Path is a path too
        if isinstance(values.get(key), os.PathLike):
            values[key] = os.fspath(values[key])
    if isinstance(values.get("dataset_args"), dict):  # YAML mapping -> the CLI's key=value form
        values["dataset_args"] = _dataset_args_text(values["dataset_args"])
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
    if task not in ("node", "graph", "link") or task != spec.task:
        raise InvalidParameterError(
            "task", f"{spec.task!r}, the task of method {spec.name!r} (graph methods: "
            "dpsgd-graph, graph; link methods: link, link-edge-dp, link-node-dp)", task)
    if task == "graph":
        run_values.update(task="graph", dataset=run_values.get("dataset", "").lower())
        _check_graph_task(run_values)
    else:
        _check_node_dataset(run_values.get("dataset", RunConfig.dataset), spec.name)
    config = RunConfig(**run_values)
    method_values = {k: v for k, v in values.items() if k in param_names}
    _check_sizes(method_values)
    params = spec.make_params(method_values)
    return config, params


def _check_graph_task(values: dict[str, Any]) -> None:
    """Refuse the run settings a graph task cannot use (they would be recorded as if used):
    a split other than the stratified random one, dataset arguments (the TU datasets take
    none), a device other than the CPU (the graph task trains there)."""
    split = values.get("split")
    if split not in (None, "random"):
        raise InvalidParameterError(
            "split", "'random' or unset with --task graph (the graph datasets have one split: "
            "stratified by class, its sizes set by --train-frac/--val-frac/--test-frac)", split)
    if values.get("dataset_args"):
        raise InvalidParameterError("dataset_args", "unset with --task graph (the TU graph "
                                    "datasets take no arguments)", values["dataset_args"])
    if values.get("device", "cpu") != "cpu":
        raise InvalidParameterError("device", "'cpu' with --task graph (the graph task trains "
                                    "on the CPU)", values["device"])


def _check_node_dataset(dataset: Any, method: str) -> None:
    """A graph-classification dataset named for a node method: say which methods take it
    (instead of "not a dataset")."""
    from gnnprivacy.datasets.registry import list_datasets
    from gnnprivacy.datasets.tu_graphs import list_graph_datasets

    # a name registered as a node dataset too (AIDS merged into one graph, for 003) is one
    if isinstance(dataset, str) and dataset.lower() in list_graph_datasets() \
            and dataset.lower() not in list_datasets():
        raise InvalidParameterError(
            "method", f"a graph-classification method for {dataset.lower()!r}, a dataset of "
            "graphs (method='dpsgd-graph' or 'graph', CLI: --task graph --method dpsgd-graph)",
            method)


#: the largest value of each size setting (any method): beyond them a run would exhaust memory
#: or run for days, so a typo (``--hidden 50000000``) is refused before any work
MAX_SIZES = {"hidden": 65_536, "layers": 64, "heads": 64, "epochs": 1_000_000, "steps": 10_000_000,
             "encoder_epochs": 1_000_000, "mcmc_steps": 10**9, "kx": 1_000, "ky": 1_000, "hops": 1_000,
             "levels": 1_000, "update_layers": 64, "patience": 1_000_000, "num_clusters": 1_000_000,
             "batch_size": 100_000_000, "m": 1_000_000, "group_size": 1_000_000, "test_fanout": 100_000,
             "max_degree": 1_000_000}


def _check_sizes(values: dict[str, Any]) -> None:
    """Each size setting of `MAX_SIZES` in ``values`` is at most its bound (the message names it)."""
    from numbers import Integral

    for key, most in MAX_SIZES.items():
        value = values.get(key)
        if isinstance(value, Integral) and not isinstance(value, bool) and value > most:
            raise InvalidParameterError(key, f"at most {most:,} (a larger {key} would exhaust memory "
                                        "or time before the run ends)", value)


def _plain(value: Any) -> Any:
    """A numpy scalar (``np.int64(3)``, ``np.float32(0.5)``) as the Python number it holds."""
    if type(value).__module__ == "numpy" and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return value.item()
    return value


def _dataset_args_text(args: dict) -> str:
    """A ``dataset_args`` mapping in the ``key=value,...`` form; a value holding ``,`` or ``=``
    (which would inject another key) or that is not a scalar is refused."""
    for key, value in args.items():
        value = _plain(value)
        if not isinstance(key, str) or not key.isidentifier():
            raise InvalidParameterError("dataset_args", "a mapping of argument names to values", key)
        if not isinstance(value, (str, int, float, bool)) or any(c in str(value) for c in ",="):
            raise InvalidParameterError(f"dataset_args.{key}", "a single number, name or true/false "
                                        "(no ',' or '=': one value per key)", value)
    return ",".join(f"{k}={_plain(v)}" for k, v in args.items())


def setting_types() -> dict[str, set[str]]:
    """The schema of a run setting: name -> the declared types (``"float"``, ``"int | None"``
    ...) of the `RunConfig` field and every registered method's parameter of that name."""
    from gnnprivacy.method.registry import list_methods

    types: dict[str, set[str]] = {}
    for cls in (RunConfig, *(m.params for m in list_methods())):
        for f in dataclasses.fields(cls):
            types.setdefault(f.name, set()).add(str(f.type))
    return types


def check_settings(values: Any, *, where: str = "") -> dict[str, Any]:
    """Validate a mapping of run settings as written in a configuration file (train ``-c``, a
    sweep's ``base`` and each grid value, a tune's ``base`` and grid): the one schema of every
    config file. Returns it with ``-`` spelled ``_``.

    Each setting is checked once, under its own name (``where`` prefixes it: ``base.``,
    ``grid.lr`` ...): a key spelled twice (``train-frac`` and ``train_frac``) is refused; an
    empty value (``epsilon:``) is refused unless the setting may be ``null``; a number setting
    given as text (YAML 1.1 reads ``1e-3`` as a string) and a true/false setting given
    anything else (``'no'``) are refused with what to write. Unknown names and ranges are
    checked by `resolve_config` for the chosen method.
    """
    if not isinstance(values, dict):
        raise InvalidParameterError(where.rstrip(".") or "config", "a mapping of setting: value",
                                    type(values).__name__)
    types = setting_types()
    out: dict[str, Any] = {}
    for key, value in values.items():
        if not isinstance(key, str):
            raise InvalidParameterError(f"{where}{key}", "a setting name (text)", key)
        name = key.replace("-", "_")
        if name in out:
            raise InvalidParameterError(f"{where}{name}", "given once (it is spelled both "
                                        f"{name.replace('_', '-')!r} and {name!r})", value)
        out[name] = value = _plain(value)
        declared = types.get(name)
        if not declared:
            continue
        kinds = {t.strip() for d in declared for t in d.split("|")}
        if value is None:
            if "None" not in kinds:
                raise InvalidParameterError(f"{where}{name}", "a value (the key is present but empty; "
                                            "remove the line to use the default)", None)
            continue
        if kinds & {"int", "float"} and isinstance(value, str) and number_text_hint(value):
            raise InvalidParameterError(f"{where}{name}", "a number" + number_text_hint(value), value)
        if kinds - {"None"} == {"bool"} and not isinstance(value, bool):
            raise InvalidParameterError(f"{where}{name}", "true or false (unquoted)", value)
    return out


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


#: the largest configuration file read (a config is a few hundred bytes; a larger file is a mistake)
MAX_CONFIG_BYTES = 1 << 20
#: the most values a configuration document may hold once its aliases are expanded (a YAML
#: "billion laughs" document is a few lines that expand to billions of values)
MAX_CONFIG_VALUES = 100_000
#: how deep mappings and lists may nest in a configuration file
MAX_CONFIG_DEPTH = 50


def read_yaml_file(path: str | os.PathLike, *, what: str = "YAML file") -> Any:
    """Parse a YAML configuration file; a missing, oversized or malformed file raises
    ``InvalidParameterError`` naming it.

    The document is read with `config_yaml_loader`: a key given twice (also as ``train-frac``
    and ``train_frac``) and a key that is not a string are refused, YAML merge keys
    (``<<: *defaults``) work, and a document is bounded (`MAX_CONFIG_BYTES`, `MAX_CONFIG_VALUES`
    after expanding aliases, `MAX_CONFIG_DEPTH`). A pipe (``-c <(printf ...)``) and
    ``/dev/null`` (an empty document) are read like files.
    """
    p = Path(path)
    if not p.exists() or p.is_dir():
        raise InvalidParameterError("config", f"an existing {what}" + (" (it is a directory)" if p.is_dir()
                                                                        else ""), str(path))
    try:
        with open(p, "rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise InvalidParameterError("config", f"a readable {what} ({exc.strerror})", str(path)) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise InvalidParameterError("config", f"a {what} of at most {MAX_CONFIG_BYTES} bytes", str(path))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidParameterError("config", f"a UTF-8 text {what} (byte {exc.start} is not UTF-8: "
                                    "a binary file?)", str(path)) from None
    try:
        return parse_config_yaml(text)
    except InvalidParameterError as exc:
        raise InvalidParameterError("config", exc.expected, str(path)) from None


def parse_config_yaml(text: str) -> Any:
    """Parse one YAML configuration document with `config_yaml_loader` (bounded, see
    `read_yaml_file`).

    Raises:
        InvalidParameterError: ``expected`` says what is wrong and where.
    """
    import yaml

    loader = None
    try:
        loader = config_yaml_loader()(text)  # reads the stream: may raise a ReaderError
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expanded_size(node)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise InvalidParameterError("config", f"valid YAML ({_yaml_problem(exc)})", "") from None
    except RecursionError:
        raise InvalidParameterError("config", f"YAML nested at most {MAX_CONFIG_DEPTH} deep", "") from None
    finally:
        if loader is not None:
            loader.dispose()


def _check_expanded_size(root) -> None:
    """Refuse a document whose aliases expand to more than `MAX_CONFIG_VALUES` values, or that
    nests deeper than `MAX_CONFIG_DEPTH` (counted on the composed graph, memoised per node, so
    an alias bomb is measured without being built)."""
    import yaml

    sizes: dict[int, int] = {}
    stack = [(root, 0, False)]
    while stack:
        node, depth, done = stack.pop()
        if id(node) in sizes and not done:
            continue
        if depth > MAX_CONFIG_DEPTH:
            raise InvalidParameterError("config", f"YAML nested at most {MAX_CONFIG_DEPTH} deep (line "
                                        f"{node.start_mark.line + 1} is deeper)", "")
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            sizes[id(node)] = 1
            continue
        if not done:
            sizes[id(node)] = 0  # in progress: a recursive alias counts once
            stack.append((node, depth, True))
            stack.extend((c, depth + 1, False) for c in children if id(c) not in sizes)
            continue
        sizes[id(node)] = 1 + sum(sizes.get(id(c), 1) for c in children)
        if sizes[id(node)] > MAX_CONFIG_VALUES:
            raise InvalidParameterError(
                "config", f"a YAML document of at most {MAX_CONFIG_VALUES} values once its aliases are "
                f"expanded (line {node.start_mark.line + 1} expands to more: an alias bomb?)", "")


def _yaml_problem(exc) -> str:
    """One line: the problem and its line (PyYAML's own message spans several lines)."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if not problem:
        return " ".join(str(exc).split())[:300]
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    context = getattr(exc, "context", None)
    return f"{context + ': ' if context else ''}{problem}{where}"[:300]


_MERGE_TAG = "tag:yaml.org,2002:merge"


def config_yaml_loader():
    """The YAML loader of every configuration file (train ``-c``, sweeps, tunes): a
    ``yaml.SafeLoader`` (no object construction) that refuses a key given twice in one mapping
    (PyYAML keeps the last one silently), counting ``train-frac`` and ``train_frac`` as one
    key, refuses keys that are not strings (``1: 2``, YAML 1.1's ``on:``), and supports merge
    keys (``<<: *defaults``; the mapping's own keys override the merged ones)."""
    import yaml

    class ConfigLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen: dict[str, str] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=deep)
                if not isinstance(key, str):
                    raise yaml.constructor.ConstructorError(
                        None, None, f"keys must be names; the key {key!r} is a {type(key).__name__} "
                        "(quote it if it is meant as text)", key_node.start_mark)
                spelled = key.replace("-", "_")
                if spelled in seen:
                    twice = (f"the key {key!r} is given twice" if seen[spelled] == key else
                             f"the key {spelled!r} is given twice (as {seen[spelled]!r} and {key!r})")
                    raise yaml.constructor.ConstructorError(
                        None, None, f"{twice} (the last one would silently win)", key_node.start_mark)
                seen[spelled] = key
            return super().construct_mapping(node, deep=deep)

    return ConfigLoader


def load_yaml_config(path: str | os.PathLike) -> dict[str, Any]:
    """Read a flat YAML mapping; malformed files raise ``InvalidParameterError`` naming the file."""
    loaded = read_yaml_file(path)
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise InvalidParameterError("config", "a YAML mapping of option: value", type(loaded).__name__)
    return check_settings(loaded)


__all__ = ["RunConfig", "resolve_config", "config_to_dict", "load_yaml_config", "UnknownNameError"]
