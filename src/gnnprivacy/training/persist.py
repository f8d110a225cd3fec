"""Saved models: weights, JSON configuration and the run record, with no pickled code.

A saved model is one file written with ``torch.save`` and read with
``torch.load(path, weights_only=True)``: a dict of tensors and strings only:

```
{"format": "gnnprivacy-model/1", "method": "heterpoisson",
 "trainer": "HeterPoissonTrainer",            # one of the library's trainers (allowlist)
 "params": "<JSON: the trainer's constructor arguments>",
 "fitted": "<JSON: what fit() learned besides weights: feature map, sizes>",
 "record": "<JSON: the run record>",
 "tensors": {"model_.encoder.0.weight": tensor, ...}}
```

Loading rebuilds the trainer from its constructor arguments and its architecture from the
``fitted`` sizes, then loads the weights, so a loaded model predicts bit for bit what the
trained one did. Methods that are transductive by construction (the local-DP pipelines and
HeteroRR train on one released graph) are saved as the logits of every node of that graph
(``trainer: "Predictions"``): they predict on that graph only.

*Privacy.* A saved model holds what the record's epsilon covers, and nothing else: the
node-DP trainers' files hold their model's parameters (each released through the noisy
optimizer; no buffers), GAP's the encoder, the classifier and the ``K`` noisy aggregates
(``aggregates_``), not the hop-0 block of each node's own embedding, which has no noise (it is
recomputed from the features at prediction; tests/training/test_saved_model_scope.py checks
that a training node's true feature vector cannot be told from a wrong candidate from the
file). What the epsilon does not cover is listed in the record's ``privacy.unaccounted``
(e.g. ``feature_norm="standardize_global"``'s mean and std, stored in ``fitted``, and
HeterPoisson's ``train_mask_``, the run's training nodes, which private inference leaves out). The
``Predictions`` form holds the method's released outputs on its graph. The non-private
methods (``gcn`` ...) have no epsilon to cover.

Reading never runs code: ``torch.load(weights_only=True)`` refuses any Python object other
than tensors and plain values (a planted pickle payload is refused with one line, never run).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from gnnprivacy.errors import InvalidParameterError

__all__ = ["FORMAT", "Predictions", "load_model_file", "save_model_file"]

FORMAT = "gnnprivacy-model/1"


class Predictions:
    """The saved outputs of a transductive method: logits of every node of its graph.

    ``predict_logits(data)`` returns them when ``data`` is that graph (same number of nodes)
    and refuses another graph, which the method never saw.
    """

    def __init__(self, logits: Tensor, method: str):
        self.logits_ = logits
        self.method = method
        self.num_classes_ = int(logits.shape[1])

    def predict_logits(self, data=None, nodes: Tensor | None = None) -> Tensor:
        if data is not None and int(data.num_nodes) != self.logits_.shape[0]:
            raise InvalidParameterError(
                "data", f"the graph {self.method!r} was trained on ({self.logits_.shape[0]} "
                f"nodes): the method is transductive", f"a graph of {int(data.num_nodes)} nodes")
        return self.logits_ if nodes is None else self.logits_[nodes]


def _jsonable(value: Any) -> Any:
    if isinstance(value, (str, bool, type(None))):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, torch.device):
        return str(value)
    raise TypeError(type(value).__name__)


def _params(trainer) -> dict:
    """Constructor arguments that can be stored as JSON (randomness and callbacks dropped:
    a loaded model does not train)."""
    out = {}
    for key, value in trainer.get_params(deep=False).items():
        if key in ("generator", "progress", "checkpoint_path", "resume"):
            continue
        try:
            out[key] = _jsonable(value)
        except TypeError:
            continue
    return out


# ----------------------------------------------------------------- per-trainer state
def _norm_state(norm) -> dict:
    return {"requested": norm.requested, "mode": norm.mode, "shift": norm.shift,
            "scale": norm.scale}


def _norm_from(state: dict):
    from gnnprivacy.training.node_dp.common import FeatureNorm

    norm = FeatureNorm(state["requested"])
    norm.mode, norm.shift, norm.scale = state["mode"], state["shift"], state["scale"]
    return norm


def _build_heterpoisson(t, f: dict) -> None:
    from gnnprivacy.nn.star import StarGNN

    t.model_ = StarGNN(f["num_features"], f["num_classes"], aggregator=t.backbone,
                       hidden_channels=t.hidden_channels, update_layers=t.update_layers)


def _build_dpgnn(t, f: dict) -> None:
    from gnnprivacy.nn.dpgnn import OneLayerGCN

    t.model_ = OneLayerGCN(f["num_features"], f["num_classes"], indexed_input=True,
                           **t.model_kwargs)


def _build_dpmlp(t, f: dict) -> None:
    from gnnprivacy.training.node_dp.dpmlp import mlp

    t.model_ = mlp(f["num_features"], t.hidden_channels, f["num_classes"], t.num_layers,
                   t.activation)


def _build_full_batch(t, f: dict) -> None:
    from gnnprivacy.nn import build_encoder

    t.model_ = build_encoder(t.encoder, f["num_features"], f["num_classes"], **t.encoder_kwargs)
    t.sparse_features_ = bool(f.get("sparse_features", False))


def _build_gap(t, f: dict) -> None:
    from gnnprivacy.nn.gap import _mlp

    t.encoder_ = _mlp([f["num_features"], t.hidden, t.hidden])
    t.classifier_ = _mlp([t.hidden * (t.hops + 1), t.hidden, f["num_classes"]])
    t.agg_std_ = f["agg_std"]
    t._agg_gen = torch.Generator().manual_seed(0)


#: trainer class name -> (module, modules to save, extra tensors, builder)
_TRAINERS = {
    "HeterPoissonTrainer": ("gnnprivacy.training.node_dp", ("model_",), ("train_mask_",),
                            _build_heterpoisson),
    "DPGNNTrainer": ("gnnprivacy.training.node_dp", ("model_",), (), _build_dpgnn),
    "DPMLPTrainer": ("gnnprivacy.training.node_dp", ("model_",), (), _build_dpmlp),
    "FullBatchTrainer": ("gnnprivacy.training.nonprivate", ("model_",), (), _build_full_batch),
    "MiniBatchTrainer": ("gnnprivacy.training.nonprivate", ("model_",), (), _build_full_batch),
    "GAPTrainer": ("gnnprivacy.training.gap", ("encoder_", "classifier_"), ("aggregates_",), _build_gap),
}


def _trainer_module(module: str):
    """The module ``module`` of `_TRAINERS`, imported by name in code (not through
    ``importlib``), so the import linter sees every module a saved model can load."""
    if module == "gnnprivacy.training.node_dp":
        from gnnprivacy.training import node_dp as loaded
    elif module == "gnnprivacy.training.nonprivate":
        from gnnprivacy.training import nonprivate as loaded
    else:
        from gnnprivacy.training import gap as loaded
    assert loaded.__name__ == module, module
    return loaded


def _fitted(trainer, data) -> dict:
    f = {"num_features": int(data.num_features), "num_classes": int(trainer.num_classes_),
         "num_nodes": int(data.num_nodes)}
    if hasattr(trainer, "feature_norm_"):
        f["feature_norm"] = _norm_state(trainer.feature_norm_)
    if hasattr(trainer, "sparse_features_"):
        f["sparse_features"] = bool(trainer.sparse_features_)
    if hasattr(trainer, "agg_std_"):
        f["agg_std"] = float(trainer.agg_std_)
    for key in ("epsilon_", "delta_"):
        if hasattr(trainer, key):
            f[key] = _jsonable(float(getattr(trainer, key)))
    return f


def save_model_file(path: str | Path, *, trainer: Any, data, method: str,
                    record: dict | None = None, writer=None) -> Path:
    """Write ``trainer`` (fitted on ``data``) as a saved model.

    Args:
        path: the file (conventionally ``<run_id>.model.pt``).
        trainer: a fitted library trainer, or any object with ``predict_logits``/``logits_``
            (saved as its predictions on ``data``).
        data: the graph the trainer was fitted on.
        method: the method name (for the record and the messages).
        record: the run record as a dict (``RunRecord.to_dict()``).
        writer: ``writer(path, bytes)`` (default: an atomic write).

    Returns:
        The path written.
    """
    import io

    name = type(trainer).__name__
    blob: dict[str, Any] = {"format": FORMAT, "method": method,
                            "record": json.dumps(record or {}, default=str)}
    if name in _TRAINERS:
        _, modules, extra, _ = _TRAINERS[name]
        tensors = {f"{attr}.{k}": v.detach().cpu() for attr in modules
                   for k, v in getattr(trainer, attr).state_dict().items()}
        tensors.update({attr: getattr(trainer, attr).detach().cpu() for attr in extra
                        if hasattr(trainer, attr)})
        blob.update(trainer=name, params=json.dumps(_params(trainer)),
                    fitted=json.dumps(_fitted(trainer, data)), tensors=tensors)
    else:
        logits = (trainer.predict_logits(data) if hasattr(trainer, "predict_logits")
                  else trainer.logits_)
        blob.update(trainer="Predictions", params="{}", fitted=json.dumps(
            {"num_nodes": int(logits.shape[0])}), tensors={"logits": logits.detach().cpu()})
    buffer = io.BytesIO()
    torch.save(blob, buffer)
    path = Path(path)
    if writer is not None:
        writer(path, buffer.getvalue())
    else:
        from gnnprivacy._files import atomic_write

        atomic_write(path, buffer.getvalue(), what="saved model")
    return path


def load_model_file(path: str | Path) -> tuple[Any, dict]:
    """Read a saved model: ``(predictor, record dict)``.

    Raises:
        InvalidParameterError: the file is missing, not a saved model, or names an unknown
            trainer.
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidParameterError("path", "a saved model file (<run_id>.model.pt)",
                                    str(path))
    from gnnprivacy.training.checkpoint import read_weights_only

    blob = read_weights_only(path, name="path", expected="a saved model written by gnnprivacy "
                             "(tensors and plain values only)")
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        raise InvalidParameterError("path", f"a saved model of format {FORMAT}", str(path))
    try:
        record, fitted = json.loads(blob["record"]), json.loads(blob["fitted"])
        tensors, name, params = blob["tensors"], blob["trainer"], json.loads(blob["params"])
        if not (isinstance(record, dict) and isinstance(fitted, dict)
                and isinstance(tensors, dict) and isinstance(params, dict)):
            raise TypeError("record, fitted, params and tensors must be mappings")
        if name == "Predictions":
            logits = tensors["logits"]
            if not (isinstance(logits, torch.Tensor) and logits.dim() == 2
                    and logits.is_floating_point() and bool(torch.isfinite(logits).all())):
                raise ValueError("logits must be a finite [num_nodes, num_classes] tensor")
            return Predictions(logits, blob["method"]), record
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        raise InvalidParameterError("path", f"a complete {FORMAT} file",
                                    f"{path} ({type(exc).__name__}: {exc})") from None
    from gnnprivacy.training.user_model import check_finite_weights

    check_finite_weights(tensors, path)
    if not isinstance(name, str) or name not in _TRAINERS:
        raise InvalidParameterError("trainer", f"one of {sorted(_TRAINERS)}", name)
    cls = getattr(_trainer_module(_TRAINERS[name][0]), name)
    try:
        trainer = cls(**params)
        _rebuild(trainer, name, fitted, tensors)
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise InvalidParameterError("path", f"a {FORMAT} file whose parameters, sizes and "
                                    f"weights build {name}",
                                    f"{path} ({type(exc).__name__}: {first[:200]})") from None
    return trainer, record


