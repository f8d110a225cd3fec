"""``gnnprivacy demo``: the library in one minute, offline, on the embedded synthetic graph.

Trains the same task four ways on a contextual stochastic block model (no files needed): a
non-private GCN; naive DP-SGD on features only (DP-MLP) twice, at the paper's defaults and
reasonably configured, so the pitch never rests on a weak baseline; and node-level DP
HeterPoisson GCN. It prints the epsilon spent (with its unit and neighbouring relation) beside
test accuracy; the private runs also train at a quarter and half of the budget, so that the
report puts every method on one accuracy-against-epsilon plot (the GCN as a horizontal line).
It shows the HeterPoisson model's privacy report card (claimed vs audited
epsilon, membership inference), and writes the run records and a report with the card. It ends
with what an attacker learns about the edges from the released posteriors of a non-private GCN:
He et al.'s Attack-0 without a defence and with GRID (spec 003), beside the control that uses
the released labels alone; those runs get their own records and report (``link-stealing/``).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import click

DEMO_GRAPH = "num_nodes=20000,num_classes=4,num_features=32,avg_degree=10,homophily=0.85,feature_signal=1.0"
#: the paper's naive DP-SGD configuration (spec 000 §3.9), spelled out so it never drifts
DPMLP_PAPER = {"epochs": 5, "lr": 1e-3, "hidden": 32, "layers": 4, "batch_size": 2048}
#: a reasonably configured DP-MLP (larger steps, more of them, a wider and shallower net)
DPMLP_CONFIGURED = {"epochs": 20, "lr": 0.01, "hidden": 128, "layers": 2, "batch_size": 2048}
#: the private runs also train at these fractions of the target budget, so that the report's
#: plot shows accuracy against epsilon as lines (the table shows the target budget only)
CURVE_FRACTIONS = (0.25, 0.5)
DEMO_RUNS = (
    ("gcn", "non-private baseline", {"epochs": 60}),
    ("dpmlp", "naive DP, paper defaults", {"epsilon": None, **DPMLP_PAPER}),
    ("dpmlp", "naive DP, configured", {"epsilon": None, **DPMLP_CONFIGURED}),
    ("heterpoisson", "node-level DP GNN", {"epsilon": None}),
)
#: link stealing on the same graph: the defences compared, with how the table names them
LINK_STEALING_RUNS = (("none", "none"), ("grid", "GRID (theta 0.4, n 3)"))
#: "fit seconds": the method's own work (the record's fit_seconds), without loading the graph
_LS_COLUMNS = ("defence", "attack AUC", "TPR@1%FPR", "labels-only AUC", "target test accuracy",
               "fit seconds")
_COLUMNS = ("method", "role", "epsilon", "unit / relation", "delta", "test accuracy", "fit seconds")


def demo_runs(epsilon: float, seed: int, runs_dir: str, graph: str = DEMO_GRAPH) -> list[dict]:
    """The flat configs of the demo's runs."""
    out = []
    for method, _, extra in DEMO_RUNS:
        values = {"method": method, "dataset": "csbm", "dataset_args": graph, "seed": seed,
                  "runs_dir": runs_dir, "train_frac": 0.5, "val_frac": 0.25, "test_frac": 0.25}
        values.update({k: (epsilon if v is None and k == "epsilon" else v) for k, v in extra.items()})
        out.append(values)
    return out


def curve_runs(epsilon: float, seed: int, runs_dir: str, graph: str = DEMO_GRAPH) -> list[dict]:
    """The private runs again at ``CURVE_FRACTIONS`` of ``epsilon`` (for the report's plot)."""
    return [{**values, "epsilon": fraction * epsilon}
            for values in demo_runs(epsilon, seed, runs_dir, graph) if "epsilon" in values
            for fraction in CURVE_FRACTIONS]


def link_stealing_runs(seed: int, runs_dir: str, graph: str = DEMO_GRAPH) -> list[dict]:
    """The flat configs of the demo's link-stealing runs (records under ``runs_dir/link-stealing``)."""
    return [{"method": "link-stealing", "dataset": "csbm", "dataset_args": graph, "seed": seed,
             "runs_dir": str(Path(runs_dir) / "link-stealing"), "model": "gcn", "attack": 0,
             "defense": defense} for defense, _ in LINK_STEALING_RUNS]


