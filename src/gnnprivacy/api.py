"""The public Python API: ``gnnprivacy.train``, ``.account``, ``.methods``, ``.datasets``.

A thin face over the same registry and runner as the command line (``gnnprivacy train`` and
``gp.train`` run `gnnprivacy.method.runner.run`; ``gnnprivacy account`` and
``gp.account`` run `gnnprivacy.accounting.query.account`), so a result in a notebook
and a result in the shell are the same result.

Example:

```
import gnnprivacy as gp
result = gp.train("cora", method="heterpoisson", epsilon=8.0, data_root="../shared/datasets")
result.epsilon, result.delta, result.metrics["test_accuracy"]
logits = result.predict()                    # private inference where the method defines it
gp.account("dpsgd", sample_rate=0.01, noise_multiplier=1.0, steps=1000, delta=1e-5)
gp.methods()                                 # names, private or not, parameters
```
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gnnprivacy.accounting.query import account
from gnnprivacy.errors import InvalidParameterError, SmallSplitWarning

__all__ = ["MethodInfo", "ParameterInfo", "TrainResult", "account", "assess", "datasets", "load",
           "methods", "train"]


@dataclass(frozen=True)
class ParameterInfo:
    """One hyperparameter of a method: name, type, default and help text."""

    name: str
    type: str
    default: Any
    help: str


@dataclass(frozen=True)
class MethodInfo:
    """A registered training method (``gnnprivacy train --method NAME``)."""

    name: str
    private: bool
    description: str
    parameters: tuple[ParameterInfo, ...]

    def __repr__(self) -> str:
        kind = "private" if self.private else "non-private"
        return f"MethodInfo({self.name!r}, {kind}, {len(self.parameters)} parameters)"


def methods() -> list[MethodInfo]:
    """Every registered method, sorted by name, with its parameters.

    Example:
        >>> import gnnprivacy as gp
        >>> private = [m.name for m in gp.methods() if m.private]
        >>> "heterpoisson" in private and "gcn" not in private
        True
    """
    from gnnprivacy.method.registry import list_methods

    out = []
    for spec in list_methods():
        params = tuple(
            ParameterInfo(f.name, f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type)),
                          None if f.default is dataclasses.MISSING else f.default,
                          f.metadata.get("help", ""))
            for f in dataclasses.fields(spec.params))
        out.append(MethodInfo(spec.name, spec.private, spec.description, params))
    return out


def datasets(data_root: str | None = None) -> list[dict[str, Any]]:
    """The registered datasets and whether their raw files are available under ``data_root``.

    Returns:
        One dict per dataset: ``name``, ``available`` (bool), ``missing`` (file names) and
        the registry's description.
    """
    from gnnprivacy.datasets.status import datasets_table

    return datasets_table(data_root)


@dataclass
class TrainResult:
    """What `train` returns: the run record, and the fitted model kept in memory.

    Attributes:
        record: the `RunRecord` the CLI writes (config,
            seeds, versions, privacy ledger, metrics, timings).
        model: the fitted estimator (e.g. a ``HeterPoissonTrainer``), for ``fit``/``predict``
            users; ``None`` for methods that do not keep one.
        data: the graph the model was trained on (the user's ``Data`` in standard form).
    """

    record: Any
    model: Any = field(default=None, repr=False)
    data: Any = field(default=None, repr=False)

    @property
    def epsilon(self) -> float:
        """Privacy spent (``inf`` for a non-private method), from the run's accountant."""
        return self.record.epsilon

    @property
    def delta(self) -> float | None:
        """The delta that `epsilon` is stated for (``None`` when not private)."""
        return self.record.delta

    @property
    def metrics(self) -> dict[str, float]:
        """Utility metrics (``test_accuracy``, ``val_accuracy``, ...)."""
        return self.record.metrics

    @property
    def privacy(self) -> dict[str, Any]:
        """The record's privacy facts: unit, relation, scope, unaccounted, ledger ..."""
        return self.record.privacy

    def predict(self, data: Any = None, nodes: Any = None):
        """Logits ``[num_nodes, num_classes]`` of the trained model on ``data``, or the rows
        of ``nodes``; for a graph task (``task == "graph"``) logits ``[num_graphs,
        num_classes]`` of the graphs of ``data`` (a list of ``Data``, a PyG ``Dataset``, a
        ``GraphSet``; default: every graph of the run's dataset), ``nodes`` then graph indices.

        Args:
            data: the graph to predict on (default: the training graph; required for a model
                loaded with `load`, except for transductive methods). Methods with a
                private inference use it (HeterPoisson: each query node aggregates only
                non-training neighbours); the others run their model on the whole graph.
                Transductive methods (rgnn, lpgnn, ldp-naive, heterorr) predict only on the
                graph they were trained on.
            nodes: node ids (or a boolean mask) whose rows to return; default every node.

        Raises:
            RuntimeError: the method keeps no model.
            InvalidParameterError: no graph to predict on, or a graph the method cannot use.
        """
        from gnnprivacy.training.predict import node_logits, prepare_prediction_graph

        if self.model is None:
            raise RuntimeError(f"method {self.record.method!r} keeps no model to predict with")
        if self.task == "graph":      # the graph task's classifier: one row per graph
            from gnnprivacy.training.predict import module_logits

            return module_logits(self.model, self.data if data is None else data, nodes,
                                 level="graph")
        if data is not None and data is not self.data and not hasattr(self.model,
                                                                      "predict_logits"):
            raise InvalidParameterError(
                "data", f"the graph {self.record.method!r} was trained on (the method is "
                "transductive: local DP reports of that graph)", "another graph")
        graph = self.data if data is None else data
        if data is not None and data is not self.data and hasattr(self.model, "predict_logits"):
            graph = prepare_prediction_graph(data, num_features=self.num_features)
        if graph is None and type(self.model).__name__ != "Predictions":
            raise InvalidParameterError("data", "the graph to predict on (a loaded model keeps "
                                        "no graph)", None)
        return node_logits(self.model, graph, nodes)

    @property
    def task(self) -> str:
        """``"graph"`` for a graph-classification run (``--task graph``: `predict` gives one
        row of logits per graph), else ``"node"``."""
        return "graph" if (self.record.info or {}).get("task") == "graph" else "node"

    @property
    def num_features(self) -> int | None:
        """Features per node the model was trained on (``None`` when unknown)."""
        if self.data is not None:
            return int(self.data.num_features)
        return getattr(self.model, "num_features_", None)

    def save(self, path: str | None = None, *, force: bool = False):
        """Save the model: weights, JSON configuration and the run record in one file that
        ``torch.load(path, weights_only=True)`` reads (no pickled code); `load` gives it
        back. Default path: ``<run_id>.model.pt`` in the current folder. An existing run
        record, model or checkpoint at ``path`` is refused unless ``force``
        (`gnnprivacy._files.check_output_file`).

        Returns:
            The path written.
        """
        from gnnprivacy.training.persist import save_model_file

        if self.model is None:
            raise RuntimeError(f"method {self.record.method!r} keeps no model to save")
        from gnnprivacy._files import check_output_file

        target = path if path is not None else f"{self.record.run_id}.model.pt"
        check_output_file(target, name="path", force=force, create_folder=True)
        if self.task == "graph":
            from gnnprivacy.method.runner import graph_model_writer

            return graph_model_writer(self.record, self.model, self.data)(target)
        return save_model_file(target, trainer=self.model, data=self.data,
                               method=self.record.method, record=self.record.to_dict())

    def __repr__(self) -> str:
        r = self.record
        eps = "inf" if math.isinf(r.epsilon) else f"{r.epsilon:.4g}"
        acc = r.metrics.get("test_accuracy", float("nan"))
        return (f"TrainResult(method={r.method!r}, dataset={r.dataset!r}, epsilon={eps}, "
                f"delta={r.delta}, test_accuracy={acc:.4f}, run_id={r.run_id!r})")


def train(data: Any = "csbm", *, method: str = "gcn", seed: int = 0,
          runs_dir: str | None = None, progress: Callable | None = None,
          log: Callable[[str], None] | None = None, **options: Any) -> TrainResult:
    """Train ``method`` on a graph and return the run record with the fitted model.

    The same code path as ``gnnprivacy train``: the options are the CLI's (common run
    options and the method's parameters, with underscores), validated the same way, and the
    record is the one the CLI writes.

    Args:
        data: a registered dataset name (``"cora"``, ``"computers"``, ``"csbm"`` ...; see
            `datasets`) or a ``torch_geometric.data.Data`` with ``x``, ``y``,
            ``edge_index`` and boolean ``train_mask``/``test_mask`` (``val_mask`` optional).
            A ``Data`` without masks gets a random split from ``train_frac``/``val_frac``/
            ``test_frac`` and ``seed``. Your object is not modified: a copy is symmetrised
            and validated (NaN/inf features, masks, fewer than two training classes ... are
            refused with a message naming the problem).
        method: a registered method (`methods`), e.g. ``"heterpoisson"``, ``"dpgnn"``,
            ``"dpmlp"``, ``"rgnn"``, ``"gcn"``.
        seed: run seed; the split, initialisation, sampling and noise seeds derive from it.
        runs_dir: write the JSON record (and the split) there, as the CLI does; default:
            keep the record in memory only.
        progress: optional ``progress(description, total)`` factory (see the CLI).
        log: optional message sink, e.g. ``print``.
        **options: further run options (``data_root``, ``split``, ``train_frac``,
            ``val_frac``, ``test_frac``, ``split_seed``, ``device``, ``dataset_args``) and
            the method's parameters (``epsilon``, ``delta``, ``epochs``, ``lr`` ...).

    Returns:
        A `TrainResult` (``.epsilon``, ``.delta``, ``.metrics``, ``.record``,
        ``.predict()``).

    Raises:
        InvalidParameterError: a bad option or bad data (the message names it).
        UnknownNameError: unknown method, dataset or option (the message lists the choices).

    Example:
        >>> import gnnprivacy as gp
        >>> r = gp.train("csbm", method="dpmlp", epsilon=4.0, dataset_args="num_nodes=400")
        >>> r.epsilon <= 4.0
        True
    """
    from gnnprivacy.method.runner import run

    values: dict[str, Any] = {"method": method, "seed": seed, **options}
    for key in ("dataset", "data"):
        if key in options:
            raise InvalidParameterError(key, "passed as the first argument of train()", key)
    user_data = None
    if isinstance(data, str):
        values["dataset"] = data
    else:
        from torch_geometric.data import Data

        if not isinstance(data, Data):
            raise InvalidParameterError("data", "a dataset name or a torch_geometric.data.Data",
                                        type(data).__name__ if data is not None else None)
        user_data = data
        values["dataset"] = str(getattr(data, "name", None) or "custom")
    if runs_dir is not None:
        values["runs_dir"] = runs_dir
    kept: dict[str, Any] = {}
    record = run(values, progress=progress, log=log, save=runs_dir is not None, data=user_data,
                 keep_result=kept)
    for note in record.warnings:
        warnings.warn(note, SmallSplitWarning, stacklevel=2)
    return TrainResult(record=record, model=kept["result"].model, data=kept["data"])


def partition(graph: Any, out: str, *, num_parts: int | None = None, parts: int | None = None,
              method: str = "auto", seed: int = 0, train_fraction: float | None = None,
              split: str | None = None, split_seed: int | None = None,
              train_frac: float | None = None, val_frac: float | None = None,
              test_frac: float | None = None, dataset_args: str | None = None,
              data_root: str | None = None, overwrite: bool = False):
    """Split a graph (or a list of graphs) into per-rank shards for sharded training
    (``gnnprivacy partition``).

    Args:
        graph: a folder of the streamed ``csbm-large`` format; a registered dataset name (a
            node dataset is loaded with the split options as ``gnnprivacy train`` loads it, so
            the shards hold the same training and test nodes; a graph dataset such as
            ``cox2`` with its stratified split of ``split_seed``); a PyG ``Data`` (its masks
            are the split); or a list of graphs (every one a training graph) or a
            `gnnprivacy.datasets.tu_graphs.GraphSet`.
        out: the folder of the shards (``meta.json``, the global maps, ``part{k}/``); files
            of the user's there are kept, and only the files of an earlier partition are
            replaced (``overwrite``).
        num_parts: number of parts, one per rank (``parts`` is the same, as ``--parts``).
        method: ``"auto"`` (METIS while the graph fits it, else contiguous ids),
            ``"metis"`` or ``"contiguous"`` (node graphs; a graph list is cut into contiguous
            blocks of about the same number of nodes).
        seed: METIS's seed, the drawn training split's (``train_fraction``), and the split
            seed of a named dataset unless ``split_seed`` is given (as ``train --seed``).
        train_fraction: the share of training nodes drawn for a graph without a split (a
            ``csbm-large`` folder, a ``Data`` without ``train_mask``); default 0.5.
        split: a named node dataset's split, as ``gnnprivacy train --split`` takes it.
        split_seed: its seed (default ``seed``).
        train_frac: its training fraction (``train --train-frac``).
        val_frac: its validation fraction.
        test_frac: its test fraction.
        dataset_args: its generator arguments (``train --dataset-args``).
        data_root: where a named dataset's raw files are.
        overwrite: replace the shards of an earlier partition in ``out``.

    Returns:
        The folder (a ``pathlib.Path``); ``gnnprivacy.datasets.shards.open_shard(out, k)``
        maps part ``k`` (graph lists: `gnnprivacy.datasets.graph_shards.open_graph_shard`),
        and `gnnprivacy.training.sharded` trains on them.

    Raises:
        InvalidParameterError: a graph that is neither (``./no/such/folder`` is named as a
            missing folder, not looked up as a dataset), an invalid graph (named as
            ``gp.train`` names it), an option that does not apply to this graph, or a refused
            ``out``.
        WriteFailedError: the shards could not be written (a full disk ...); nothing is left
            half-written.

    Example:
        >>> import tempfile, gnnprivacy as gp
        >>> folder = gp.partition("csbm", tempfile.mkdtemp(), num_parts=2)
        >>> (folder / "part1" / "x.npy").exists()
        True
    """
    import os
    from pathlib import Path

    from gnnprivacy.datasets.shards import partition_graph

    if (num_parts is None) == (parts is None):
        raise InvalidParameterError("num_parts", "the number of parts, given once (num_parts= "
                                    "or its alias parts=)", "both" if parts else "neither")
    count = num_parts if num_parts is not None else parts
    split_options = {k: v for k, v in dict(split=split, split_seed=split_seed,
                                           train_frac=train_frac, val_frac=val_frac,
                                           test_frac=test_frac,
                                           dataset_args=dataset_args).items() if v is not None}

    def refuse(options, why):
        if options:
            name = sorted(options)[0]
            raise InvalidParameterError(name, f"unset: {why}", options[name])

    if isinstance(graph, (str, Path)):
        text = str(graph)
        path = Path(text).expanduser()
        if path.is_dir():
            refuse(split_options, f"{text} is a graph folder without a split (train_fraction "
                                  "draws its training nodes)")
            return partition_graph(path, out, num_parts=count, method=method, seed=seed,
                                   train_fraction=train_fraction, overwrite=overwrite)
        if os.sep in text or "/" in text or text.startswith((".", "~")) or path.exists():
            raise InvalidParameterError("graph", "a csbm-large graph folder or a dataset name",
                                        f"{text} ({'a file' if path.exists() else 'no such folder'})")
        from gnnprivacy.datasets.tu_graphs import list_graph_datasets, load_graph_dataset

        refuse({"train_fraction": train_fraction} if train_fraction is not None else {},
               f"{text} has a split (choose it with split=, train_frac= ...)")
        if text.lower() in list_graph_datasets():
            refuse({k: v for k, v in split_options.items() if k != "split_seed"},
                   f"{text} is a graph dataset with a fixed stratified split (80/10/10 of "
                   "every class; split_seed chooses it)")
            graph = load_graph_dataset(text, root=data_root,
                                       seed=seed if split_seed is None else split_seed)
        else:
            from gnnprivacy.datasets import load_dataset
            from gnnprivacy.method.config import parse_dataset_args

            graph = load_dataset(text, root=data_root, split=split,
                                 seed=seed if split_seed is None else split_seed,
                                 train_frac=train_frac, val_frac=val_frac, test_frac=test_frac,
                                 **parse_dataset_args(dataset_args))
            if getattr(getattr(graph, "split", None), "kind", None) == "inductive":
                raise InvalidParameterError("split", "a transductive split (sharded training "
                                            "sees every node)", "inductive")
    else:
        refuse(split_options, "the graph given is already loaded (its masks are the split)")
    from gnnprivacy.datasets.tu_graphs import GraphSet

    if isinstance(graph, GraphSet) or isinstance(graph, (list, tuple)):
        from gnnprivacy.datasets.graph_shards import partition_graph_list
        from gnnprivacy.training.private.graph_sampler import check_graphs

        refuse({"train_fraction": train_fraction} if train_fraction is not None else {},
               "a graph list's training graphs are its split (or every graph)")
        if method not in ("auto", "contiguous"):
            raise InvalidParameterError("method", "'auto' or 'contiguous' for a list of graphs",
                                        method)
        if isinstance(graph, GraphSet):
            check_graphs(graph.graphs)
            sp = graph.split
            return partition_graph_list(graph.graphs, out, num_parts=count, train=sp.train_idx,
                                        val=sp.val_idx, test=sp.test_idx, overwrite=overwrite,
                                        source=graph.name)
        graphs = check_graphs(graph)
        return partition_graph_list(graphs, out, num_parts=count, overwrite=overwrite)
    return partition_graph(graph, out, num_parts=count, method=method, seed=seed,
                           train_fraction=train_fraction, overwrite=overwrite)


def load(path: str, *, imports: str | tuple[str, ...] | list[str] = ()):
    """Any model file the library writes, with ``predict``: the one loader.

    * a model saved by ``gnnprivacy train`` or `TrainResult.save` (``<run_id>.model.pt``
      beside its record; node methods and the graph task): a `TrainResult` whose
      ``predict(data)`` gives the same predictions as the trained model (one row per node,
      or per graph for the graph task);
    * a model saved by `gnnprivacy.save_model`: a
      `gnnprivacy.training.user_model.SavedModel` (``.model``, ``.privacy``,
      ``.epsilon``, ``.predict(data)``); its class must be imported, or named in
      ``imports`` (the file never chooses what is imported).

    Raises:
        InvalidParameterError: not a saved model (the message names the file).
    """
    import os

    from gnnprivacy.records.record import RunRecord, _decode
    from gnnprivacy.training.persist import load_model_file
    from gnnprivacy.training.user_model import USER_FORMAT, load_model, model_file_format

    if not isinstance(path, (str, os.PathLike)):
        raise InvalidParameterError("path", "the path of a saved model (<run_id>.model.pt)", path)
    if model_file_format(path) == USER_FORMAT:
        # the graph task's classifier: the library's own module, trusted as any import
        saved = load_model(path, imports=("gnnprivacy.training.graph_classification",
                                          *_names(imports)))
        if saved.run is None:
            return saved
        return TrainResult(record=_run_record(saved.run, path), model=saved.model, data=None)
    model, record = load_model_file(path)
    return TrainResult(record=RunRecord(**_decode(record)), model=model, data=None)


def _names(imports) -> tuple:
    return (imports,) if isinstance(imports, str) else tuple(imports)


def _run_record(run: dict, path):
    """The run record a saved model carries, or a one-line error naming the file."""
    from gnnprivacy.records.record import RunRecord, _decode

    try:
        return RunRecord(**_decode(run))
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError("path", "a saved model with a complete run record",
                                    f"{path} ({type(exc).__name__}: {exc})") from None


def assess(model: Any, data: Any = None, **options: Any) -> dict[str, Any]:
    """The privacy report card of a model or a run (Markdown / HTML:
    `gnnprivacy.auditing.report_card.card_to_markdown`, ``card_to_html``).

    * ``assess(model, data, train_fn=None, privacy=None, ...)``: any node model released on
      ``data``: an ``nn.Module`` with ``forward(x, edge_index)``, a `PrivateTraining` or a
      `TrainResult` (`gnnprivacy.auditing.model_card.assess_model`: membership thresholds,
      LiRA with shadows trained by ``train_fn(data, seed)``, the code audit, link stealing);
    * ``assess(model, graphs, train_fn=None, privacy=None, members=..., nonmembers=...)``: a
      graph-level model (``forward(x, edge_index, batch[, edge_attr])``, one row of logits per
      graph, e.g. trained with ``make_private(sampler="graphs")``) on a list of ``Data``, a PyG
      ``Dataset`` of graphs or a `GraphSet` (`load_graph_dataset`; its split gives the
      default members and non-members): the same card with a graph as the unit
      (``train_fn(graphs, seed)``; link stealing does not apply, and the card says so);
    * ``assess([model, ...], data, ...)`` or ``assess({name: model, ...}, data, ...)``:
      several models of one graph in one card (a comparison table, the ROC curves overlaid,
      the AUCs against epsilon; `gnnprivacy.auditing.model_card.assess_models`); a dict's
      value may be ``{"model": m, "privacy": ..., "train_fn": ...}``;
    * ``assess(record)``: a built-in method's run record, its path, a `TrainResult` or a
      saved model (`gnnprivacy.auditing.report_card.report_card`, options as there).

    Raises:
        InvalidParameterError: a model without ``data``, or data without a model.

    Example:
        >>> import gnnprivacy as gp
        >>> from torch_geometric.nn import GCNConv
        >>> data = gp.load_dataset("csbm", num_nodes=300)
        >>> model = GCNConv(data.num_features, int(data.num_classes))
        >>> card = gp.assess(model, data)     # untrained and not private
        >>> loss_attack = card["membership"].get("loss_threshold")
        >>> card["claimed"].get("epsilon"), 0.3 < loss_attack.get("auc") < 0.7
        (inf, True)
    """
    from gnnprivacy.auditing.model_card import assess_model, assess_models, is_model
    from gnnprivacy.auditing.report_card import report_card

    if isinstance(model, (list, tuple, dict)):
        if data is None:
            raise InvalidParameterError("data", "the graph the models were trained on "
                                        "(assess(models, data))", None)
        return assess_models(_model_specs(model), data, **options)
    if isinstance(model, TrainResult):
        if data is None:
            return report_card(model.record, **options)
        options.setdefault("privacy", model.record if model.record.privacy.get("private")
                           else None)
        model = model.model
    if is_model(model):
        if data is None:
            raise InvalidParameterError("data", "the graph the model was trained on "
                                        "(assess(model, data))", None)
        return assess_model(model, data, **options)
    if data is not None:
        raise InvalidParameterError("model", "a node model (an nn.Module with forward(x, "
                                    "edge_index)) or a graph model (forward(x, edge_index, "
                                    "batch)) to assess on data", type(model).__name__)
    return report_card(model, **options)


def _model_specs(models):
    """Several models for `assess`, a `TrainResult` among them as its model and claim."""
    def spec(m):
        if isinstance(m, TrainResult):
            return {"model": m.model,
                    "privacy": m.record if m.record.privacy.get("private") else None}
        return m

    if isinstance(models, dict):
        return {k: spec(v) for k, v in models.items()}
    return [spec(m) for m in models]
