"""Property-based fuzz of the configuration loaders and of ``gp.train``'s ``Data`` validation
(issue 35): arbitrary YAML documents and arbitrary small graphs end in a result or one clear
error line, never a traceback, a hang past 60 s, or a write outside the runs directory.

Hypothesis draws (1) YAML documents (random text, random structures dumped as YAML, and
structures with anchors, aliases, merge keys and repeated keys in two spellings), read by the
loaders of ``train -c``, sweep files and tune files (60 per run of the suite); (2) train
configuration files run through ``gnnprivacy train`` on a tiny graph in a scratch folder,
after which nothing may exist outside its runs directory (8 per run); (3) small graphs with
random dtypes, shapes and values (NaN, inf, out-of-range ids, masks of every kind) given to
``gp.train`` (40 per run). Raise the counts with ``--hypothesis-seed`` / ``max_examples`` when
changing a loader or the validation.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

#: an error line longer than this is not "one clear line" (an alias bomb once made 580 MB)
MAX_MESSAGE = 2000
SLOW = 60.0
SMALL = "num_nodes=40,num_features=4,num_classes=2,avg_degree=3"

KEYS = ("method", "dataset", "dataset_args", "epsilon", "delta", "lr", "epochs", "hidden", "train_frac",
        "train-frac", "val_frac", "seed", "split", "runs_dir", "name", "base", "grid", "seeds", "trials",
        "compare", "score_noise", "imports", "steps", "num_clusters", "bogus", "<<")
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**9), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["1e-3", "no", "gcn", "dpmlp", "csbm", "../../x", "a=1,b=2", "", "0.5,num_classes=2"]),
    st.text(max_size=8))
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=6), st.integers(-3, 3))
documents = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                          st.dictionaries(keys, inner, max_size=5)),
                         max_leaves=20)
#: hand-written YAML features that a dumped structure never has
SNIPPETS = ("a: &a [x, x]\nb: [*a, *a]\n", "<<: {epochs: 2}\nlr: 0.1\n", "d: &d {lr: 1}\n<<: *d\n",
            "train-frac: 0.5\ntrain_frac: 0.3\n", "epsilon:\n", "? [1, 2]\n: 3\n", "x: !!python/object:os.system {}\n",
            "a: &a [*a]\n", "- &x [x, *x]\n", "1: 2\n", "on: 1\n", "lr: 1e-3\n", "%YAML 1.1\n---\na: 1\n",
            "base: {method: dpmlp, delta: 0.001}\ngrid: {lr: [0.1]}\nepsilon: 4\ndelta: 0.01\n")
texts = st.one_of(st.text(max_size=80), st.sampled_from(SNIPPETS),
                  st.tuples(st.sampled_from(SNIPPETS), st.sampled_from(SNIPPETS)).map("".join),
                  documents.map(lambda d: _dump(d)))


def _dump(doc) -> str:
    try:
        return yaml.safe_dump(doc, allow_unicode=True)
    except (yaml.YAMLError, ValueError):
        return ""


def _one_clear_line(exc: BaseException) -> None:
    """A user-input error: a ``ValueError`` (every error of gnnprivacy about input is one)
    whose message is a single bounded line."""
    from gnnprivacy.errors import GnnPrivacyError

    assert isinstance(exc, (ValueError, GnnPrivacyError)), repr(exc)
    text = str(exc)
    assert text and "\n" not in text and len(text) <= MAX_MESSAGE, text[:500]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=texts)
def test_arbitrary_yaml_documents_give_a_result_or_one_error_line(text):
    from gnnprivacy.experiments.sweep import load_sweep
    from gnnprivacy.experiments.tune import load_tune_spec
    from gnnprivacy.method.config import load_yaml_config, resolve_config

    folder = Path(tempfile.mkdtemp(prefix="fuzz-yaml-"))
    try:
        path = folder / "c.yaml"
        path.write_text(text, encoding="utf-8")
        for load in (lambda: resolve_config(load_yaml_config(path)), lambda: load_sweep(path).cells(),
                     lambda: load_tune_spec(path)):
            start = time.monotonic()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    load()
            except Exception as exc:  # noqa: BLE001 - the property is about what escapes
                _one_clear_line(exc)
            assert time.monotonic() - start < SLOW
        assert sorted(p.name for p in folder.iterdir()) == ["c.yaml"]  # loading writes nothing
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.filterwarnings("ignore::UserWarning")
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc=st.dictionaries(st.sampled_from(KEYS[:14]), scalars, max_size=4),
       method=st.sampled_from(["gcn", "mlp", "dpmlp"]))
def test_train_files_write_nothing_outside_the_runs_directory(doc, method):
    from click.testing import CliRunner

    from gnnprivacy.cli import main

    folder = Path(tempfile.mkdtemp(prefix="fuzz-write-"))
    cwd = os.getcwd()
    try:
        work = folder / "work"
        work.mkdir()
        (work / "c.yaml").write_text(_dump(doc) or "{}\n", encoding="utf-8")
        os.chdir(work)
        start = time.monotonic()
        out = CliRunner().invoke(main, ["train", "-c", "c.yaml", "--method", method, "--dataset", "csbm",
                                        "--dataset-args", SMALL, "--epochs", "1", "--runs-dir", "runs", "-q"])
        assert time.monotonic() - start < SLOW
        if out.exception is not None and not isinstance(out.exception, SystemExit):
            raise AssertionError(f"traceback: {out.exception!r}\n{out.output}")
        if out.exit_code != 0:
            assert [line for line in out.output.splitlines() if line.startswith("Error:")], out.output
        outside = [p for p in folder.rglob("*") if p.is_file() and p != work / "c.yaml"
                   and (work / "runs") not in p.parents]
        assert not outside, outside
    finally:
        os.chdir(cwd)
        shutil.rmtree(folder, ignore_errors=True)


def _tensor(draw, shape, kind):
    import torch

    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    if kind == "float":
        t = torch.randn(shape, generator=gen)
        for _ in range(draw(st.integers(0, 2))):
            if t.numel():
                t.view(-1)[draw(st.integers(0, t.numel() - 1))] = draw(st.sampled_from(
                    [float("nan"), float("inf"), -float("inf"), 1e30]))
        return t.to(draw(st.sampled_from([torch.float32, torch.float64, torch.float16])))
    if kind == "int":
        low, high = draw(st.sampled_from([(0, 3), (-2, 3), (0, 50)]))
        return torch.randint(low, high, shape, generator=gen).to(
            draw(st.sampled_from([torch.int64, torch.int32, torch.uint8])))
    return torch.rand(shape, generator=gen) < 0.5


@st.composite
def graphs(draw):
    from torch_geometric.data import Data

    n = draw(st.integers(0, 10))
    data = Data()
    x_shape = draw(st.sampled_from([(n, 3), (n,), (n, 0), (max(n - 1, 0), 3), (n, 3, 1)]))
    data.x = draw(st.sampled_from([None, "float", "float", "int"]))
    if data.x is not None:
        data.x = _tensor(draw, x_shape, data.x)
    y_kind = draw(st.sampled_from([None, "int", "int", "float", "bool"]))
    if y_kind is not None:
        data.y = _tensor(draw, draw(st.sampled_from([(n,), (n, 1), (max(n - 2, 0),)])), y_kind)
    e = draw(st.integers(0, 12))
    ei_shape = draw(st.sampled_from([(2, e), (2, e), (3, e), (e,)]))
    data.edge_index = _tensor(draw, ei_shape, draw(st.sampled_from(["int", "int", "float"])))
    if draw(st.booleans()) and data.edge_index.dim() == 2 and data.edge_index.shape[0] == 2:
        data.edge_index = data.edge_index.to("cpu").long() % max(n, 1)  # often a valid graph
    for mask in ("train_mask", "val_mask", "test_mask"):
        kind = draw(st.sampled_from([None, None, "bool", "int"]))
        if kind is not None:
            setattr(data, mask, _tensor(draw, draw(st.sampled_from([(n,), (max(n - 1, 0),)])), kind))
    if draw(st.booleans()):
        data.edge_weight = _tensor(draw, (e,), "float")
    return data


@pytest.mark.filterwarnings("ignore::UserWarning")
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=graphs(), method=st.sampled_from(["gcn", "mlp", "dpmlp", "heterpoisson"]))
def test_arbitrary_small_graphs_give_a_result_or_one_error_line(data, method):
    import gnnprivacy as gp

    folder = Path(tempfile.mkdtemp(prefix="fuzz-graph-"))
    try:
        start = time.monotonic()
        try:
            gp.train(data, method=method, epochs=1, runs_dir=str(folder / "runs"))
        except Exception as exc:  # noqa: BLE001 - the property is about what escapes
            _one_clear_line(exc)
        assert time.monotonic() - start < SLOW
        assert all(p == folder / "runs" for p in folder.iterdir())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
