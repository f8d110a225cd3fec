"""Saved user models: ``gp.save_model(model, path, privacy=...)`` and ``gp.load_model(path)``.

A model the user built (any ``nn.Module``, e.g. the SAGE model of the own-model page trained
with `gnnprivacy.make_private`, or a non-private PyG model) is saved as one file that
``torch.load(path, weights_only=True)`` reads, holding only tensors and JSON strings:

```
{"format": "gnnprivacy-user-model/1",
 "class": "my_package.models:Net",           # the model class's import path
 "init": "<JSON: the constructor's keyword arguments>",
 "record": "<JSON: the claim (epsilon, delta, unit, relation, scope ...) and the dataset>",
 "tensors": {"conv1.lin_l.weight": tensor, ...}}
```

Loading imports the class by its path (your own installed code, as ``import`` would: the file
itself carries no code, so reading it cannot run any), builds it from ``init`` and loads the
weights. ``gnnprivacy assess MODEL`` assesses such a file on the dataset it names
(`gnnprivacy.auditing.model_card`). Built-in methods' models
(`gnnprivacy.training.persist`) keep their own format; `model_file_format` tells the two
apart.

*Privacy.* Saving adds nothing to the claim: the weights are the released model, the record
holds the claim as the training loop stated it (``pt.epsilon``, ``pt.privacy``).
"""

from __future__ import annotations

import importlib
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from gnnprivacy.errors import InvalidParameterError

__all__ = ["USER_FORMAT", "SavedModel", "load_model", "model_file_format", "save_model"]

USER_FORMAT = "gnnprivacy-user-model/1"


@dataclass
class SavedModel:
    """A user model read back by `load_model` (or `gnnprivacy.load`).

    Attributes:
        model: the rebuilt ``nn.Module`` in evaluation mode, with the saved weights.
        privacy: the claim saved with it (``epsilon``, ``delta``, ``unit`` ...), or ``None``
            for a non-private model.
        dataset: the dataset it was trained on (``{"name": ..., **load_dataset options}``;
            ``"task": "graph"`` for a graph classifier), or ``None``.
        class_path: ``"module:QualName"`` of the model class.
        run: the run record of a built-in run that wrote the file (the graph task's
            classifier), else ``None``.
    """

    model: nn.Module
    privacy: dict | None = None
    dataset: dict | None = None
    class_path: str = ""
    info: dict = field(default_factory=dict)
    run: dict | None = None

    @property
    def epsilon(self) -> float:
        """The claimed epsilon (``inf`` without a claim)."""
        return float((self.privacy or {}).get("epsilon", math.inf))

    @property
    def delta(self) -> float | None:
        """The claimed delta (``None`` without a claim)."""
        value = (self.privacy or {}).get("delta")
        return None if value is None else float(value)

    @property
    def level(self) -> str:
        """``"graph"`` for a graph classifier (saved with a graph dataset, or a
        ``GraphClassifier``), else ``"node"``."""
        from gnnprivacy.training.graph_classification import GraphClassifier

        task = (self.dataset or {}).get("task")
        return "graph" if task == "graph" or isinstance(self.model, GraphClassifier) else "node"

    def predict(self, data: Any = None, nodes: Any = None):
        """Logits of the saved model: ``[num_nodes, C]`` on a graph for a node model,
        ``[num_graphs, C]`` on a list of graphs (a PyG ``Dataset``, a ``GraphSet``) for a
        graph classifier; ``nodes``: the rows to return (node ids, or graph indices).

        Raises:
            InvalidParameterError: no data, or data the model cannot use (named).
        """
        from gnnprivacy.training.predict import module_logits

        return module_logits(self.model, data, nodes, level=self.level)


def _class_path(model: nn.Module) -> str:
    cls = type(model)
    if "<locals>" in cls.__qualname__:
        raise InvalidParameterError("model", "an instance of a class importable by its module "
                                    "path (defined at a module's top level)",
                                    f"{cls.__module__}.{cls.__qualname__}")
    return f"{cls.__module__}:{cls.__qualname__}"


