"""Run one training job from a flat configuration and write its record.

This is the only path from a configuration to a result: ``gnnprivacy train``, sweeps and
reproduction scripts all call `run`.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gnnprivacy.datasets.splits import split_warnings
from gnnprivacy._files import atomic_write, check_writable_dir
from gnnprivacy.datasets.validate import validate_data, validate_graph_set
from gnnprivacy.errors import InvalidParameterError, WriteFailedError
from gnnprivacy.method.config import config_to_dict, resolve_config
from gnnprivacy.method.context import MethodResult, RunContext
from gnnprivacy.method.data import load_run_data, split_kind  # noqa: F401 (re-exported)
from gnnprivacy.method.registry import get_method
from gnnprivacy.records.store import check_runs_dir
from gnnprivacy.records.record import RunRecord
from gnnprivacy._torch_state import torch_state_kept


@torch_state_kept()   # an interrupt anywhere in a run leaves torch's thread state as found
def run(values: dict[str, Any], *, progress: Callable | None = None,
        log: Callable[[str], None] | None = None, save: bool = True,
        run_id: str | None = None, data: Any = None,
        keep_result: dict[str, Any] | None = None, info: dict[str, Any] | None = None,
        model_path: str | None = None) -> RunRecord:
    """Resolve ``values``, train, evaluate, and write one run record.

    Args:
        values: flat configuration (RunConfig fields and the method's parameters).
        progress: optional ``progress(description, total)`` factory returning an object with
            ``update(n)``; methods call it for long loops.
        log: optional message sink.
        save: write the record (and the split) under ``config.runs_dir``.
        run_id: fixed record id (sweeps use a deterministic id); default: time + random suffix.
        data: a user's ``torch_geometric.data.Data`` to train on instead of loading
            ``config.dataset`` (which then only names it in the record); see
            `gnnprivacy.method.user_data.prepare_user_data`.
        keep_result: if given, receives ``{"result": MethodResult, "data": the data trained
            on}`` (the public API keeps the fitted model this way).
        model_path: where to save the trained model (default, when saving:
            ``<runs_dir>/<run_id>.model.pt`` beside the record; see
            `gnnprivacy.training.persist`).

        info: extra entries for the record's ``info`` (a sweep's name and repeat index).

    Returns:
        The `RunRecord` (also written to ``<runs_dir>/<run_id>.json``).

    Raises:
        RunNotPublishedError: the run finished but its files could not be written (a full
            disk, a read-only folder); it carries the record, and a private run's last
            checkpoint is kept, so ``resume`` publishes it without training again.

    Writing: the output locations (the runs directory, and the checkpoint folder of a method
    that checkpoints) are checked before any work; the split and then the record are
    published together (`publish_run`).
    """
    t_start = time.perf_counter()
    config, params = resolve_config(values)
    spec = get_method(config.method)
    ckpt = check_run_outputs(config, params, spec, save=save)
    if data is not None and spec.task == "graph":
        raise InvalidParameterError(
            "data", f"a graph dataset's name for {spec.name!r} (the graph task trains on a TU "
            "graph dataset; your own list of graphs: gp.make_private(model, optimizer, graphs, "
            "sampler='graphs') in your loop)", type(data).__name__)
    if data is None:
        data = load_run_data(config)
    else:
        from gnnprivacy.method.user_data import prepare_user_data

        data = prepare_user_data(data, name=config.dataset, split=config.split,
                                 seed=config.seed if config.split_seed is None else config.split_seed,
                                 train_frac=config.train_frac, val_frac=config.val_frac,
                                 test_frac=config.test_frac)
        info = {**(info or {}), "user_data": True}
    if spec.task == "node":
        validate_data(data)  # NaN/inf, shapes, masks, empty split, < 2 training classes
    elif spec.task == "graph":
        validate_graph_set(data)   # every graph, and the split (graphs, classes, test set)
    notes = split_warnings(data.split) if spec.task == "node" else []  # < 500 training nodes
    for note in notes:
        (log or (lambda m: None))(f"warning: {note}")
    t_loaded = time.perf_counter()
    if ckpt is not None:
        describe_checkpoint(ckpt, config, params)
    ctx = RunContext(config=config, params=params, data=data, seed=config.seed,
                     device=config.device, progress=progress, log=log or (lambda m: None),
                     checkpoint_path=None if ckpt is None else str(ckpt),
                     resume=bool(config.resume))
    result = spec.fn(ctx)
    if not isinstance(result, MethodResult):
        raise TypeError(f"method {spec.name!r} returned {type(result).__name__}, not MethodResult")
    if spec.private and not math.isfinite(result.epsilon):
        raise RuntimeError(f"private method {spec.name!r} reported a non-finite epsilon")
    if spec.private:
        check_executed_ledger(result, target=getattr(params, "epsilon", None),
                              what=f"{spec.name} on {config.dataset}")
    t_end = time.perf_counter()
    caveat = large_delta_caveat(result.delta, int(data.num_nodes)) if spec.private else None
    if caveat is not None:
        warnings.warn(caveat, LargeDeltaWarning, stacklevel=2)
        info = {**(info or {}), "warnings": [caveat]}
    if keep_result is not None:
        keep_result.update(result=result, data=data)
    split = data.split
    metrics = {k: float(v) for k, v in result.metrics.items()}
    if spec.task == "node" and "test_majority_rate" not in metrics:
        rate = majority_rate(data)
        if rate is not None:
            metrics["test_majority_rate"] = rate
    record = RunRecord(
        run_id=run_id or RunRecord.new_id(spec.name, config.dataset),
        method=spec.name,
        dataset=config.dataset,
        config=config_to_dict(config, params),
        seeds={"run": config.seed, "split": split.seed},
        epsilon=float(result.epsilon),
        delta=None if result.delta is None else float(result.delta),
        privacy={"private": spec.private, **result.privacy, "ledger": result.ledger},
        metrics=metrics,
        timings={"load_seconds": t_loaded - t_start, "fit_seconds": t_end - t_loaded,
                 "total_seconds": t_end - t_start},
        split=split.to_dict(),
        info={**result.info, **(info or {})},
        warnings=notes,
    )
    if save:
        companions = _model_companion(record, getattr(result, "model", None), data, config,
                                      model_path)
        publish_run(record, split, Path(config.runs_dir), ckpt, companions)
    return record


def majority_rate(data) -> float | None:
    """The test accuracy of the trivial classifier: the share of the test split's most frequent
    label (single-label node classification; None without labels or a test mask). The report
    judges a cell where the paper and ours sit at this rate apart (``reporting.verdicts``)."""
    import torch

    y, mask = getattr(data, "y", None), getattr(data, "test_mask", None)
    if y is None or mask is None or y.dim() != 1 or int(mask.sum()) == 0:
        return None
    labels = y[mask]
    labels = labels[labels >= 0]
    if labels.numel() == 0:
        return None
    return float(torch.bincount(labels.long()).max()) / labels.numel()


def _model_companion(record: RunRecord, model, data, config,
                     model_path: str | None) -> dict[str, Callable]:
    """Keep the trained model (the record names the file in ``info["model_file"]``).

    Beside the record (the default) it is one of the run's companion files, published with the
    split before the record, with its checksum: a run is finished with its model or not at all.
    Elsewhere (``model_path``) it is written atomically now. Methods whose model cannot
    predict keep none."""
    from gnnprivacy.training.persist import save_model_file

    if getattr(config, "task", "node") == "graph" and hasattr(model, "init_args"):
        return _graph_model_companion(record, model, data, model_path)
    if model is None or not (hasattr(model, "predict_logits") or hasattr(model, "logits_")):
        return {}
    if model_path:
        record.info["model_file"] = str(Path(model_path))
        save_model_file(model_path, trainer=model, data=data, method=record.method,
                        record=record.to_dict())
        return {}
    name = f"{record.run_id}.model.pt"
    record.info["model_file"] = name
    snapshot = record.to_dict()
    return {name: lambda path: save_model_file(path, trainer=model, data=data,
                                               method=record.method, record=snapshot)}


def _graph_model_companion(record: RunRecord, model, data, model_path: str | None
                           ) -> dict[str, Callable]:
    """A graph task's classifier (`GraphClassifier`) is kept as a saved user model
    (`graph_model_writer`), the file ``gnnprivacy assess`` and ``gnnprivacy.load`` read."""
    write = graph_model_writer(record, model, data)
    if model_path:
        record.info["model_file"] = str(Path(model_path))
        write(model_path)
        return {}
    name = f"{record.run_id}.model.pt"
    record.info["model_file"] = name
    return {name: write}


def graph_model_writer(record: RunRecord, model, data) -> Callable:
    """``write(path)`` of a graph task's classifier: a saved user model
    (`gnnprivacy.training.user_model.save_model`: class path, ``init``, weights, the claim,
    the graph dataset with its split, and the run record, read weights-only). The caller has
    checked the path (``--save-model --force``, `TrainResult.save`)."""
    from gnnprivacy.training.user_model import save_model

    claim = ({**{k: v for k, v in record.privacy.items() if k != "ledger"},
              "epsilon": record.epsilon, "delta": record.delta}
             if record.privacy.get("private") else None)
    split = data.split
    dataset = {"name": record.dataset, "task": "graph", "seed": int(split.seed)}
    given = {k: record.config.get(k) for k in ("train_frac", "val_frac", "test_frac")}
    dataset.update({k: v for k, v in given.items() if v is not None})

    def write(path):
        return save_model(model, path, privacy=claim, init=model.init_args, dataset=dataset,
                          force=True, run_record={**record.to_dict(), "info": {
                              **record.info, "model_file": Path(path).name}})
    return write


def check_executed_ledger(result: MethodResult, *, target: float | None, what: str) -> None:
    """Compose the run's executed ledger in a fresh accountant (no disk cache) and refuse
    the run when it costs more than ``target`` or than the epsilon it reports (issue 22
    item 7); a ledger made of parts (``{"features": ..., "edges": ...}``) is checked part
    by part against the parts' reported epsilons.

    Raises:
        SpentBudgetError: the executed ledger exceeds the target or the reported figure.
    """
    from gnnprivacy.accounting.verify import check_spent

    ledger = result.ledger
    if not isinstance(ledger, dict):
        return
    if "ledger" in ledger:
        check_spent(ledger, reported=result.epsilon, target=target, delta=result.delta,
                    what=what)
        return
    for part, sub in ledger.items():
        if isinstance(sub, dict) and "ledger" in sub and "epsilon" in sub:
            reported = float(sub["epsilon"])
            check_spent(sub, reported=reported, what=f"{what} ({part})")


def check_run_outputs(config, params, spec, *, save: bool) -> Path | None:
    """Check every output location of a run before any work (`run` and the sharded driver
    call it first, so an unwritable folder cannot lose a trained result).

    Args:
        config: the resolved `RunConfig`.
        params: the method's resolved parameters.
        spec: the method's registry entry (`MethodSpec`): whether it checkpoints.
        save: whether the run writes its record (``False``: nothing to check).

    Returns:
        The checkpoint path of a method that checkpoints, ``None`` otherwise or when not saving.

    Raises:
        InvalidParameterError: ``resume`` with a method that writes no checkpoint, or without
            a runs directory.
        WriteFailedError: the runs directory or its checkpoint folder cannot be written.

    Warns:
        ResumeWarning: ``resume`` was asked for but this configuration has no checkpoint.
    """
    if config.resume and not spec.checkpoints:
        raise InvalidParameterError(
            "resume", "used with a method that checkpoints (heterpoisson, dpgnn, dpmlp)",
            f"--resume with {spec.name} (it writes no checkpoint to resume from)")
    if config.resume and not save:
        raise InvalidParameterError("resume", "used with a runs directory (the checkpoints live "
                                    "there)", "resume without runs_dir")
    if not save:
        return None
    check_runs_dir(config.runs_dir)  # before training: an unwritable runs_dir must not lose a result
    if not spec.checkpoints:
        return None
    ckpt = checkpoint_path_for(config, params)
    check_writable_dir(ckpt.parent, name=f"runs_dir (its {ckpt.parent.name}/ folder)", create=False)
    if config.resume and not ckpt.exists():
        warnings.warn(no_checkpoint_message(ckpt, config, params), ResumeWarning, stacklevel=3)
    return ckpt


def describe_checkpoint(ckpt: Path, config, params) -> None:
    """Write, beside the checkpoint ``ckpt``, its configuration (``<ckpt>.json``): a ``--resume``
    with changed options can then say which options changed (see `no_checkpoint_message`).

    Raises:
        WriteFailedError: the description could not be written.
    """
    atomic_write(ckpt.with_suffix(".json"), json.dumps(_checkpoint_payload(config, params), sort_keys=True),
                 what="checkpoint description")


def publish_run(record: RunRecord, split, runs_dir: Path, ckpt: Path | None,
                companions: dict[str, Callable] | None = None) -> None:
    """Publish a finished run under ``runs_dir``: its record, its split (when ``split`` is not
    ``None``) and the ``companions`` files (name -> writer) together, through
    `ResultStore.publish`; then the run's checkpoint ``ckpt`` and its description, whose job
    is done, are removed.

    Raises:
        RunNotPublishedError: a file could not be written; it carries the record and the
            checkpoint, kept (``None`` without one), so ``resume`` publishes without training.
    """
    from gnnprivacy.records.store import ResultStore

    files = {} if split is None else {f"{record.run_id}.split.npz": split.save}
    try:
        ResultStore(runs_dir).publish(record, {**files, **(companions or {})})
    except WriteFailedError as exc:
        raise RunNotPublishedError(exc, record, ckpt if ckpt is not None and ckpt.exists() else None) from exc
    if ckpt is not None:  # the record is written: the checkpoint has done its job
        ckpt.unlink(missing_ok=True)
        ckpt.with_suffix(".json").unlink(missing_ok=True)


#: a delta above this is no meaningful guarantee (the mechanism may fail outright that often)
LARGE_DELTA = 0.01


class LargeDeltaWarning(UserWarning):
    """A private run's delta is too large to mean much (a graph of very few nodes)."""


