"""Command-line pieces the benchmark scripts share (benchmarks only, not the library).

`int_list`, `float_list` and `name_list` are argparse ``type=`` converters of a comma-separated
option (``--seeds 0,1,2``, ``--epsilons 8,2``, ``--datasets cora,citeseer``): the script gets a
list, and a bad item is argparse's usage error (exit 2) rather than a traceback after loading
data. argparse converts a string ``default`` the same way.

`resume_rows`, `append_row` and `read_rows` are the results file of the claims scripts: one
JSON object per line, appended as each cell finishes, so that a rerun skips the cells it
already holds and ``summary`` reads several such files together.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def name_list(text: str) -> list[str]:
    """``"cora,citeseer"`` -> ``["cora", "citeseer"]``."""
    return text.split(",")


def int_list(text: str) -> list[int]:
    """``"0,1,2"`` -> ``[0, 1, 2]``."""
    return [int(item) for item in name_list(text)]


def float_list(text: str) -> list[float]:
    """``"8,2"`` -> ``[8.0, 2.0]``."""
    return [float(item) for item in name_list(text)]


def resume_rows(path: str | Path, key: Iterable[str]) -> tuple[Path, set[tuple]]:
    """The results file ``path`` (its folder created) and the cells it already holds: the
    tuple of the ``key`` fields of each row, for the caller to skip."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fields = tuple(key)
    done = set()
    if out.exists():
        for line in out.read_text().splitlines():
            row = json.loads(line)
            done.add(tuple(row[f] for f in fields))
    return out, done


def append_row(out: Path, row: dict[str, Any]) -> None:
    """Append ``row`` to the results file ``out`` as one JSON line, and print that line."""
    line = json.dumps(row)
    with out.open("a") as fh:
        fh.write(line + "\n")
    print(line, flush=True)


def read_rows(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Every row of the results files ``paths``, in order."""
    return [json.loads(line) for p in paths for line in Path(p).read_text().splitlines()]


def run_or_summary(parser, run, summary) -> None:
    """Parse the arguments of a resumable results script (``--out`` and ``--summary``
    among them) and run it (``--out``), or summarise results files (``--summary FILES``)."""
    args = parser.parse_args()
    if args.summary:
        summary(args.summary)
    elif args.out:
        run(args)
    else:
        parser.error("give --out (run) or --summary FILES")
