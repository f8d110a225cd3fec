"""``gnnprivacy audit``: an empirical epsilon lower bound beside a method's claimed epsilon.

Examples:

```
gnnprivacy audit --method heterpoisson --dataset facebook --epsilon 2 --json \\
    --data-root ../shared/datasets
gnnprivacy audit --method heterpoisson --dataset cora --epsilon 2 --noise-scale 0.25
gnnprivacy audit --method dpmlp --dataset cora --epsilon 4 --mode training --runs 20
gnnprivacy audit --method rgnn --dataset cora -p eps_mode=paper
```
"""

from __future__ import annotations

import json

import click


def _parse_params(items) -> dict:
    """``-p KEY=VALUE`` items (each may hold several pairs) -> a dict; errors name ``-p``."""
    from gnnprivacy.errors import InvalidParameterError
    from gnnprivacy.method.config import parse_dataset_args

    out = {}
    for item in items:
        try:
            pairs = parse_dataset_args(item)
        except InvalidParameterError:
            raise InvalidParameterError("-p/--param", "KEY=VALUE (e.g. -p lr=0.01)", item) from None
        twice = sorted(set(pairs) & set(out))
        if twice:
            raise InvalidParameterError("-p/--param", f"each key once ({twice[0]!r} is given twice)", item)
        out.update(pairs)
    return out


def _parse_degrees(text):
    """``"1,5,20"`` -> ``[1, 5, 20]`` (``None`` when not given); errors name ``--degrees``."""
    from gnnprivacy.errors import InvalidParameterError

    if not text:
        return None
    try:
        degrees = [int(d) for d in text.split(",")]
    except ValueError:
        raise InvalidParameterError("degrees", "comma-separated integers (e.g. 1,5,20)", text) from None
    if any(d < 0 for d in degrees):
        raise InvalidParameterError("degrees", "non-negative out-degrees", text)
    if len(degrees) > MAX_DEGREES:
        raise InvalidParameterError("degrees", f"at most {MAX_DEGREES} out-degrees", text)
    return degrees


#: the most canary out-degrees one audit takes (each is a mechanism simulated for every run)
MAX_DEGREES = 32


@click.command("audit")
@click.option("--method", required=True, help="Registered private method (heterpoisson, dpgnn, "
              "dpmlp, gap, rgnn, lpgnn, ldp-naive).")
@click.option("--dataset", default="csbm", show_default=True)
@click.option("--data-root", type=click.Path(file_okay=False), default=None)
@click.option("--epsilon", type=float, default=None, help="Claimed (target) epsilon.")
@click.option("--delta", type=float, default=None, help="Delta (default: the method's).")
@click.option("--mode", type=click.Choice(["mechanism", "paper", "training", "code"]),
              default=None,
              help="Default: mechanism, or code for a method without a canary law (the "
                   "edge-level methods). mechanism: exact per-step mechanism, vectorised; "
                   "paper: Algorithm 4 per "
                   "step, GDP-composed (heuristic); training: the real trainer with a canary node; "
                   "code: one real training run with gradient canaries in every noisy update "
                   "(measures the executed noise, clip and sampling rate).")
@click.option("--runs", type=click.IntRange(min=2), default=None,
              help="Runs per world (default 10000; training mode 20).")
@click.option("--noise-scale", type=float, default=1.0, show_default=True,
              help="Multiply the calibrated noise (0.25: positive control).")
@click.option("--degrees", default=None,
              help="HeterPoisson canary out-degrees, comma-separated (default: accounted worst "
                   "case, graph maximum and median).")
@click.option("--confidence", type=float, default=0.95, show_default=True)
@click.option("--selection", type=click.Choice(["heldout", "split", "same"]), default="heldout",
              show_default=True,
              help="Where the distinguishing threshold is chosen: heldout (other runs: as many "
                   "again simulated, or half the trainings in training mode), split (half the "
                   "runs), same (the runs the bound counts: over-claims, comparison only).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("-p", "--param", "params", multiple=True,
              help="Method parameter KEY=VALUE (repeatable), as for `gnnprivacy train`.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
def audit_command(method, dataset, data_root, epsilon, delta, mode, runs, noise_scale, degrees,
                  confidence, selection, seed, params, as_json) -> None:
    """Audit a private method: claimed epsilon, Clopper-Pearson lower bound, GDP estimate."""
    from gnnprivacy.auditing import audit
    from gnnprivacy.errors import GnnPrivacyError

    try:
        result = audit(method, dataset, epsilon=epsilon, delta=delta, mode=mode, runs=runs,
                       data_root=data_root, params=_parse_params(params),
                       degrees=_parse_degrees(degrees),
                       noise_scale=noise_scale, confidence=confidence, selection=selection,
                       seed=seed)
    except (GnnPrivacyError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        out = result.to_dict()
        if mode == "training":
            out["details"].pop("scores", None)
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(result.summary())
