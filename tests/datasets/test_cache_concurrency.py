"""Two processes building the same PyG cache entry at once both succeed (issue 10, item 4).

Before the build lock, a worker could see the other's temporary folder vanish while listing the
cache and report a false "cache_dir ... must be a writable directory".
"""

import os
import subprocess
import sys

import pytest

LOAD = ("import sys; from gnnprivacy.datasets import load_dataset; "
        "d = load_dataset('cora', root=sys.argv[1], cache_dir=sys.argv[2]); print('ok', d.num_nodes)")


@pytest.mark.dataset
@pytest.mark.slow  # two processes importing torch and processing Cora: ~45 s on 2 cores
def test_concurrent_first_builds_share_one_cache(shared_root, tmp_path, no_data_env):
    cache = tmp_path / "cache"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", LOAD, str(shared_root), str(cache)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert all("ok 2708" in o for o in outs), outs
    leftovers = [p for p in cache.rglob(".tmp-*")]
    assert leftovers == []


def test_listing_survives_folders_vanishing(tmp_path, monkeypatch):
    """The leftover sweep must not fail when another process deletes a folder mid-listing."""
    from pathlib import Path

    from gnnprivacy.datasets import pyg_cache

    def vanishing_glob(self, pattern):
        raise FileNotFoundError(2, "No such file or directory", str(self / "gone"))

    monkeypatch.setattr(Path, "glob", vanishing_glob)
    pyg_cache._sweep_leftovers(tmp_path)  # no exception