def large_delta_caveat(delta: float | None, num_nodes: int) -> str | None:
    """The warning for a delta above `LARGE_DELTA` (``None`` when there is none)."""
    if delta is None or not delta > LARGE_DELTA:
        return None
    return (f"delta = {delta:.3g} on a graph of {num_nodes} nodes: an (epsilon, delta) guarantee may fail "
            f"outright with probability delta, so a delta above {LARGE_DELTA:g} protects little "
            "(the default delta shrinks with the number of nodes; use a larger graph or a smaller --delta)")


class ResumeWarning(UserWarning):
    """``resume`` was asked for, but there is no checkpoint of this configuration."""


class RunNotPublishedError(WriteFailedError):
    """A run finished but its files could not be written.

    Attributes:
        record: the finished run's `RunRecord` (nothing of it was published).
        checkpoint: the private run's last checkpoint, kept (``None`` if there is none): the
            same command with ``--resume`` publishes the run without training again.
    """

    def __init__(self, cause: WriteFailedError, record: RunRecord, checkpoint: Path | None):
        super().__init__(cause.what, cause.path, OSError(cause.errno, cause.reason))
        self.record = record
        self.checkpoint = checkpoint

    def __str__(self) -> str:
        text = f"{super().__str__()}; the run finished but nothing of it was published"
        if self.checkpoint is not None:
            text += f" (its checkpoint {self.checkpoint} is kept: rerun with --resume to publish it)"
        return text