def _fit_seconds(rec) -> str:
    """The run's training time, without loading (or generating) the graph."""
    return f"{rec.timings['fit_seconds']:.1f}"


def _row(role: str, rec) -> tuple[str, ...]:
    private = not math.isinf(rec.epsilon)
    eps = f"{rec.epsilon:.3f}" if private else "inf (no privacy)"
    scope = f"{rec.privacy.get('unit', '?')} / {rec.privacy.get('relation', '?')}" if private else "-"
    delta = "-" if rec.delta is None else f"{rec.delta:.2e}"
    return (rec.method, role, eps, scope, delta, f"{rec.metrics['test_accuracy']:.4f}",
            _fit_seconds(rec))


def _ls_row(label: str, rec) -> tuple[str, ...]:
    m = rec.metrics
    return (label, f"{m['auc']:.3f}", f"{m['tpr_at_1pct_fpr']:.3f}", f"{m['auc_label_only']:.3f}",
            f"{m['model_test_accuracy']:.4f}", _fit_seconds(rec))


def plain_table(rows: list[tuple[str, ...]], columns: tuple[str, ...] = _COLUMNS) -> str:
    """A fixed-width text table (for pipes and logs: no wrapping, no box characters)."""
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


@click.command("demo")
@click.option("--epsilon", type=click.FloatRange(min=0, min_open=True), default=8.0, show_default=True,
              help="privacy budget of the private runs (node-level, add/remove)")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--runs-dir", "runs_dir", default="runs/demo", show_default=True,
              type=click.Path(file_okay=False), help="where run records go")
@click.option("--runs", "runs_alias", default=None, hidden=True, type=click.Path(file_okay=False))
@click.option("-o", "--output", "report_dir", default="reports/demo", show_default=True,
              type=click.Path(file_okay=False), help="where the Markdown/HTML report goes")
@click.option("--report", "report_alias", default=None, hidden=True, type=click.Path(file_okay=False))
@click.option("-q", "--quiet", is_flag=True, help="print only the table")
@click.option("--force", is_flag=True, help="let -o replace report files that gnnprivacy did not write there")
@click.option("--graph", default=DEMO_GRAPH, hidden=True, help="CSBM dataset args (tests use a small graph)")
def demo_command(epsilon: float, seed: int, runs_dir: str, runs_alias: str | None,
                 report_dir: str, report_alias: str | None, quiet: bool, force: bool, graph: str) -> None:
    """Privatize and train on a synthetic graph; print epsilon beside accuracy; write a report."""
    from gnnprivacy.experiments.progress import progress_factory, quiet_mode
    from gnnprivacy.method.runner import run

    runs_dir = runs_alias or runs_dir
    report_dir = report_alias or report_dir
    _check_outputs(runs_dir, report_dir, force)
    tty = sys.stdout.isatty()
    say = (lambda m: None) if quiet else (lambda m: click.echo(m, err=not tty))
    say(f"gnnprivacy demo: CSBM graph ({graph}), target epsilon {epsilon:g}")
    say("  loading the libraries (PyTorch Geometric, scikit-learn) ...")
    _warm_imports()         # once, untimed: the table's seconds are each method's own work
    rows, records = [], []
    with quiet_mode(quiet), progress_factory(enabled=not quiet) as progress:
        for (method, role, _), values in zip(DEMO_RUNS, demo_runs(epsilon, seed, runs_dir, graph)):
            say(f"  training {method} ({role}) ...")
            records.append(run(values, progress=progress))
            rows.append(_row(role, records[-1]))
        curve = curve_runs(epsilon, seed, runs_dir, graph)
        say(f"  the private runs again at epsilon "
            f"{', '.join(f'{f * epsilon:g}' for f in CURVE_FRACTIONS)} (the report's plot) ...")
        for values in curve:
            run(values, progress=progress)
    _print_table("Privacy vs utility (test accuracy on held-out nodes)", rows, _COLUMNS, tty)
    say("  auditing the heterpoisson model (report card) ...")
    card = _report_card(records[-1], runs_dir)
    if tty:
        from rich.console import Console
        from rich.markdown import Markdown

        Console().print(Markdown(card))
    else:
        click.echo(card)
    _write_report(runs_dir, report_dir, say, plots="methods", force=force)
    _link_stealing_section(seed, runs_dir, report_dir, graph, quiet=quiet, say=say, tty=tty, force=force)


