"""The report: Markdown rows, a self-contained HTML page, and its rendering in headless Chromium."""

import re
import shutil
import subprocess

import numpy as np
import pytest

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.reporting.html import write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PLOT_COLOURS = {"tab:blue": (31, 119, 180), "tab:orange": (255, 127, 14), "tab:green": (44, 160, 44)}


def test_markdown_report_has_the_expected_rows(table2_runs, tmp_path):
    runs, _ = table2_runs
    md_path, html_path = write_report(runs, tmp_path / "out", title="T2")
    md = md_path.read_text()
    assert md.startswith("# T2\n") and "30 finished runs" in md
    assert "| dataset | method | epsilon = 4 | epsilon = 16 | epsilon = ∞ (non-private) |" in md
    assert re.search(r"\| computers \| heterpoisson \| \d+\.\d ± \d+\.\d \(n=3\) \[[^]]+\] · paper 80\.6 ± 0\.4 \|", md)
    assert re.search(r"\| 16 \| Ours \(HeterPoisson\) \| paper 75\.2 ± 1\.1 \\\| ours \d+\.\d ± \d+\.\d \(n=3\) \|", md)
    plots = sorted(p.name for p in (tmp_path / "out" / "plots").iterdir())
    assert plots == ["test_accuracy-vs-epsilon-dataset=computers.png", "test_accuracy-vs-epsilon-dataset=facebook.png"]
    assert all(f"(plots/{p})" in md for p in plots)
    assert "000-table2: Paper 000 (HeterPoisson) Table II" in md and "specs/" not in md


def test_html_is_self_contained(table2_runs, tmp_path):
    runs, _ = table2_runs
    page = write_report(runs, tmp_path / "out")[1].read_text()
    assert page.count('src="data:image/png;base64,') == 2 and "<style>" in page
    assert not re.search(r"""(src|href)=["'](?!data:)""", page)  # no external asset of any kind
    assert "http://" not in page and "https://" not in page


def test_bad_inputs_write_nothing(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidParameterError, match="at least one finished run"):
        write_report(tmp_path / "empty", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_unwritable_output_is_a_clear_error(table2_runs, tmp_path):
    runs, _ = table2_runs
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InvalidParameterError, match="writable directory"):
        write_report(runs, blocker / "out")


def _chromium(*args, user_dir):
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={user_dir}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def _screenshot(page, tmp_path, name):
    png = tmp_path / f"{name}.png"
    _chromium(f"--screenshot={png}", "--window-size=1280,2000", page.as_uri(), user_dir=tmp_path / f"ud-{name}")
    from PIL import Image

    return np.asarray(Image.open(png).convert("RGB")).astype(int)


def _colour_pixels(img, rgb, tol=12):
    return int((np.abs(img - np.array(rgb)).max(axis=2) <= tol).sum())


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium); "
                    "CI installs it via `make test`")
def test_report_renders_in_headless_chromium(table2_runs, tmp_path):
    runs, _ = table2_runs
    page = write_report(runs, tmp_path / "out")[1]
    dom = _chromium("--dump-dom", page.as_uri(), user_dir=tmp_path / "ud-dom").stdout
    assert "<td>heterpoisson</td>" in dom and "<th>epsilon = 16</th>" in dom and "<td>Ours (HeterPoisson)</td>" in dom
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,[A-Za-z0-9+/=]{1000,}"', dom)) == 2

    img = _screenshot(page, tmp_path, "report")
    assert img.shape == (2000, 1280, 3)
    assert (img.sum(axis=2) < 600).mean() > 0.02  # not blank: text, table borders, plots
    counts = {name: _colour_pixels(img, rgb) for name, rgb in PLOT_COLOURS.items()}
    assert sum(c >= 200 for c in counts.values()) >= 2, counts  # the plots' line colours are on screen

    # Positive control: the same page with its images removed shows no plot colours.
    bare = tmp_path / "bare.html"
    bare.write_text(re.sub(r'<img [^>]*>', "", page.read_text()))
    bare_counts = {name: _colour_pixels(_screenshot(bare, tmp_path, "bare"), rgb) for name, rgb in PLOT_COLOURS.items()}
    assert sum(c >= 200 for c in bare_counts.values()) < 2, bare_counts