def _import_class(path: str, imports: tuple[str, ...] = ()):
    """The class ``module:qualname`` from a module that is already imported.

    A file never chooses what gets imported: importing a module runs its top-level code, so a
    saved file naming any module on the path would run code on load. The caller imports the
    defining module (it already has when the model was built in this process), or names it
    in ``imports`` (`load_model(imports=)`, ``gnnprivacy assess --import``).
    """
    import sys

    module, _, qualname = path.partition(":")
    for name in _import_names(imports):        # what the caller chose to trust
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise InvalidParameterError("imports", "importable module names", f"{name} "
                                        f"({type(exc).__name__}: {exc})") from None
    if module not in sys.modules:
        raise InvalidParameterError(
            "class", f"a class whose module is imported (loading never imports a module a "
            f"file names: import {module} first, or pass imports=({module!r},) / "
            f"gnnprivacy assess --import {module})", path)
    try:
        obj: Any = sys.modules[module]
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except AttributeError as exc:
        raise InvalidParameterError("class", "an nn.Module class defined in its module",
                                    f"{path} ({type(exc).__name__}: {exc})") from None
    if not (isinstance(obj, type) and issubclass(obj, nn.Module)):
        raise InvalidParameterError("class", "an nn.Module subclass", path)
    return obj


def _import_names(imports) -> tuple[str, ...]:
    """``imports`` as module names: one name (``"mymodels"``) or a sequence of names."""
    if isinstance(imports, str):
        imports = (imports,)
    try:
        names = tuple(imports)
    except TypeError:
        raise InvalidParameterError("imports", "a module name or a list of module names",
                                    type(imports).__name__) from None
    for name in names:
        if not isinstance(name, str) or not all(part.isidentifier() for part in name.split(".")):
            raise InvalidParameterError("imports", "module names (e.g. 'mymodels' or "
                                        "'pkg.models')", name)
    return names


def _claim(privacy) -> dict | None:
    """The claim as JSON-able facts: a `PrivateTraining`, a dict with ``epsilon``, or None."""
    if privacy is None:
        return None
    if hasattr(privacy, "engine") and hasattr(privacy, "privacy"):
        return {**privacy.privacy, "epsilon": float(privacy.epsilon),
                "delta": float(privacy.delta)}
    if isinstance(privacy, dict) and "epsilon" in privacy:
        return dict(privacy)
    raise InvalidParameterError("privacy", "a PrivateTraining, a dict with the claimed "
                                "'epsilon' (and 'delta'), or None",
                                type(privacy).__name__ if not isinstance(privacy, dict)
                                else f"a dict without 'epsilon' ({sorted(privacy)})")


def check_finite_weights(tensors: dict, path) -> None:
    """A saved model's floating tensors are finite (a NaN weight predicts NaN for every
    input: the file is damaged, not a model)."""
    for name, t in tensors.items():
        if isinstance(t, torch.Tensor) and t.is_floating_point() and not bool(
                torch.isfinite(t).all()):
            raise InvalidParameterError("path", "a saved model with finite weights",
                                        f"{path} (tensor {name!r} has NaN or infinite values)")


def _build(cls, init: dict, tensors: dict, where: str) -> nn.Module:
    try:
        model = cls(**init)
    except TypeError as exc:
        raise InvalidParameterError("init", f"the keyword arguments that build "
                                    f"{cls.__qualname__}", f"{init} ({exc})") from None
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as exc:
        raise InvalidParameterError("init", f"arguments that build {cls.__qualname__} with the "
                                    f"{where} weights' shapes",
                                    f"{init} ({str(exc).splitlines()[0]})") from None
    return model.eval()


