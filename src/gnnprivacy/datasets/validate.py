"""Pinpoint which raw file is corrupt after a loader failed to parse a dataset.

Used only on the failure path, so a successful load pays nothing. Each check reads a file
the way its format requires (zip CRCs for ``.npz``, gzip stream for ``.gz``, latin-1
pickles for Planetoid's ``ind.*`` files, numeric text for ``.txt``/``test.index``, a
rectangular table for ``.csv``) and raises on the first problem.
"""

from __future__ import annotations

import csv
import gzip
import pickle
import zipfile
from pathlib import Path

import numpy as np


def check_raw_file(path: Path) -> None:
    """Raise an exception if ``path`` is not a readable, well-formed file of its format."""
    if path.stat().st_size == 0:
        raise ValueError("empty file")
    name = path.name
    if name.endswith(".npz"):
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
            if bad is not None:
                raise ValueError(f"bad CRC in member {bad}")
    elif name.endswith(".gz"):
        with gzip.open(path, "rb") as stream:
            while stream.read(1 << 20):
                pass
    elif name.endswith(".test.index") or name.endswith(".txt"):
        np.loadtxt(path, ndmin=2)
    elif name.startswith("ind."):
        with open(path, "rb") as stream:
            pickle.load(stream, encoding="latin1")  # Planetoid's own format, as PyG reads it
    elif name.endswith(".csv"):
        _check_csv(path)


def _check_csv(path: Path) -> None:
    with open(path, newline="", encoding="utf-8") as stream:
        rows = csv.reader(stream)
        header = next(rows)
        for line, row in enumerate(rows, start=2):
            if len(row) != len(header):
                raise ValueError(f"line {line} has {len(row)} fields, header has {len(header)}")


def find_corrupt(folder: Path, relative_paths) -> tuple[str, str] | None:
    """The first of ``relative_paths`` (under ``folder``) failing :func:`check_raw_file`.

    Returns:
        ``(relative path, reason)`` or ``None`` when every file passes.
    """
    for rel in relative_paths:
        try:
            check_raw_file(folder / rel)
        except Exception as exc:  # noqa: BLE001 - any failure means "this file is bad"
            return rel, f"{type(exc).__name__}: {exc}"
    return None
