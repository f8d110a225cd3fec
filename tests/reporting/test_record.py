import json
import math

import pytest

from gnnprivacy.reporting.record import RunRecord, dumps, read_record, write_json_atomic


def _record(**kw):
    base = dict(run_id="r1", method="gcn", dataset="csbm", config={"method": "gcn"}, seeds={"run": 0},
                epsilon=math.inf, delta=None, privacy={"private": False}, metrics={"test_accuracy": 0.5},
                timings={"total_seconds": 1.0})
    base.update(kw)
    return RunRecord(**base)


def test_non_private_record_is_strict_json_with_infinite_epsilon(tmp_path):
    path = _record().save(tmp_path)
    text = path.read_text()
    assert "Infinity" not in text
    raw = json.loads(text)
    assert raw["epsilon"] == "inf"
    back = read_record(path)
    assert back.epsilon == math.inf and back.metrics == {"test_accuracy": 0.5}
    for key in ("versions", "git_commit", "created", "config", "seeds", "timings"):
        assert key in raw
    assert raw["versions"]["torch"].startswith("2.13")


def test_summary_has_the_cli_json_keys():
    summary = json.loads(dumps(_record(epsilon=3.0, delta=1e-5).summary()))
    for key in ("method", "dataset", "epsilon", "delta", "test_accuracy", "seconds"):
        assert key in summary
    assert summary["epsilon"] == 3.0


def test_atomic_write_leaves_no_partial_file_on_failure(tmp_path):
    class Boom:
        pass

    with pytest.raises(TypeError):
        write_json_atomic(tmp_path / "x.json", {"a": Boom()})
    assert list(tmp_path.iterdir()) == []