def save_model(model: nn.Module, path: str | Path, *, privacy=None,
               init: dict[str, Any] | None = None, dataset: dict[str, Any] | None = None,
               force: bool = False, run_record: dict | None = None) -> Path:
    """Save a user model: its class's import path, constructor arguments, weights and claim.

    Args:
        model: the trained ``nn.Module`` (a `PrivateTraining`'s ``.model``).
        path: the file to write (conventionally ``*.pt``).
        privacy: the claim: the `PrivateTraining` (its epsilon, delta and ``privacy``), a
            dict with ``epsilon`` and ``delta``, or ``None`` (a non-private model).
        init: the keyword arguments that rebuild the model (``type(model)(**init)``);
            checked now, by rebuilding it and loading the weights.
        dataset: where its data comes from, for ``gnnprivacy assess``:
            ``{"name": "computers", "split": "random", "train_frac": 0.8, ...}``
            (`gnnprivacy.load_dataset`'s name and options).
        force: replace an existing file that gnnprivacy wrote for a run (a run's model, a run
            record, a checkpoint). Without it only a file that ``save_model`` itself wrote
            (not for a run) is replaced; any other existing file is replaced with a warning.
        run_record: the run record of the built-in run that trained ``model`` (the graph
            task writes it: `gnnprivacy.load` then gives the run back).

    Returns:
        The path written.

    Raises:
        InvalidParameterError: not an ``nn.Module``, a class defined inside a function, a
            claim without epsilon, ``init`` that does not rebuild the model, a ``path`` that
            holds a run's model or another file of a run (without ``force``).

    Example:
        >>> import gnnprivacy as gp, tempfile, os
        >>> from torch_geometric.nn import GCNConv
        >>> conv = GCNConv(8, 3)
        >>> path = os.path.join(tempfile.mkdtemp(), "gcn.pt")
        >>> _ = gp.save_model(conv, path, init={"in_channels": 8, "out_channels": 3})
        >>> type(gp.load_model(path).model).__name__
        'GCNConv'
    """
    from gnnprivacy._files import atomic_write

    if hasattr(model, "engine") and hasattr(model, "privacy") and hasattr(model, "model"):
        privacy = model if privacy is None else privacy
        model = model.model
    if not isinstance(model, nn.Module):
        raise InvalidParameterError("model", "an nn.Module", type(model).__name__)
    cls_path = _class_path(model)
    init = dict(init or {})
    claim = _claim(privacy)
    tensors = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    _build(_import_class(cls_path), init, tensors, "model's")          # loadable, or refuse
    if dataset is not None and not (isinstance(dataset, dict) and "name" in dataset):
        raise InvalidParameterError("dataset", "a dict with the dataset's 'name' and "
                                    "load_dataset options", dataset)
    _check_target(path, force=force)
    facts = {"privacy": claim, "dataset": dataset}
    if run_record is not None:
        facts["run"] = run_record
    blob = {"format": USER_FORMAT, "class": cls_path,
            "init": json.dumps(init), "tensors": tensors,
            "record": json.dumps(facts, default=str)}
    buffer = io.BytesIO()
    torch.save(blob, buffer)
    path = Path(path)
    atomic_write(path, buffer.getvalue(), what="saved model")
    return path


def _check_target(path, *, force: bool) -> None:
    """Before writing: an existing file that ``save_model`` wrote outside a run is the user's
    own earlier save (replaced, as ``torch.save`` would); anything else gnnprivacy owns (a run's
    model, record, checkpoint ...) needs ``force`` (`gnnprivacy._files.check_output_file`)."""
    from gnnprivacy._files import check_output_file

    target = Path(path)
    if not force and target.is_file() and target.suffix == ".pt":
        try:
            blob = _read(target)
        except InvalidParameterError:
            blob = None
        if isinstance(blob, dict) and blob.get("format") == USER_FORMAT and \
                "\"run\"" not in str(blob.get("record", "")):
            return
    check_output_file(path, name="path", force=force, create_folder=True)


