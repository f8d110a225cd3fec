"""``load_dataset``: registry lookup, loading through the PyG cache, standardisation, split."""

from __future__ import annotations

import os

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected

from gnnprivacy._validation import check_int
from gnnprivacy.errors import CorruptDatasetError
from gnnprivacy.datasets.paths import LoadContext, resolve_cache, resolve_root
from gnnprivacy.datasets.registry import DatasetInfo, get_spec
from gnnprivacy.datasets.splits import KINDS, Split, random_split, split_from_masks
from gnnprivacy.errors import InvalidParameterError, UnknownNameError

_MASKS = ("train_mask", "val_mask", "test_mask")


def _split_kind(info: DatasetInfo, split: str | None, fractions) -> str:
    if split is None:
        given = any(f is not None for f in fractions)
        return "random" if given and info.default_split == "public" else info.default_split
    if split not in KINDS:
        raise UnknownNameError("split", split, KINDS)
    if split == "public" and not info.public_split:
        raise InvalidParameterError(
            "split", f"'random' or 'inductive' (dataset {info.name!r} has no public split)", split)
    if split == "public" and any(f is not None for f in fractions):
        raise InvalidParameterError("train_frac, val_frac, test_frac",
                                    "None with split='public' (its sizes are fixed)", fractions)
    return split


def _standardize(data: Data, name: str) -> Data:
    """float32 ``x``, int64 flat ``y``, symmetrised and coalesced ``edge_index``.

    Modifies and returns ``data``, a fresh object from the loader (no copy of ``x``).
    """
    n = data.num_nodes
    out = data
    out.x = data.x.to(torch.float32).contiguous()
    out.y = data.y.view(-1).to(torch.long)
    out.edge_index = to_undirected(data.edge_index.to(torch.long), num_nodes=n)
    for key in ("edge_attr", "edge_weight"):  # invalid after symmetrising; none of ours has them
        if key in out:
            del out[key]
    out.name = name
    out.num_classes = int(out.y.max()) + 1 if out.y.numel() else 0
    return out


def _check_kwargs(spec, kwargs: dict) -> None:
    allowed = spec.keyword_names()
    for key in kwargs:
        if key not in allowed:
            raise UnknownNameError(f"keyword argument of dataset {spec.info.name!r}", key, allowed)


def _make_split(data: Data, info: DatasetInfo, kind: str, seed: int, fractions) -> Split:
    if kind == "public":
        masks = [getattr(data, k, None) for k in _MASKS]
        if any(m is None for m in masks):  # pragma: no cover - registry promises public masks
            raise InvalidParameterError("split", "a kind this dataset provides", kind)
        return split_from_masks(*(m.cpu().numpy() for m in masks), dataset=info.name)
    tr, va, te = fractions
    return random_split(data.num_nodes, seed=seed, dataset=info.name, kind=kind,
                        train_frac=tr, val_frac=va, test_frac=te)


def _check_catalogue_sizes(data: Data, info: DatasetInfo, root) -> None:
    """The loaded graph has the catalogue's nodes, edges, features and classes, else
    `CorruptDatasetError` naming what differs (a replaced ``ind.cora.y``, an emptied
    ``ind.cora.graph`` ...)."""
    if info.sizes is None:
        return
    got = (int(data.num_nodes), int(data.edge_index.shape[1]), int(data.x.shape[1]),
           int(data.num_classes))
    names = ("nodes", "edge_index columns", "features", "classes")
    wrong = [f"{g:,} {n} (the catalogue says {w:,})" for g, w, n in zip(got, info.sizes, names) if g != w]
    if wrong:
        raise CorruptDatasetError(
            f"{info.name}: the raw files in {root} give {'; '.join(wrong)}: a replaced or damaged raw "
            f"file? Compare them with the originals ({', '.join(info.raw_files)}); nothing was trained")


