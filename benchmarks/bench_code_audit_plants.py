"""The code audit's boundary checks against the five bug classes of issue 32 part 2, planted
on Cora (the plants of tests/auditing/test_code_audit_boundary.py), for heterpoisson, dpgnn,
dpmlp and a make_private loop: which checks fail, their figures, and the seconds per audit.

    python benchmarks/bench_code_audit_plants.py --data-root data
    python benchmarks/bench_code_audit_plants.py --dataset csbm      # no dataset files needed
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "auditing"))

import test_code_audit_boundary as plants  # noqa: E402


def _figure(name: str, c: dict) -> str:
    if not c.get("checked"):
        return f"{name}: not checked"
    if name == "sampling_rate":
        return (f"rate {c.get('executed_rate', 1.0):.3f} vs event {c['event_rate']:.3f}"
                + (f" (z {c['z']:.1f})" if "z" in c else ""))
    if name == "releases":
        return f"{c['releases']} updates vs {c['ledger_steps']} ledger steps"
    if name == "clip":
        return (f"engine sum off by {c['difference']:.3g} from the recomputed "
                f"{c['reference_norm']:.3g} (C {c['clip_norm']:.3g})")
    if name == "noise":
        if "std_ratio" not in c:
            return c.get("detail", "")
        low = min(c["std_ratio"].values())
        return f"lowest std / accounted {low:.3f}"
    return (f"max occurrences {max(c.get('max_per_step', 0), c.get('max_over_run', 0))} "
            f"vs bound {c['bound']}" + (f" ({c['detail']})" if c.get("detail") else ""))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="cora", choices=["cora", "csbm"])
    ap.add_argument("--data-root", default=None)
    a = ap.parse_args(argv)
    if a.data_root:
        plants.ROOT = Path(a.data_root)
    data = plants._data(a.dataset)                 # noqa: SLF001
    print("| path | planted bug | flagged | failed checks | the failing figure | seconds |")
    print("|---|---|---|---|---|---|")
    for path in plants.PATHS:
        for bug in ["none", *plants.BUGS]:
            with pytest.MonkeyPatch.context() as mp:
                if bug != "none":
                    plants.plant(bug, path, mp)
                t0 = time.perf_counter()
                result = plants.audit_path(path, data)
                seconds = time.perf_counter() - t0
            checks = result.details["checks"][0]
            failed = [n for n, c in checks.items() if c.get("checked") and not c["passed"]]
            shown = plants.BUGS.get(bug, "releases")
            print(f"| {path} | {bug} | {'yes' if result.violation else 'no'} | "
                  f"{', '.join(failed) or '-'} | {_figure(shown, checks[shown])} | "
                  f"{seconds:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
