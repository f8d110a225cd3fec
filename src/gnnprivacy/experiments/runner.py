"""Run one training job from a flat configuration and write its record.

This is the only path from a configuration to a result: ``gnnprivacy train``, sweeps and
reproduction scripts all call `run`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gnnprivacy.datasets.splits import split_warnings
from gnnprivacy.datasets.validate import validate_data
from gnnprivacy.experiments.config import config_to_dict, parse_dataset_args, resolve_config
from gnnprivacy.experiments.context import MethodResult, RunContext
from gnnprivacy.experiments.registry import get_method
from gnnprivacy.experiments.store import check_runs_dir
from gnnprivacy.reporting.record import RunRecord


def load_run_data(config):
    """Load the dataset and split named by ``config`` (a `RunConfig`)."""
    from gnnprivacy.datasets import load_dataset

    return load_dataset(
        config.dataset, root=config.data_root, split=config.split,
        seed=config.seed if config.split_seed is None else config.split_seed,
        train_frac=config.train_frac, val_frac=config.val_frac, test_frac=config.test_frac,
        **parse_dataset_args(config.dataset_args))


def run(values: dict[str, Any], *, progress: Callable | None = None,
        log: Callable[[str], None] | None = None, save: bool = True,
        run_id: str | None = None, data: Any = None,
        keep_result: dict[str, Any] | None = None, model_path: str | None = None) -> RunRecord:
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
            `gnnprivacy.experiments.user_data.prepare_user_data`.
        keep_result: if given, receives ``{"result": MethodResult, "data": the data trained
            on}`` (the public API keeps the fitted model this way).
        model_path: where to save the trained model (default, when saving:
            ``<runs_dir>/<run_id>.model.pt`` beside the record; see
            `gnnprivacy.training.persist`).

    Returns:
        The `RunRecord` (also written to ``<runs_dir>/<run_id>.json``).
    """
    t_start = time.perf_counter()
    config, params = resolve_config(values)
    spec = get_method(config.method)
    if save:
        check_runs_dir(config.runs_dir)  # before training: an unwritable runs_dir must not lose a result
    if data is None:
        data = load_run_data(config)
    else:
        from gnnprivacy.experiments.user_data import prepare_user_data

        data = prepare_user_data(data, name=config.dataset, split=config.split,
                                 seed=config.seed if config.split_seed is None else config.split_seed,
                                 train_frac=config.train_frac, val_frac=config.val_frac,
                                 test_frac=config.test_frac)
    validate_data(data)  # NaN/inf, shapes, masks, empty split, < 2 training classes
    notes = split_warnings(data.split)   # fewer than 500 training nodes
    for note in notes:
        (log or (lambda m: None))(f"warning: {note}")
    t_loaded = time.perf_counter()
    ckpt = checkpoint_path_for(config, params) if save and spec.private else None
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
    if keep_result is not None:
        keep_result.update(result=result, data=data)
    split = data.split
    record = RunRecord(
        run_id=run_id or RunRecord.new_id(spec.name, config.dataset),
        method=spec.name,
        dataset=config.dataset,
        config=config_to_dict(config, params),
        seeds={"run": config.seed, "split": split.seed},
        epsilon=float(result.epsilon),
        delta=None if result.delta is None else float(result.delta),
        privacy={"private": spec.private, **result.privacy, "ledger": result.ledger},
        metrics={k: float(v) for k, v in result.metrics.items()},
        timings={"load_seconds": t_loaded - t_start, "fit_seconds": t_end - t_loaded,
                 "total_seconds": t_end - t_start},
        split=split.to_dict(),
        info=result.info,
        warnings=notes,
    )
    if save and getattr(result, "model", None) is not None:
        _save_model(record, result.model, data, config, model_path)
    if save:
        record.save(config.runs_dir)
        split.save(Path(config.runs_dir) / f"{record.run_id}.split.npz")
        if ckpt is not None:  # the record is written: the checkpoint has done its job
            ckpt.unlink(missing_ok=True)
    return record


def _save_model(record: RunRecord, model, data, config, model_path: str | None) -> None:
    """Keep the trained model beside its record (the record names the file in
    ``info["model_file"]``); methods whose model cannot predict are skipped."""
    from gnnprivacy.training.persist import save_model_file

    if not (hasattr(model, "predict_logits") or hasattr(model, "logits_")):
        return
    path = (Path(model_path) if model_path else
            Path(config.runs_dir) / f"{record.run_id}.model.pt")
    record.info["model_file"] = str(path.name if model_path is None else path)
    save_model_file(path, trainer=model, data=data, method=record.method,
                    record=record.to_dict())


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


def checkpoint_path_for(config, params) -> Path:
    """``<runs_dir>/checkpoints/<method>-<hash>.pt``, keyed by the resolved configuration
    (without ``runs_dir``, ``data_root`` and ``resume``), so ``--resume`` with the same
    options finds the checkpoint of the killed run."""
    import hashlib
    import json

    payload = {k: v for k, v in config_to_dict(config, params).items()
               if k not in ("runs_dir", "data_root", "resume")}
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode())
    return Path(config.runs_dir) / "checkpoints" / f"{config.method}-{digest.hexdigest()[:16]}.pt"