def no_checkpoint_message(ckpt: Path, config, params) -> str:
    """``resume`` without a checkpoint of this configuration: say so, and name the nearest
    checkpoint of the same method with the options that differ (e.g. ``steps``)."""
    text = f"resume: no checkpoint of this configuration ({ckpt}); training from step 0"
    mine = _checkpoint_payload(config, params)
    best = None
    for meta in sorted(ckpt.parent.glob(f"{config.method}-*.json")):
        try:
            other = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(other, dict) or not meta.with_suffix(".pt").exists():
            continue
        diff = sorted(k for k in set(mine) | set(other) if mine.get(k) != other.get(k))
        if best is None or len(diff) < len(best[1]):
            best = (meta.with_suffix(".pt"), diff, other)
    if best is not None:
        changes = ", ".join(f"{k} {best[2].get(k)!r} there, {mine.get(k)!r} here" for k in best[1][:4])
        text += f" (the checkpoint {best[0].name} is of another configuration: {changes})"
    return text


def _checkpoint_payload(config, params) -> dict[str, Any]:
    return json.loads(json.dumps({k: v for k, v in config_to_dict(config, params).items()
                                  if k not in ("runs_dir", "data_root", "resume")}, default=str))


def checkpoint_path_for(config, params) -> Path:
    """``<runs_dir>/checkpoints/<method>-<hash>.pt``, keyed by the resolved configuration
    (without ``runs_dir``, ``data_root`` and ``resume``), so ``--resume`` with the same
    options finds the checkpoint of the killed run."""
    import hashlib

    payload = _checkpoint_payload(config, params)
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode())
    return Path(config.runs_dir) / "checkpoints" / f"{config.method}-{digest.hexdigest()[:16]}.pt"
