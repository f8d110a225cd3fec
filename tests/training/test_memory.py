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
    control_applied, untuned = faults(False)
    assert applied == "True" and control_applied == "False"
    assert untuned > 5 * 10_000  # control: glibc trims the freed heap, every round faults again
    assert tuned < untuned / 20
