"""``gnnprivacy methods`` (issue 38 item 6): the command line's ``gp.methods()``."""

from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

import gnnprivacy as gp
from gnnprivacy.cli import main


def _run(*args):
    return CliRunner().invoke(main, ["methods", *args])


def test_methods_lists_every_method_as_the_api_does():
    out = _run()
    assert out.exit_code == 0, out.output
    rows = {line.split()[0]: line.split()[1] for line in out.output.splitlines()
            if line and not line.startswith(("`", " "))}
    assert rows == {m.name: ("private" if m.private else "baseline") for m in gp.methods()}
    assert rows["heterpoisson"] == "private" and rows["gcn"] == "baseline"


def test_a_methods_parameters_are_its_train_options():
    out = _run("heterpoisson")
    assert out.exit_code == 0, out.output
    assert "--epsilon" in out.output and "--neighbor-multiplier" in out.output  # train's spelling
    assert "--q-b" in out.output and "default 8.0" in out.output
    doc = json.loads(_run("HeterPoisson", "--json").output)
    assert [d["name"] for d in doc] == ["heterpoisson"] and doc[0]["private"] is True
    assert {p["name"] for p in doc[0]["parameters"]} >= {"epsilon", "M", "q_b"}


def test_an_unknown_method_is_refused_with_the_choices():
    out = _run("heterpoison")
    assert out.exit_code == 2 and "'heterpoison' is not a method" in out.output
    assert "heterpoisson" in out.output and "Traceback" not in out.output


def test_methods_imports_neither_torch_nor_pyg():
    code = ("import gnnprivacy.cli, sys\nfrom click.testing import CliRunner\n"
            "r = CliRunner().invoke(gnnprivacy.cli.main, ['methods'])\n"
            "assert r.exit_code == 0 and 'heterpoisson' in r.output, r.output\n"
            "print(' '.join(sys.modules))")
    mods = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=120, check=True).stdout.split())
    assert "torch" not in mods and "torch_geometric" not in mods
