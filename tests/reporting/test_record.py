import json
import math

import pytest

from gnnprivacy.records.record import RunRecord, dumps, read_record, write_json_atomic


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


def test_old_records_with_sigma_read_as_noise_std(tmp_path):
    # issue 25: the absolute noise std is `noise_std` (Opacus's noise_multiplier is the ratio);
    # records written before the rename keep working
    path = _record(privacy={"noise_multiplier": 4.44, "sigma": 2.22}).save(tmp_path)
    raw = json.loads(path.read_text())
    assert raw["privacy"] == {"noise_multiplier": 4.44, "noise_std": 2.22}
    old = {**raw, "privacy": {"noise_multiplier": 4.44, "sigma": 2.22}}
    (tmp_path / "old.json").write_text(json.dumps(old))
    back = read_record(tmp_path / "old.json")
    assert back.privacy == {"noise_multiplier": 4.44, "noise_std": 2.22}


def _git(cwd, *args):
    import subprocess

    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": __import__("os").environ["PATH"]})


def test_git_commit_is_the_package_tree_not_the_surrounding_repo(tmp_path):
    # a user's repository with gnnprivacy installed in an untracked venv inside it
    from gnnprivacy.records.record import git_commit

    _git(tmp_path, "init", "-q")
    (tmp_path / "README").write_text("user project\n")
    _git(tmp_path, "add", "README")
    _git(tmp_path, "commit", "-qm", "user")
    installed = tmp_path / ".venv" / "site-packages" / "gnnprivacy" / "record.py"
    installed.parent.mkdir(parents=True)
    installed.write_text("# installed copy\n")
    assert git_commit(installed) is None
    # control: the same file tracked by the repository is its source tree
    _git(tmp_path, "add", "-f", str(installed))
    _git(tmp_path, "commit", "-qm", "pkg")
    sha = git_commit(installed)
    assert sha is not None and len(sha) == 40