def _rebuild(trainer, name: str, fitted: dict, tensors: dict) -> None:
    """The fitted state of ``trainer`` (built from its parameters) from a saved file."""
    module, modules, extra, build = _TRAINERS[name]
    trainer.num_classes_ = fitted["num_classes"]
    if "feature_norm" in fitted:
        trainer.feature_norm_ = _norm_from(fitted["feature_norm"])
    build(trainer, fitted)
    for attr in modules:
        module_obj: nn.Module = getattr(trainer, attr)
        prefix = f"{attr}."
        module_obj.load_state_dict({k[len(prefix):]: v for k, v in tensors.items()
                                    if k.startswith(prefix)})
        module_obj.eval()
    if name == "GAPTrainer" and "features_" in tensors:  # written before aggregates_: the
        # hop-0 block it also held (un-noised embeddings) is dropped, never used again
        tensors = {**tensors, "aggregates_": tensors["features_"][:, trainer.hidden:]}
    for attr in extra:
        if attr in tensors:  # a HeterPoisson model saved before its training set was kept has none
            setattr(trainer, attr, tensors[attr])
    trainer.device_ = torch.device("cpu")
    trainer.num_features_ = int(fitted["num_features"])
    for key in ("epsilon_", "delta_"):
        if key in fitted:
            setattr(trainer, key, float(fitted[key]))
