"""benchmarks/bench_step_by_hand.py: its hand-written DP step computes what a DP step must (the
clipped sum of the naive loop, one backward per subgraph, in both of its forms), one without
the pairs' cross terms does not (the control), and the script writes one cell per model with
the three step times."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_step_by_hand as by_hand  # noqa: E402
from bench_step_matrix import MODULES, node_graph  # noqa: E402

import gnnprivacy as gp  # noqa: E402


def _batch_and_model(key: str):
    data = node_graph(16, 40)
    torch.manual_seed(0)
    make = MODULES[key][1]
    model, shadow = make(16, 8, int(data.y.max()) + 1), make(16, 8, int(data.y.max()) + 1)
    pt = gp.make_private(shadow, torch.optim.SGD(shadow.parameters(), lr=0.0), data,
                         sampler="heterpoisson", noise_multiplier=1.0, steps=1, seed=3,
                         batch_size=40)
    return model, pt.sampler.sample(torch.Generator().manual_seed(3))   # no step pending


def _naive(model, batch, clip: float, every_row: bool = False) -> torch.Tensor:
    """One backward per subgraph: its loss (its centre's, or the sum over its rows), its
    gradient clipped, summed."""
    params = list(model.parameters())
    out = model(batch)
    total = torch.zeros(sum(p.numel() for p in params))
    for i, c in enumerate(batch.center.tolist()):
        assert int(batch.batch[c]) == i                # centre i is a row of subgraph i
        rows = (batch.batch == i).nonzero().flatten() if every_row else torch.tensor([c])
        loss = F.cross_entropy(out[rows], batch.y[rows], reduction="sum")
        g = torch.cat([t.reshape(-1) for t in torch.autograd.grad(loss, params,
                                                                  retain_graph=True)])
        total += g * min(1.0, clip / max(float(g.norm()), 1e-30))
    return total


@pytest.mark.parametrize("key", by_hand.HAND_MODELS)
def test_the_hand_written_step_is_the_naive_loops_clipped_sum_and_a_broken_one_is_not(key):
    model, batch = _batch_and_model(key)
    assert int(batch.num_subgraphs) >= 20
    counts = torch.bincount(batch.batch, minlength=int(batch.num_subgraphs))
    assert int(counts.max()) >= 2                      # subgraphs of several rows: pairs
    clip = 0.05                                        # binds for every subgraph
    expected = {every_row: _naive(model, batch, clip, every_row) for every_row in (False, True)}
    for form in ("wide", "narrow"):
        for every_row, naive in expected.items():
            got = by_hand.hand_clipped_sum(model, batch, clip, form=form, every_row=every_row)
            torch.testing.assert_close(got, naive, rtol=1e-4, atol=1e-6)
        # control: without the pairs' cross terms the norms are wrong where several rows of
        # a subgraph have gradients
        broken = by_hand.hand_clipped_sum(model, batch, clip, form=form, every_row=True,
                                         cross=False)
        assert not torch.allclose(broken, expected[True], rtol=1e-3, atol=1e-5)


def test_one_cell_per_model_writes_the_three_step_times(tmp_path, capsys):
    out = tmp_path / "by_hand.json"
    by_hand.main(["--features", "16", "--subgraphs", "100", "--steps", "3", "--warmup", "1",
                  "--out", str(out)])
    cells = json.loads(out.read_text())["cells"]
    assert [c["module"] for c in cells] == [MODULES[k][0] for k in by_hand.HAND_MODELS]
    c = cells[0]
    for key in ("plain_ms", "hand_ms", "ours_ms", "hand_wide_ms", "hand_narrow_ms"):
        assert c[key] > 0
    assert c["hand_ms"] == min(c["hand_wide_ms"], c["hand_narrow_ms"])
    assert c["ours_over_hand"] == pytest.approx(c["ours_ms"] / c["hand_ms"])
    assert "hand/plain" in capsys.readouterr().out


def test_an_unknown_model_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        by_hand.main(["--models", "gcn,gat"])
    assert exit_.value.code == 2 and "gat" in capsys.readouterr().err
