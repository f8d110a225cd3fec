"""Wall time of `gnnprivacy --version`, `--help`, `account` and `train --help` (median of N runs).

The CLI loads subcommands lazily, so --help and --version import neither torch nor PyG,
`account` imports dp_accounting but not torch, and `train --help` builds its options from the
methods' parameter dataclasses without importing torch (issue 25: under 1 s).
Run: `python benchmarks/bench_cli_startup.py`.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

CASES = (
    ("--version", ["--version"]),
    ("--help", ["--help"]),
    ("account (dpsgd, 1000 steps)", ["account", "--mechanism", "dpsgd", "--sample-rate", "0.01",
                                     "--noise-multiplier", "1.1", "--steps", "1000"]),
    ("train --help", ["train", "--help"]),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    exe = shutil.which("gnnprivacy", path=str(Path(sys.executable).parent)) or "gnnprivacy"
    print(f"{'command':<36} {'median s':>9} {'min s':>7}")
    medians: dict[str, float] = {}
    for label, argv in CASES:
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            subprocess.run([exe, *argv], check=True, capture_output=True)
            times.append(time.perf_counter() - t)
        print(f"{label:<36} {statistics.median(times):>9.3f} {min(times):>7.3f}")
        medians[label] = statistics.median(times)
    verdict = "under" if medians["train --help"] < 1.0 else "NOT under"
    print(f"train --help: {medians['train --help']:.3f} s median, {verdict} 1 s")


if __name__ == "__main__":
    main()
