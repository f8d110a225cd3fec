"""Issue 43 item 2: nothing private leaves unnoised. The code audit's publication check
(`gnnprivacy.auditing.publication`) reruns a path on a counterfactual copy of the data with
every noisy release replayed, and fails on any published value that changed and is not named
in ``privacy["unaccounted"]``. The honest paths pass it (test_every_path_audited.py); each
plant below publishes an unnoised statistic through another channel (a log record, printed
output, a progress line, a warning, a record field, ``pt.privacy``, a checkpoint), or makes
the number of releases depend on the data, and must fail it."""

from __future__ import annotations

import logging
import warnings

import pytest
import torch

from audit_paths import audit, failed
from gnnprivacy.auditing.publication import _masked, counterfactual, covered
from gnnprivacy.training.dp import engine as engine_module
from gnnprivacy.training.dp.noise import flatten
from gnnprivacy.training.private.make_private import PrivateTraining


def _norm(sums) -> float:
    return float(flatten({k: v.double() for k, v in sums.items()}).norm())


def _leak_from_engine(monkeypatch, publish):
    """Every engine release also hands its clipped sum's norm to ``publish(engine, norm)``."""
    noised = engine_module.DPEngine._noised

    def leaky_noised(self, sums, num):
        publish(self, _norm(sums))
        return noised(self, sums, num)

    monkeypatch.setattr(engine_module.DPEngine, "_noised", leaky_noised)


CHANNELS = {
    "logging": lambda engine, n: logging.getLogger("gnnprivacy").info("clipped norm %.6f", n),
    "stdout": lambda engine, n: print(f"clipped norm {n:.6f}"),
    "warnings": lambda engine, n: warnings.warn(f"clipped norm {n:.6f}", stacklevel=2),
}


@pytest.mark.parametrize("channel", sorted(CHANNELS))
@pytest.mark.parametrize("path", ["method:heterpoisson", "make_private:nodes"])
def test_a_norm_published_through_a_channel_fails_the_check(path, channel, monkeypatch):
    _leak_from_engine(monkeypatch, CHANNELS[channel])
    result = audit(path)
    publication = result.details["publication"]
    assert result.violation and "publication" in failed(result), publication
    assert publication["differences"][0]["path"].startswith(channel), publication


def _remember_norm(monkeypatch):
    """Every engine keeps its last clipped sum's norm in ``last_norm`` (what the plants
    below publish)."""
    noised = engine_module.DPEngine._noised

    def remembered(self, sums, num):
        self.last_norm = _norm(sums)
        return noised(self, sums, num)

    monkeypatch.setattr(engine_module.DPEngine, "_noised", remembered)


def test_a_norm_in_a_progress_line_fails_the_check(monkeypatch):
    """The trainer advances its progress bar by an amount read from the clipped sum."""
    from test_mutants import Mutant, applied

    _remember_norm(monkeypatch)
    with applied(Mutant("publish-progress", "publication",
                        "gnnprivacy.training.node_dp.base:NodeDPTrainer._run",
                        "bar.update(1)", "bar.update(1 + int(1e4 * engine.last_norm) % 3)",
                        "")):
        result = audit("method:heterpoisson")
    publication = result.details["publication"]
    assert "publication" in failed(result), publication
    assert publication["differences"][0]["path"].startswith("progress"), publication


def test_a_norm_in_a_record_field_fails_the_check(monkeypatch):
    """The record's ``info`` carries the last clipped norm."""
    from gnnprivacy.method import runner

    _remember_norm(monkeypatch)
    engines = []
    init = engine_module.DPEngine.__init__

    def kept(self, *args, **kw):
        init(self, *args, **kw)
        engines.append(self)

    monkeypatch.setattr(engine_module.DPEngine, "__init__", kept)
    class WithNorm(runner.RunRecord):
        def __init__(self, *args, **kw):
            kw["info"] = {**kw.get("info", {}), "last_clipped_norm": engines[-1].last_norm}
            super().__init__(*args, **kw)

    monkeypatch.setattr(runner, "RunRecord", WithNorm)
    result = audit("method:dpmlp")
    publication = result.details["publication"]
    assert "publication" in failed(result), publication
    assert any("last_clipped_norm" in d["path"] for d in publication["differences"])


@pytest.mark.parametrize("where", ["privacy", "checkpoint"])
def test_a_norm_in_what_make_private_returns_fails_the_check(where, monkeypatch):
    _remember_norm(monkeypatch)
    if where == "privacy":
        privacy = PrivateTraining.privacy.fget
        monkeypatch.setattr(PrivateTraining, "privacy", property(
            lambda self: {**privacy(self), "clipped_norm": self.engine.last_norm}))
    else:
        state_dict = PrivateTraining.state_dict
        monkeypatch.setattr(PrivateTraining, "state_dict", lambda self: {
            **state_dict(self), "clipped_norm": self.engine.last_norm})
    result = audit("make_private:graphs")
    publication = result.details["publication"]
    assert "publication" in failed(result), publication
    assert publication["differences"][0]["path"] == f"{where}.clipped_norm"


def test_releases_whose_number_depends_on_the_data_fail_the_check(monkeypatch):
    """A step skipped when the batch's labels sum to an even number: the number of noisy
    releases (and the ledger) depends on the private labels."""
    step = PrivateTraining.step

    def skipping(self):
        layout = self._pending
        self.guard.stop()               # the plant's own arithmetic is not the user's loop
        if layout is not None and int(layout.data.y.sum()) % 2 == 0 and self.steps > 3:
            self._pending = None
            self.guard.stop()
            self.capture.reset()
            return None
        return step(self)

    monkeypatch.setattr(PrivateTraining, "step", skipping)
    result = audit("make_private:nodes")
    publication = result.details["publication"]
    assert "publication" in failed(result), publication


# ---------------------------------------------------------------------- the pieces
def test_the_counterfactual_changes_only_the_private_units():
    from audit_paths import graph_list, node_data

    data = node_data()
    other = counterfactual(data)
    train = data.train_mask
    assert not torch.equal(other.x[train], data.x[train])
    assert torch.equal(other.x[~train], data.x[~train])
    assert torch.equal(other.y[~train], data.y[~train])
    assert bool((other.y[train] != data.y[train]).all())
    assert int(other.y.max()) == int(data.y.max())
    assert torch.equal(other.edge_index, data.edge_index)
    graphs = graph_list(n=6)
    flipped = counterfactual(graphs)
    assert all(not torch.equal(a.x, b.x) and not torch.equal(a.y, b.y)
               and torch.equal(a.edge_index, b.edge_index) for a, b in zip(graphs, flipped))


def test_coverage_is_by_name_and_a_line_may_differ_in_covered_values_only():
    notes = ["inference on the full graph: the `metrics` are not covered"]
    assert covered("record.metrics.test_accuracy", notes)
    assert covered("files.audit.model.pt.record.metrics.val_accuracy", notes)
    assert not covered("record.info.steps", notes)
    assert not covered("log[1]", notes)
    line = "dpgnn: 20 noisy steps, epsilon=3.997, test accuracy {:.4f}"
    assert _masked(line.format(0.3), [0.3]) == _masked(line.format(0.23), [0.23])
    assert _masked("clipped norm 5.2172", [0.3]) != _masked("clipped norm 4.2202", [0.23])