def _check_outputs(runs_dir: str, report_dir: str, force: bool = False) -> None:
    """Prove every folder the demo writes to is writable, and that its reports replace no file
    gnnprivacy did not write (unless ``force``), before the first run trains."""
    from gnnprivacy._files import check_writable_dir
    from gnnprivacy.errors import InvalidParameterError
    from gnnprivacy.reporting.html import check_report_outputs

    try:
        for folder, name in ((runs_dir, "--runs-dir"), (Path(runs_dir) / "link-stealing", "--runs-dir"),
                             (report_dir, "-o/--output"), (Path(report_dir) / "link-stealing", "-o/--output")):
            check_writable_dir(folder, name=name, create=False)
        for runs, report in ((runs_dir, report_dir), (Path(runs_dir) / "link-stealing",
                                                       Path(report_dir) / "link-stealing")):
            check_report_outputs(runs, report, force)
    except InvalidParameterError as exc:
        raise click.ClickException(str(exc)) from None


def _link_stealing_section(seed: int, runs_dir: str, report_dir: str, graph: str, *, quiet: bool,
                           say, tty: bool, force: bool = False) -> None:
    """Attack-0 against a non-private GCN's posteriors without a defence and with GRID; records
    and a report of their own under ``link-stealing/``."""
    import gnnprivacy.attacks.link_stealing.method  # noqa: F401  (registers ``link-stealing``)
    from gnnprivacy.experiments.progress import progress_factory, quiet_mode
    from gnnprivacy.method.runner import run

    rows = []
    with quiet_mode(quiet), progress_factory(enabled=not quiet) as progress:
        for (_, label), values in zip(LINK_STEALING_RUNS, link_stealing_runs(seed, runs_dir, graph)):
            say(f"  link stealing against the GCN's posteriors, defence: {label} ...")
            rows.append(_ls_row(label, run(values, progress=progress)))
    _print_table("What an attacker learns about the edges: He et al. Attack-0 (posterior similarity) "
                 "on a non-private GCN", rows, _LS_COLUMNS, tty)
    click.echo("(labels-only AUC: the same pairs scored by the released top-1 labels alone. GRID "
               "keeps every label, so an attacker can always reach it; the target GCN trains on "
               "the attack protocol's graph D1, spec 003 §6.1)")
    _write_report(Path(runs_dir) / "link-stealing", Path(report_dir) / "link-stealing", say,
                  title="gnnprivacy demo: link stealing", metrics=("auc", "auc_label_only", "test_accuracy"),
                  force=force)

def _print_table(title: str, rows: list[tuple[str, ...]], columns: tuple[str, ...], tty: bool) -> None:
    if tty:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title)
        for col in columns:
            table.add_column(col)
        for row in rows:
            table.add_row(*row)
        Console().print(table)
    else:
        click.echo(title)
        click.echo(plain_table(rows, columns))


def _warm_imports() -> None:
    """Import what every run needs (the method registry with PyG, scikit-learn's metrics) so
    that the first method's timing does not include a few seconds of one-time imports."""
    import sklearn.metrics  # noqa: F401

    from gnnprivacy.method.registry import list_methods

    list_methods()


def _report_card(record, runs_dir: str) -> str:
    """The heterpoisson model's privacy report card (audit + white-box MIA; the non-private
    baseline is the demo's own GCN row), saved where the report shows it."""
    from gnnprivacy.auditing.report_card import card_to_markdown, report_card, save_card

    card = report_card(record, link_stealing=False, baseline=False)
    save_card(card, runs_dir)
    return card_to_markdown(card)


def _write_report(runs_dir, report_dir, say, *, title: str = "gnnprivacy demo",
                  metrics: tuple[str, ...] = ("test_accuracy",), plots: str = "panels", force: bool = False) -> None:
    from gnnprivacy.reporting.html import write_report

    paths = write_report(runs_dir, report_dir, title=title, metrics=metrics, plots=plots, force=force)
    say("report: " + ", ".join(str(p) for p in paths))