def _read(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise InvalidParameterError("path", "a saved model file", str(path))
    try:
        return torch.load(path, weights_only=True, map_location="cpu")
    except Exception as exc:  # noqa: BLE001 - any unreadable file gets one clear message
        first = str(exc).split(". ")[0].splitlines()[0] if str(exc) else ""
        raise InvalidParameterError("path", "a model saved by gnnprivacy (a torch file that "
                                    "loads weights-only)",
                                    f"{path} ({type(exc).__name__}: {first[:120]})") from None


def model_file_format(path: str | Path) -> str | None:
    """The format of a saved model file (``USER_FORMAT``, the built-in methods'
    ``"gnnprivacy-model/1"``), or ``None`` when it is not a torch file of a known shape.
    Reads weights-only."""
    try:
        blob = _read(path)
    except InvalidParameterError:
        return None
    fmt = blob.get("format") if isinstance(blob, dict) else None
    return fmt if isinstance(fmt, str) else None


def _check_parts(init, record, tensors, cls_path) -> None:
    """The parts of a user-model file have their types (a hand-edited file: a TypeError
    naming the part, which `load_model` reports as an incomplete file)."""
    if not isinstance(cls_path, str) or ":" not in cls_path:
        raise TypeError(f"class is {cls_path!r}, not 'module:QualName'")
    for name, value in (("init", init), ("record", record), ("tensors", tensors)):
        if not isinstance(value, dict):
            raise TypeError(f"{name} is a {type(value).__name__}, not a mapping")
    if not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in tensors.items()):
        raise TypeError("tensors holds something else than name -> tensor")
    for key in ("privacy", "dataset", "run"):
        if record.get(key) is not None and not isinstance(record[key], dict):
            raise TypeError(f"record.{key} is a {type(record[key]).__name__}, not a mapping")
    claim = record.get("privacy")
    if claim is not None and (not isinstance(claim.get("epsilon"), (int, float))
                              or isinstance(claim.get("epsilon"), bool)):
        raise TypeError(f"record.privacy.epsilon is {claim.get('epsilon')!r}, not a number")


def load_model(path: str | Path, *,
               imports: str | tuple[str, ...] | list[str] = ()) -> SavedModel:
    """Read a model written by `save_model` (weights-only: the file runs no code); its
    ``predict(data)`` gives the model's logits. `gnnprivacy.load` reads every model file the
    library writes (a built-in method's too) and is the one loader to use in general.

    The model's class must come from a module that is already imported, or one named in
    ``imports`` (a module name or a list of them): the file names its class, but loading
    never imports a module on the file's word (an import runs the module's code).

    Raises:
        InvalidParameterError: the file is missing, unreadable, not a saved user model, or
            its class cannot be imported or rebuilt.
    """
    imports = _import_names(imports)
    blob = _read(path)
    if not isinstance(blob, dict) or blob.get("format") != USER_FORMAT:
        got = blob.get("format") if isinstance(blob, dict) else type(blob).__name__
        hint = (" (a built-in method's model: read it with gnnprivacy.load)"
                if got == "gnnprivacy-model/1" else "")
        raise InvalidParameterError("path", f"a model saved by gnnprivacy.save_model "
                                    f"(format {USER_FORMAT}){hint}", f"{path} (format: {got})")
    try:
        init, record = json.loads(blob["init"]), json.loads(blob["record"])
        tensors, cls_path = blob["tensors"], blob["class"]
        _check_parts(init, record, tensors, cls_path)
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        raise InvalidParameterError("path", f"a complete {USER_FORMAT} file",
                                    f"{path} ({type(exc).__name__}: {exc})") from None
    check_finite_weights(tensors, path)
    model = _build(_import_class(cls_path, imports), init, tensors, "saved")
    return SavedModel(model=model, privacy=record.get("privacy"), dataset=record.get("dataset"),
                      class_path=cls_path, info={"path": str(path), "init": init},
                      run=record.get("run"))
