"""``gnnprivacy account``: epsilon of a mechanism, or the noise multiplier for a target.

Examples:

```
gnnprivacy account --mechanism dpsgd --sample-rate 0.01 --noise-multiplier 1.1 \\
    --steps 1000 --delta 1e-5
gnnprivacy account --mechanism heterpoisson --q-b 0.1823 --neighbor-multiplier 2 --num-nodes 22470 \\
    --steps 50 --delta 1.6e-5 --target-epsilon 4 --json
gnnprivacy account --mechanism dpgnn --num-nodes 90941 --batch-size 10000 \\
    --degree-bound 7 --noise-multiplier 1.0 --steps 665 --delta 1.1e-6 --accountant rdp
```
"""

from __future__ import annotations

import json
import math

import click

from gnnprivacy.errors import GnnPrivacyError, InvalidParameterError

MECHANISMS = ("dpsgd", "heterpoisson", "dpgnn", "gaussian", "laplace", "rr")

#: library parameter name -> CLI option, for error messages
_OPTION_OF = {"sample_rate": "--sample-rate", "noise_multiplier": "--noise-multiplier",
              "q_b": "--q-b", "M": "--neighbor-multiplier", "multiplier": "--neighbor-multiplier",
              "max_out_degree": "--max-out-degree", "num_nodes": "--num-nodes",
              "num_train": "--num-nodes", "batch_size": "--batch-size",
              "max_degree": "--degree-bound", "degree_bound": "--degree-bound",
              "epsilon": "--epsilon", "num_buckets": "--num-buckets", "delta": "--delta",
              "target_delta": "--delta", "target_epsilon": "--target-epsilon", "steps": "--steps",
              "accountant": "--accountant", "mode": "--mode"}


@click.command("account")
@click.option("--mechanism", type=click.Choice(MECHANISMS), required=True,
              help="Mechanism whose privacy is accounted.")
@click.option("--accountant", type=click.Choice(["pld", "rdp"]), default="pld", show_default=True)
@click.option("--steps", type=click.IntRange(min=1), default=1, show_default=True,
              help="Number of composed steps/releases.")
@click.option("--delta", type=click.FloatRange(0.0, 1.0, max_open=True), default=1e-5,
              show_default=True)
@click.option("--noise-multiplier", type=float, default=None,
              help="Noise std over sensitivity (heterpoisson: sigma / clip norm; "
                   "dpgnn: sigma / (2(K+1)C); laplace: scale / sensitivity).")
@click.option("--target-epsilon", type=float, default=None,
              help="Calibrate the noise multiplier (one-sided) instead of taking it.")
@click.option("--sample-rate", type=float, default=None, help="dpsgd: Poisson sampling rate.")
@click.option("--q-b", "q_b", type=float, default=None, help="heterpoisson: central rate q_b.")
@click.option("--neighbor-multiplier", "multiplier", type=float, default=None,
              help="heterpoisson: neighbour multiplier M.")
@click.option("--M", "multiplier_alias", type=float, default=None, hidden=True)
@click.option("--max-out-degree", type=int, default=None,
              help="heterpoisson: D_max (default --num-nodes - 1).")
@click.option("--num-nodes", type=int, default=None,
              help="heterpoisson: |V|; dpgnn: number of training nodes N.")
@click.option("--degree-bound", type=int, default=None, help="dpgnn: degree bound K.")
@click.option("--batch-size", type=int, default=None, help="dpgnn: batch size m.")
@click.option("--sampling", type=click.Choice(["fixed", "poisson"]), default="fixed",
              show_default=True, help="dpgnn: batch sampling.")
@click.option("--no-overlap-removal", is_flag=True, help="heterpoisson: ablation of 000 §4.6.")
@click.option("--mode", type=click.Choice(["sound", "paper"]), default="sound",
              show_default=True, help="heterpoisson: sound PLD or the paper's RDP.")
@click.option("--epsilon", type=float, default=None,
              help="laplace/rr: epsilon of one release.")
@click.option("--num-buckets", type=int, default=2, show_default=True, help="rr: domain size k.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
def account_command(mechanism: str, as_json: bool, **params) -> None:
    """Epsilon of a mechanism after --steps steps, or (--target-epsilon) the noise it needs."""
    from gnnprivacy.accounting.query import account

    alias = params.pop("multiplier_alias")
    if params["multiplier"] is None:
        params["multiplier"] = alias
    params["overlap_removal"] = not params.pop("no_overlap_removal")
    try:
        result = account(mechanism, **params)
    except InvalidParameterError as err:
        raise click.BadParameter(str(err), param_hint=_OPTION_OF.get(err.name, err.name)) from err
    except (ValueError, GnnPrivacyError) as err:       # e.g. an event the accountant refuses
        raise click.ClickException(str(err)) from err
    if as_json:
        out = dict(result)
        out["epsilon"] = out["epsilon"] if math.isfinite(out["epsilon"]) else "inf"
        click.echo(json.dumps(out))
    else:
        noise = "" if result["noise_multiplier"] is None else (
            f", noise_multiplier={result['noise_multiplier']:.6g}")
        click.echo(f"{mechanism}: epsilon = {result['epsilon']:.6g} at delta = "
                   f"{result['delta']:.3g} after {result['steps']} step(s) "
                   f"({result['accountant']} accountant{noise})")
