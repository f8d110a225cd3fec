"""End to end: `gnnprivacy reproduce NAME --quick` on the shared datasets, report beside the paper.

Real training on Amazon Computers, Facebook, Twitch, Cora, CiteSeer and German (about two
minutes each on 2 cores): part of the default suite, because the issue asks CI to run both quick
reproductions. Each reproduction prints its wall time.
"""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

DATA = Path(os.environ.get("GNNPRIVACY_SHARED_DATASETS", Path(__file__).resolve().parents[3] / "shared" / "datasets"))
CLI = "from gnnprivacy.cli.reproduce_cmd import reproduce_command; reproduce_command()"

pytestmark = [pytest.mark.dataset,
              pytest.mark.skipif(not (DATA / "MANIFEST.md").is_file(), reason=f"no shared datasets at {DATA}")]


@pytest.mark.parametrize("name, paper_cells", [
    ("000-table2", [("8", "Ours (HeterPoisson)")]),
    ("004-table2", [("Cora", "1", "RGNN"), ("Cora", "1", "LPGNN"), ("Cora", "1", "GraphSAGE")]),
])
def test_quick_reproduction_reports_ours_beside_the_paper(name, paper_cells, tmp_path):
    runs, report = tmp_path / "runs", tmp_path / "report"
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", CLI, name, "--quick", "--data-root", str(DATA),
                           "--runs-dir", str(runs), "-o", str(report), "-q"],
                          capture_output=True, text=True, timeout=900)
    seconds = time.monotonic() - start
    print(f"reproduce {name} --quick: {seconds:.0f} s")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 failed" in proc.stdout
    md = (report / "report.md").read_text()
    assert "## Published results beside ours" in md
    for cell in paper_cells:
        row = "| " + " | ".join(cell) + " |"
        line = next((ln for ln in md.splitlines() if ln.startswith(row)), None)
        assert line is not None, (row, md)
        assert re.search(r"paper \d+\.\d ± \d+\.\d \\\| ours \d+\.\d", line), line
    page = (report / "report.html").read_text()
    assert 'src="data:image/png;base64,' in page or "Privacy-utility plots" not in md
