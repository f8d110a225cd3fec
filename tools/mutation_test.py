"""Mutation testing of the privacy-critical code: every mutant of tests/auditing/test_mutants.py
(clip, noise, sampling rate, step count, ledger, occurrence bound) against its tests and
against the code audit (``--mode code`` on the honest paths of test_code_audit_boundary).

    python tools/mutation_test.py                 # the whole set, a markdown table
    python tools/mutation_test.py --only clip-groups-2C,ledger-skip-first
    python tools/mutation_test.py --json out.json

Each (mutant, killer) pair runs in its own process (``--apply ID -- PYTEST ARGS``): the
mutant is applied in memory, then pytest runs; a failing run kills the mutant. Exit status 1
when a mutant without a recorded reason (``note``) survives both killers; 2, before any run,
when a mutant's snippet no longer occurs in its target (a stale mutant would fail every run
and pass for killed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "auditing"))

import test_mutants  # noqa: E402  (the committed list lives in the test module)

PYTEST = ["-q", "-x", "-n", "0", "-p", "no:cacheprovider", "-o", "addopts="]


def _apply_and_test(mutant_id: str, args: list[str]) -> int:
    import pytest

    with test_mutants.applied(test_mutants.by_id(mutant_id)):
        return int(pytest.main(PYTEST + ["-m", "not slow and not repro"] + args))


def _killed(mutant_id: str, args: list[str], timeout: int) -> tuple[bool, float, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, __file__, "--apply", mutant_id, "--", *args],
                              cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return True, time.perf_counter() - t0, "timeout"
    tail = (proc.stdout.strip().splitlines() or [""])[-1]
    return proc.returncode != 0, time.perf_counter() - t0, tail


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated mutant ids")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--apply", help=argparse.SUPPRESS)
    ap.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.apply:
        return _apply_and_test(a.apply, a.rest)
    chosen = (test_mutants.MUTANTS if not a.only else
              [test_mutants.by_id(i) for i in a.only.split(",")])
    stale = []
    for m in chosen:            # a mutant that no longer applies would fail its runs: not a kill
        try:
            test_mutants.mutated(m)
        except LookupError as exc:
            stale.append(str(exc))
    if stale:
        print("\n".join(stale), file=sys.stderr)
        return 2
    rows, bad = [], 0
    print("| mutant | area | killed by its tests | killed by --mode code | survivor reason |")
    print("|---|---|---|---|---|")
    for m in chosen:
        tests, t_sec, t_tail = _killed(m.id, m.tests.split(), a.timeout)
        audit, a_sec, a_tail = _killed(m.id, list(test_mutants.AUDIT), a.timeout)
        survived = not (tests or audit)
        bad += survived and not m.note
        rows.append({"id": m.id, "area": m.area, "tests": m.tests, "killed_by_tests": tests,
                     "killed_by_audit": audit, "seconds": round(t_sec + a_sec, 1),
                     "tests_tail": t_tail, "audit_tail": a_tail, "note": m.note})
        print(f"| `{m.id}` | {m.area} | {'yes' if tests else 'no'} | "
              f"{'yes' if audit else 'no'} | {m.note if survived else ''} |", flush=True)
    killed = sum(r["killed_by_tests"] or r["killed_by_audit"] for r in rows)
    print(f"\n{len(rows)} mutants, {killed} killed, {len(rows) - killed} survived "
          f"({bad} without a recorded reason)")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
