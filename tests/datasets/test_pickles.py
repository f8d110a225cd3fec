"""Planetoid pickles parsed, never unpickled (`gnnprivacy.datasets.pickles`)."""

from __future__ import annotations

import collections
import io
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from gnnprivacy.datasets.pickles import check_planetoid_pickle, pickle_globals, unsafe_globals

SHARED = Path(os.environ.get("GNNPRIVACY_SHARED_DATASETS",
                             Path(__file__).resolve().parents[3] / "shared" / "datasets"))


class Payload:
    def __reduce__(self):
        return (os.system, ("echo never",))


def names(blob: bytes) -> list[str]:
    return pickle_globals(io.BytesIO(blob))


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_a_payload_is_named_at_every_protocol(protocol):
    assert unsafe_globals(names(pickle.dumps([1, {"a": Payload()}], protocol=protocol))) \
        == [f"{os.system.__module__} system"]


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_planetoid_content_is_allowed(protocol):
    blob = pickle.dumps([np.zeros((2, 3), dtype=np.float32), sp.csr_matrix(np.eye(3)),
                         collections.defaultdict(list, {1: [2, 3]})], protocol=protocol)
    assert unsafe_globals(names(blob)) == []


def test_stack_tricks_do_not_hide_a_global():
    """STACK_GLOBAL takes the two strings really on the stack: pushing harmless names after
    the real ones and popping them (POP, POP_MARK), or memo games, does not fool the walk."""
    s = lambda t: b"\x8c" + bytes([len(t)]) + t.encode()  # noqa: E731 - SHORT_BINUNICODE
    popped = b"\x80\x04" + s("os") + s("system") + s("numpy") + s("dtype") + b"00" + b"\x93."
    marked = b"\x80\x04" + s("os") + s("system") + b"(" + s("numpy") + s("dtype") + b"1" + b"\x93."
    memo = b"\x80\x04" + s("os") + b"\x94" + s("system") + b"\x94" + s("numpy") + b"\x94" \
        + b"0" + b"h\x00h\x01\x93."
    for blob in (popped, marked, memo):
        assert names(blob) == ["os system"], blob
    built = b"\x80\x04" + s("o") + s("s") + b"\x85" + b"\x93."   # not a literal: unknown
    assert names(built) == ["? ?"]


def test_a_torn_pickle_is_refused(tmp_path):
    blob = pickle.dumps(np.zeros(300), protocol=2)
    path = tmp_path / "ind.cora.x"
    path.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(ValueError):
        check_planetoid_pickle(path)


def test_the_real_planetoid_files_pass():
    files = sorted(p for p in SHARED.glob("*/raw/ind.*") if not p.name.endswith(".index"))
    if not files:
        pytest.skip(f"no Planetoid files under {SHARED}")
    for path in files:
        check_planetoid_pickle(path)
