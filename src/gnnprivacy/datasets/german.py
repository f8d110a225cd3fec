"""German Credit graph (NIFTY, Agarwal, Lakkaraju & Zitnik, UAI 2021) as a PyG dataset.

Raw files (PyG layout): ``German/raw/german.csv`` (1,000 clients, 30 columns) and
``German/raw/german_edges.txt`` (24,970 whitespace-separated float pairs of node ids).

Preprocessing (documented choice, see ``dataset_info("german").notes``):

* label ``y``: ``GoodCustomer`` 1 -> 1, -1 -> 0;
* dropped from the features: the label and ``OtherLoansAtStore`` (constant 0; NIFTY and
  the RGNN spec 004 both drop it);
* ``Gender`` (the sensitive attribute) is kept as a 0/1 feature, Female = 1 as in NIFTY,
  and also stored as ``data.sens``;
* ``PurposeOfLoan`` (10 categories): ``features="rgnn"`` (default) one-hot encodes it in
  sorted category order, giving the 37 attributes that spec 004 (§10.1) starts from before
  its binarisation to 46; ``features="nifty"`` drops it like NIFTY's loader (27 features);
* numeric columns (Age, LoanDuration, LoanAmount, ...) are raw values, not normalised;
* edges: made undirected and coalesced; no self-loops are added (NIFTY adds I later).
  21,742 undirected edges = 43,484 ``edge_index`` columns.

``data.feature_names`` lists the feature columns in order.
"""

from __future__ import annotations

import csv
import os.path as osp
from collections.abc import Callable

import numpy as np
import torch
from torch_geometric.data import Data, InMemoryDataset, download_url
from torch_geometric.utils import coalesce, remove_self_loops, to_undirected

from gnnprivacy._validation import check_choice
from gnnprivacy.errors import CorruptDatasetError

LABEL = "GoodCustomer"
SENSITIVE = "Gender"
PURPOSE = "PurposeOfLoan"
CONSTANT = "OtherLoansAtStore"
FEATURE_SETS = ("rgnn", "nifty")
_URL = ("https://raw.githubusercontent.com/chirag126/nifty/"
        "6c270c5ec736c5138d455609112cf6dfcc63dcca/dataset/german")


def read_german_table(path: str, features: str = "rgnn") -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Parse ``german.csv`` into ``(x float32, y int64, sens int64, feature_names)``.

    Raises:
        CorruptDatasetError: missing columns, ragged rows or unparsable values.
    """
    check_choice("features", features, FEATURE_SETS)
    try:
        with open(path, newline="", encoding="utf-8") as stream:
            rows = list(csv.reader(stream))
        header, body = rows[0], np.array(rows[1:], dtype=str)
        if body.ndim != 2 or body.shape[1] != len(header):
            raise ValueError("rows do not all have as many fields as the header")
        col = {name: body[:, header.index(name)] for name in header}
        for name in (LABEL, SENSITIVE, PURPOSE, CONSTANT):
            if name not in col:
                raise ValueError(f"column {name!r} is missing")
        if not np.isin(col[LABEL], ["1", "-1"]).all() or not np.isin(col[SENSITIVE], ["Male", "Female"]).all():
            raise ValueError(f"{LABEL} must be 1/-1 and {SENSITIVE} Male/Female")
        y = (col[LABEL] == "1").astype(np.int64)
        sens = (col[SENSITIVE] == "Female").astype(np.int64)
        names, columns = [], []
        for name in header:
            if name in (LABEL, CONSTANT, PURPOSE):
                continue
            names.append(name)
            columns.append(sens.astype(np.float32) if name == SENSITIVE else col[name].astype(np.float32))
        if features == "rgnn":
            for category in sorted(set(col[PURPOSE].tolist())):
                names.append(f"{PURPOSE}={category}")
                columns.append((col[PURPOSE] == category).astype(np.float32))
    except (OSError, IndexError, ValueError, csv.Error) as exc:
        raise CorruptDatasetError(f"German Credit table {path} cannot be parsed: {exc}") from exc
    return np.stack(columns, axis=1), y, sens, names


def read_german_edges(path: str, num_nodes: int) -> torch.Tensor:
    """Parse ``german_edges.txt`` into an undirected, coalesced ``edge_index`` without self-loops.

    Raises:
        CorruptDatasetError: unparsable file, wrong shape, or node ids out of range.
    """
    try:
        pairs = np.loadtxt(path, ndmin=2)
        if pairs.shape[1] != 2 or not np.all(pairs == np.round(pairs)):
            raise ValueError(f"expected integer pairs, got shape {pairs.shape}")
        pairs = pairs.astype(np.int64)
        if pairs.size and (pairs.min() < 0 or pairs.max() >= num_nodes):
            raise ValueError(f"node ids must lie in [0, {num_nodes})")
    except (OSError, ValueError) as exc:
        raise CorruptDatasetError(f"German Credit edge list {path} cannot be parsed: {exc}") from exc
    edge_index = torch.from_numpy(pairs.T.copy())
    edge_index, _ = remove_self_loops(edge_index)
    return coalesce(to_undirected(edge_index, num_nodes=num_nodes), num_nodes=num_nodes)


class GermanCredit(InMemoryDataset):
    """NIFTY's German Credit graph as a cached `InMemoryDataset`.

    Args:
        root: folder holding ``raw/german.csv`` and ``raw/german_edges.txt``; ``processed/``
            is written next to ``raw/``.
        features: ``"rgnn"`` (37 features, PurposeOfLoan one-hot) or ``"nifty"`` (27).
        transform: PyG transform applied on access.
        pre_transform: PyG transform applied before saving the processed file.
        force_reload: re-process even if processed files exist.
    """

    def __init__(self, root: str, features: str = "rgnn", transform: Callable | None = None,
                 pre_transform: Callable | None = None, force_reload: bool = False) -> None:
        self.features = check_choice("features", features, FEATURE_SETS)
        super().__init__(root, transform, pre_transform, force_reload=force_reload)
        self.load(self.processed_paths[0])

    @property
    def raw_file_names(self) -> list[str]:
        return ["german.csv", "german_edges.txt"]

    @property
    def processed_file_names(self) -> str:
        return f"data_{self.features}.pt"

    def download(self) -> None:
        for name in self.raw_file_names:
            download_url(f"{_URL}/{name}", self.raw_dir)

    def process(self) -> None:
        x, y, sens, names = read_german_table(osp.join(self.raw_dir, "german.csv"), self.features)
        edge_index = read_german_edges(osp.join(self.raw_dir, "german_edges.txt"), len(y))
        data = Data(x=torch.from_numpy(x), y=torch.from_numpy(y), edge_index=edge_index,
                    sens=torch.from_numpy(sens))
        data.feature_names = names
        if self.pre_transform is not None:
            data = self.pre_transform(data)
        self.save([data], self.processed_paths[0])

    def __repr__(self) -> str:
        return f"GermanCredit(features={self.features!r})"
