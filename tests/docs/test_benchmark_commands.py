"""Every benchmark command that the README and the docs quote parses as written.

The pages cite ``python benchmarks/<script>.py ...`` for each measured number (in code blocks
and inline). The benchmarks themselves are too long for the suite, so this runs each quoted
command up to its argument parser: the script is executed as ``__main__`` with the quoted
arguments, and its ``parse_args`` stops it right after a successful parse. An option the
script does not have, a choice it does not offer or a value of the wrong type fails here,
with the page and the command. Optional parts written ``[--flag value]`` are parsed too;
``DATA``-style placeholders are ordinary values to a parser.
"""

from __future__ import annotations

import argparse
import re
import runpy
import shlex
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
#: an inline code span that starts as a command: ``[VAR=value ...] [nice ...] python ...``
INLINE = re.compile(r"`((?:[A-Z_]+=\S+\s+)*(?:nice(?: -n \d+)?\s+)?\S*python3?\s[^`]*?"
                    r"benchmarks/[^`]*)`")
SCRIPT = re.compile(r"benchmarks/(\w+)\.py")


class _Parsed(Exception):
    """Raised by the patched ``parse_args`` once the arguments parsed."""


def commands(text: str) -> list[str]:
    """The benchmark command lines of a page: fenced blocks (backslash continuations joined)
    and inline code spans, each cut at a pipe, redirection or ``;``."""
    found = []
    for block in FENCE.findall(text):
        found += block.replace("\\\n", " ").splitlines()
    found += [span.replace("\\\n", " ").replace("\n", " ")
              for span in INLINE.findall(FENCE.sub("", text))]
    out = []
    for line in found:
        line = re.split(r"\s(?:\||>|2>|;|&&|#)(?:\s|$)", line)[0]
        if SCRIPT.search(line) and "python" in line:
            out.append(" ".join(line.split()))
    return out


def arguments(command: str) -> tuple[str, list[str]]:
    """``(script, argv)`` of a quoted command: environment assignments and the interpreter
    dropped, ``[...]`` brackets of optional parts removed, ``...`` placeholders dropped."""
    tokens = shlex.split(command.replace("[", " ").replace("]", " "))
    at = next(i for i, t in enumerate(tokens) if SCRIPT.search(t))
    argv = [t for t in tokens[at + 1:] if t not in ("...", "…")]
    return SCRIPT.search(tokens[at]).group(1), argv


CASES = sorted({(page.relative_to(REPO).as_posix(), cmd)
                for page in PAGES for cmd in commands(page.read_text(encoding="utf-8"))})


def parses(script: str, argv: list[str], monkeypatch) -> None:
    """Run ``benchmarks/<script>.py`` as ``__main__`` with ``argv`` until its arguments are
    parsed (``SystemExit`` from argparse propagates)."""
    original = argparse.ArgumentParser.parse_args

    def stop_after_parsing(self, args=None, namespace=None):
        original(self, args, namespace)
        raise _Parsed

    path = REPO / "benchmarks" / f"{script}.py"
    assert path.is_file(), f"benchmarks/{script}.py does not exist"
    assert "ArgumentParser" in path.read_text(encoding="utf-8"), (
        f"benchmarks/{script}.py reads sys.argv itself: a quoted benchmark parses its "
        "arguments with argparse, so that its command can be checked here")
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", stop_after_parsing)
    monkeypatch.setattr(sys, "argv", [str(path), *argv])
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    with pytest.raises(_Parsed):
        runpy.run_path(str(path), run_name="__main__")


def test_the_pages_quote_benchmark_commands():
    assert len(CASES) >= 20, CASES


@pytest.mark.parametrize("page, command", CASES)
def test_a_quoted_benchmark_command_parses(page, command, monkeypatch):
    script, argv = arguments(command)
    try:
        parses(script, argv, monkeypatch)
    except SystemExit as exit_:                 # argparse's error (or a script's own exit)
        pytest.fail(f"{page}: `{command}` does not parse (exit {exit_.code})")


def test_a_misquoted_command_fails(monkeypatch):
    """Controls: an option the script lacks and a choice it does not offer are caught."""
    for argv in (["--part", "step", "--no-such-option"], ["--part", "everything"]):
        with pytest.raises(SystemExit):
            parses("bench_graph_classification", argv, monkeypatch)


def test_commands_are_found_in_blocks_and_inline():
    text = ("Run `OMP_NUM_THREADS=1 python benchmarks/a.py --x 1\n--y 2` then:\n\n```\n"
            "python benchmarks/b.py --p 1 \\\n    [--q 2] | tee out\n```\n")
    assert sorted(commands(text)) == ["OMP_NUM_THREADS=1 python benchmarks/a.py --x 1 --y 2",
                                      "python benchmarks/b.py --p 1 [--q 2]"]
    assert arguments("python benchmarks/b.py --p 1 [--q 2] ...") == (
        "b", ["--p", "1", "--q", "2"])
