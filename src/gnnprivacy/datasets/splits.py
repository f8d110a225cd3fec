"""Node splits (train / validation / test) saved with the seed that made them.

Kinds:

* ``"random"``: transductive; a uniformly random partition with the given fractions;
* ``"inductive"``: the same partition as ``"random"`` for the same seed, flagged so that
  training uses only the graph induced by train + validation nodes
  (`gnnprivacy.datasets.inductive_train_graph`);
* ``"public"``: the dataset's official split (Planetoid's 20-per-class split for
  Cora / CiteSeer / PubMed, OGB's time split for ogbn-arxiv); ``seed`` is ``None``.

Seeding: the permutation comes from ``numpy.random.default_rng(SeedSequence(entropy))`` with
``entropy = [seed, w0, w1, w2, w3]``, where ``w0..w3`` are the first 16 bytes of
``sha256(dataset name)`` read as four little-endian uint32. So a split is reproducible
from ``(seed, dataset name)``, and the same seed gives unrelated splits on different datasets.

Sizes (Python's ``round``, half to even): ``n_train = round(train_frac * n)``,
``n_val = min(round(val_frac * n), n - n_train)``,
``n_test = min(round(test_frac * n), n - n_train - n_val)``; nodes left over (fractions
summing to < 1) belong to no set. Splits are not stratified by class.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gnnprivacy._validation import check_choice, check_int
from gnnprivacy.errors import CorruptDatasetError, InvalidParameterError

DEFAULT_FRACTIONS = (0.5, 0.25, 0.25)
#: a split with fewer training nodes gets a warning in the output and the record (issue 25)
SMALL_TRAIN_SET = 500
KINDS = ("random", "public", "inductive")
_FRACTION_NAMES = "train_frac, val_frac, test_frac"


def _frozen_index(values) -> np.ndarray:
    arr = np.array(values, dtype=np.int64).reshape(-1)
    arr.sort()
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class Split:
    """A node split: sorted, disjoint int64 index arrays and how they were made.

    Attributes:
        kind: ``"random"``, ``"inductive"`` or ``"public"``.
        seed: the split seed (``None`` for ``"public"``).
        train_idx, val_idx, test_idx: sorted int64 node indices (read-only arrays).
        train_frac, val_frac, test_frac: the requested fractions (for ``"public"``: the
            realised ones).
        num_nodes: number of nodes of the graph.
        dataset: registry name of the dataset (part of the seed derivation).
    """

    kind: str
    seed: int | None
    train_idx: np.ndarray = field(repr=False)
    val_idx: np.ndarray = field(repr=False)
    test_idx: np.ndarray = field(repr=False)
    train_frac: float = 0.0
    val_frac: float = 0.0
    test_frac: float = 0.0
    num_nodes: int = 0
    dataset: str = ""

    def __post_init__(self):
        check_choice("kind", self.kind, KINDS)
        for name in ("train_idx", "val_idx", "test_idx"):
            object.__setattr__(self, name, _frozen_index(getattr(self, name)))
        allidx = np.concatenate([self.train_idx, self.val_idx, self.test_idx])
        if allidx.size and (allidx.min() < 0 or allidx.max() >= self.num_nodes):
            raise InvalidParameterError("split indices", f"node ids in [0, {self.num_nodes})",
                                        (int(allidx.min()), int(allidx.max())))
        if np.unique(allidx).size != allidx.size:
            raise InvalidParameterError("split indices", "disjoint train/val/test sets",
                                        "overlapping index sets")

    @property
    def inductive(self) -> bool:
        """True when training must not see test nodes (kind ``"inductive"``)."""
        return self.kind == "inductive"

    @property
    def fractions(self) -> tuple[float, float, float]:
        """``(train_frac, val_frac, test_frac)``."""
        return (self.train_frac, self.val_frac, self.test_frac)

    @property
    def sizes(self) -> dict[str, int]:
        """Number of train, validation and test nodes."""
        return {"train": int(self.train_idx.size), "val": int(self.val_idx.size),
                "test": int(self.test_idx.size)}

    @property
    def digest(self) -> str:
        """sha256 (hex) of the three index arrays (int64 little-endian, with their sizes)."""
        h = hashlib.sha256()
        for arr in (self.train_idx, self.val_idx, self.test_idx):
            h.update(np.int64(arr.size).astype("<i8").tobytes())
            h.update(arr.astype("<i8").tobytes())
        return h.hexdigest()

    def masks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Boolean train / val / test masks of length ``num_nodes``."""
        out = []
        for idx in (self.train_idx, self.val_idx, self.test_idx):
            mask = np.zeros(self.num_nodes, dtype=bool)
            mask[idx] = True
            out.append(mask)
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary: kind, seed, dataset, fractions, sizes, num_nodes and digest."""
        return {"kind": self.kind, "seed": self.seed, "dataset": self.dataset,
                "num_nodes": self.num_nodes,
                "fractions": {"train": self.train_frac, "val": self.val_frac, "test": self.test_frac},
                "sizes": self.sizes, "digest": self.digest}

    def save(self, path: str | os.PathLike) -> None:
        """Write the split to ``path`` atomically (a ``.npz`` holding the indices and the metadata)."""
        import io

        from gnnprivacy._files import atomic_write

        meta = {k: v for k, v in self.to_dict().items() if k != "sizes"}
        buffer = io.BytesIO()
        np.savez(buffer, train_idx=self.train_idx, val_idx=self.val_idx, test_idx=self.test_idx,
                 meta=np.array(json.dumps(meta)))
        atomic_write(path, buffer.getvalue(), what="split")

    @classmethod
    def load(cls, path: str | os.PathLike) -> Split:
        """Read a split written by `save`; the stored digest is verified.

        Raises:
            CorruptDatasetError: unreadable file or digest mismatch.
        """
        try:
            with np.load(path, allow_pickle=False) as f:
                meta = json.loads(str(f["meta"]))
                fr = meta["fractions"]
                split = cls(kind=meta["kind"], seed=meta["seed"], train_idx=f["train_idx"],
                            val_idx=f["val_idx"], test_idx=f["test_idx"], train_frac=fr["train"],
                            val_frac=fr["val"], test_frac=fr["test"], num_nodes=meta["num_nodes"],
                            dataset=meta["dataset"])
        except (OSError, KeyError, ValueError) as exc:
            raise CorruptDatasetError(f"split file {path} cannot be read: {exc}") from exc
        if split.digest != meta["digest"]:
            raise CorruptDatasetError(f"split file {path}: indices do not match the stored digest")
        return split

    def _key(self):
        return (self.kind, self.seed, self.num_nodes, self.dataset, self.digest,
                self.train_frac, self.val_frac, self.test_frac)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Split) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        s = self.sizes
        return (f"Split(kind={self.kind!r}, seed={self.seed}, dataset={self.dataset!r}, "
                f"train={s['train']}, val={s['val']}, test={s['test']}, num_nodes={self.num_nodes})")


def resolve_fractions(train_frac: float | None = None, val_frac: float | None = None,
                      test_frac: float | None = None, *,
                      default_train: float = DEFAULT_FRACTIONS[0]) -> tuple[float, float, float]:
    """Fill in missing fractions and validate them.

    Rules: all ``None`` -> 0.5 / 0.25 / 0.25 (``default_train`` and half the rest each; the
    graph task's split passes 0.8). ``train_frac`` ``None`` -> the remainder if
    both others are given, else ``default_train``. Then the missing ones among val/test share the
    remainder ``1 - given`` equally (so ``train_frac=0.8, test_frac=0.2`` gives val 0).

    Raises:
        InvalidParameterError: a fraction outside [0, 1] or a sum above 1 (the message
            names the three fractions, the expectation and the values received).
    """
    received = (train_frac, val_frac, test_frac)
    expected = "fractions each a real number in [0, 1] with a sum <= 1"
    for v in received:
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                              or not 0.0 <= float(v) <= 1.0):
            raise InvalidParameterError(_FRACTION_NAMES, expected, received)
    tr, va, te = (None if v is None else float(v) for v in received)
    if tr is None:
        tr = 1.0 - va - te if va is not None and te is not None else default_train
    missing = [i for i, v in enumerate((va, te)) if v is None]
    given = tr + sum(v for v in (va, te) if v is not None)
    fill = max(0.0, 1.0 - given) / len(missing) if missing else 0.0
    va = fill if va is None else va
    te = fill if te is None else te
    if min(tr, va, te) < 0.0 or tr + va + te > 1.0 + 1e-9:
        raise InvalidParameterError(_FRACTION_NAMES, expected, received)
    return tr, va, te


def split_rng(seed: int, dataset: str) -> np.random.Generator:
    """The generator of a split: ``default_rng(SeedSequence([seed, *sha256(dataset)[:16] as 4 uint32]))``."""
    words = np.frombuffer(hashlib.sha256(dataset.encode("utf-8")).digest()[:16], dtype="<u4")
    return np.random.default_rng(np.random.SeedSequence([seed, *map(int, words)]))


def random_split(num_nodes: int, *, seed: int = 0, dataset: str = "", kind: str = "random",
                 train_frac: float | None = None, val_frac: float | None = None,
                 test_frac: float | None = None) -> Split:
    """A uniformly random split of ``range(num_nodes)`` (kind ``"random"`` or ``"inductive"``).

    The partition depends only on ``(num_nodes, seed, dataset, fractions)``, not on ``kind``.
    """
    n = check_int("num_nodes", num_nodes, low=0)
    seed = check_int("seed", seed, low=0)
    if kind not in ("random", "inductive"):
        raise InvalidParameterError("kind", "'random' or 'inductive'", kind)
    tr, va, te = resolve_fractions(train_frac, val_frac, test_frac)
    n_tr = min(round(tr * n), n)
    n_va = min(round(va * n), n - n_tr)
    n_te = min(round(te * n), n - n_tr - n_va)
    perm = split_rng(seed, dataset).permutation(n)
    return Split(kind=kind, seed=seed, train_idx=perm[:n_tr], val_idx=perm[n_tr:n_tr + n_va],
                 test_idx=perm[n_tr + n_va:n_tr + n_va + n_te], train_frac=tr, val_frac=va,
                 test_frac=te, num_nodes=n, dataset=dataset)


def split_from_masks(train_mask, val_mask, test_mask, *, dataset: str = "", kind: str = "public") -> Split:
    """A `Split` from boolean masks (e.g. Planetoid's public split); ``seed`` is ``None``."""
    masks = [np.asarray(m, dtype=bool) for m in (train_mask, val_mask, test_mask)]
    n = int(masks[0].size)
    idx = [np.flatnonzero(m) for m in masks]
    fr = [i.size / n if n else 0.0 for i in idx]
    return Split(kind=kind, seed=None, train_idx=idx[0], val_idx=idx[1], test_idx=idx[2],
                 train_frac=fr[0], val_frac=fr[1], test_frac=fr[2], num_nodes=n, dataset=dataset)


def split_warnings(split: Split) -> list[str]:
    """Warnings about a split, for the run's output and record.

    One today: fewer than ``SMALL_TRAIN_SET`` (500) training nodes. DP-SGD's noise is
    averaged over the nodes of a step, so node-level DP methods lose much more accuracy on
    such splits than non-private ones (Cora's public split has 140 training nodes).

    Args:
        split: the run's split.

    Returns:
        The warning messages (empty when there is nothing to say).
    """
    made = ("the dataset's public split" if split.kind == "public"
            else f"train_frac={split.train_frac:g} of {split.num_nodes} nodes")
    return small_train_set_warnings(
        split.sizes["train"], holder="the split leaves", made=made,
        advice="compare methods on one split, e.g. --split random --train-frac 0.8 "
               "--test-frac 0.2")


def small_train_set_warnings(num_train: int, *, holder: str, made: str,
                             advice: str | None = None) -> list[str]:
    """The small-training-set warning (`split_warnings`; a sharded run's too) when
    ``num_train`` is under ``SMALL_TRAIN_SET``: ``"<holder> <n> training nodes (fewer than
    500; <made>): ..."``, then ``advice`` if given. Empty otherwise."""
    if num_train >= SMALL_TRAIN_SET:
        return []
    text = (f"{holder} {num_train} training nodes (fewer than {SMALL_TRAIN_SET}; {made}): "
            "private methods average their noise over few nodes and lose much accuracy here")
    return [text if advice is None else f"{text}; {advice}"]