def load_dataset(name: str, *, root: str | os.PathLike | None = None, split: str | None = None,
                 seed: int = 0, train_frac: float | None = None, val_frac: float | None = None,
                 test_frac: float | None = None, cache_dir: str | os.PathLike | None = None,
                 download: bool = True, **dataset_kwargs) -> Data:
    """Load a registered dataset as a standardised PyG ``Data`` with a split.

    Args:
        name: registry name (``list_datasets()``), case-insensitive.
        root: data root with raw files in PyG's layout; else ``$GNNPRIVACY_DATA``, else
            ``~/.cache/gnnprivacy``. Never written to.
        split: ``"random"``, ``"public"`` or ``"inductive"``; ``None`` -> the dataset's
            default (``"public"`` for cora / citeseer unless fractions are given, else
            ``"random"``).
        seed: split seed (>= 0); the permutation is drawn from a generator derived from
            ``(seed, name)`` (see `gnnprivacy.datasets.splits`).
        train_frac: random / inductive split: the training fraction in [0, 1] (the three
            fractions sum to <= 1; defaults 0.5 / 0.25 / 0.25, missing ones filled as in
            `resolve_fractions`).
        val_frac: the validation fraction.
        test_frac: the test fraction.
        cache_dir: where PyG may write; else ``$GNNPRIVACY_CACHE``, else
            ``~/.cache/gnnprivacy/pyg``.
        download: let PyG try to download raw files absent from the root (into the cache).
        **dataset_kwargs: dataset-specific options (e.g. csbm's ``num_nodes``, german's
            ``features``); see ``dataset_info(name).notes``.

    Returns:
        ``Data`` with ``x`` float32, ``y`` int64, ``edge_index`` (both directions,
        coalesced), boolean ``train_mask`` / ``val_mask`` / ``test_mask``, ``name``,
        ``num_classes`` (int) and ``split`` (a `Split`).

    Raises:
        UnknownNameError: unknown dataset, split kind or dataset keyword argument.
        InvalidParameterError: bad fractions, seed, or a root that is not a directory.
        DatasetNotFoundError: raw files missing (the message names them and the root).
        CorruptDatasetError: raw files present but unparsable (the message names the file).
        ModuleNotFoundError: an optional dependency (``ogb``) is missing.
    """
    spec = get_spec(name)
    info = spec.info
    seed = check_int("seed", seed, low=0)
    fractions = (train_frac, val_frac, test_frac)
    kind = _split_kind(info, split, fractions)
    if kind != "public":  # validate fractions before any (slow) loading
        random_split(0, seed=seed, train_frac=train_frac, val_frac=val_frac, test_frac=test_frac)
    _check_kwargs(spec, dataset_kwargs)
    data_root = None if info.generated else resolve_root(root)
    ctx = LoadContext(name=info.name, root=data_root, cache=resolve_cache(cache_dir),
                      download=bool(download))
    data = _standardize(spec.fn(ctx, **dataset_kwargs), info.name)
    if not dataset_kwargs:  # options (german's features ...) may change the sizes
        _check_catalogue_sizes(data, info, getattr(data_root, "path", data_root))
    split_obj = _make_split(data, info, kind, seed, fractions)
    if kind == "public" and info.public_sizes is not None:
        counts = tuple(int(m.sum()) for m in split_obj.masks())
        if counts != tuple(info.public_sizes):
            raise CorruptDatasetError(
                f"{info.name}: the raw files in {getattr(data_root, 'path', data_root)} give a public split of {counts[0]} / {counts[1]} "
                f"/ {counts[2]} train / val / test nodes; the catalogue says {info.public_sizes[0]} / "
                f"{info.public_sizes[1]} / {info.public_sizes[2]} (a replaced or damaged raw file? "
                f"compare them with the originals: {', '.join(info.raw_files)})")
    for key, mask in zip(_MASKS, split_obj.masks()):
        data[key] = torch.from_numpy(np.ascontiguousarray(mask))
    data.split = split_obj
    return data
