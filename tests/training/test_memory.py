"""Malloc tuning (issue 15 item 3): freed step temporaries are reused, not faulted in again."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CHILD = r"""
import resource, torch
from gnnprivacy.training.memory import tune_malloc
applied = tune_malloc()
def churn():  # a step: ten 24 MB temporaries live together, then all freed
    for _ in range(5):
        live = [torch.empty(6_000_000).fill_(1.0) for _ in range(10)]
        del live
churn()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
churn()
print(applied, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
def test_tuned_malloc_stops_page_fault_churn():
    def faults(tune: bool) -> tuple[str, int]:
        env = {**os.environ, "GNNPRIVACY_MALLOC_TUNE": "1" if tune else "0",
               "OMP_NUM_THREADS": "1"}
        out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                             text=True, check=True).stdout.split()
        return out[0], int(out[1])

    applied, tuned = faults(True)
    assert applied == "True"
    assert tuned < 1000  # the freed temporaries are reused: (almost) no page is faulted in
    # Positive control: with glibc's defaults the freed heap top is trimmed and every round
    # faults ~60,000 pages in again. Whether glibc trims here depends on the heap layout of
    # the run, so the control gets three tries and is skipped (never passed) without churn.
    for _ in range(3):
        control_applied, untuned = faults(False)
        assert control_applied == "False"
        if untuned > 5 * 10_000:
            assert tuned < untuned / 20
            return
    pytest.skip("glibc did not trim the heap in the control runs: churn not reproducible")
