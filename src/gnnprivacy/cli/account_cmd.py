"""``gnnprivacy account``: epsilon of a mechanism, or the noise multiplier for a target.

Examples::

    gnnprivacy account --mechanism dpsgd --sample-rate 0.01 --noise-multiplier 1.1 \\
        --steps 1000 --delta 1e-5
    gnnprivacy account --mechanism heterpoisson --q-b 0.1823 --M 2 --num-nodes 22470 \\
        --steps 50 --delta 1.6e-5 --target-epsilon 4 --json
    gnnprivacy account --mechanism dpgnn --num-nodes 90941 --batch-size 10000 \\
        --degree-bound 7 --noise-multiplier 1.0 --steps 665 --delta 1.1e-6 --accountant rdp
"""

from __future__ import annotations

import json
import math
from typing import Callable, Optional

import click
from dp_accounting import dp_event

from gnnprivacy.accounting import (NeighboringRelation, calibrate_noise_multiplier, dpgnn_event,
                                   dpsgd_event, gaussian_event, heterpoisson_event, laplace_event,
                                   make_accountant, randomized_response_event, resolve_scope)
from gnnprivacy.errors import InvalidParameterError

MECHANISMS = ("dpsgd", "heterpoisson", "dpgnn", "gaussian", "laplace", "rr")

#: library parameter name -> CLI option, for error messages
_OPTION_OF = {"sample_rate": "--sample-rate", "noise_multiplier": "--noise-multiplier",
              "q_b": "--q-b", "M": "--M", "max_out_degree": "--max-out-degree",
              "num_train": "--num-nodes", "batch_size": "--batch-size",
              "max_degree": "--degree-bound", "epsilon": "--epsilon",
              "num_buckets": "--num-buckets", "delta": "--delta", "target_delta": "--delta",
              "target_epsilon": "--target-epsilon", "steps": "--steps"}


def _require(value, option: str, mechanism: str):
    if value is None:
        raise click.UsageError(f"{option} is required for --mechanism {mechanism}")
    return value


def _event_factory(mechanism: str, p: dict) -> tuple[Callable[[float], dp_event.DpEvent], bool]:
    """(noise multiplier -> one-step event, whether the mechanism has a noise multiplier)."""
    if mechanism == "dpsgd":
        q = _require(p["sample_rate"], "--sample-rate", mechanism)
        return (lambda z: dpsgd_event(sample_rate=q, noise_multiplier=z)), True
    if mechanism == "heterpoisson":
        q_b = _require(p["q_b"], "--q-b", mechanism)
        multiplier = _require(p["multiplier"], "--M", mechanism)
        d_max = p["max_out_degree"]
        if d_max is None:
            d_max = _require(p["num_nodes"], "--max-out-degree or --num-nodes", mechanism) - 1
        return (lambda z: heterpoisson_event(
            q_b=q_b, M=multiplier, max_out_degree=d_max, noise_multiplier=z,
            overlap_removal=not p["no_overlap_removal"], mode=p["mode"])), True
    if mechanism == "dpgnn":
        n = _require(p["num_nodes"], "--num-nodes", mechanism)
        m = _require(p["batch_size"], "--batch-size", mechanism)
        k = _require(p["degree_bound"], "--degree-bound", mechanism)
        return (lambda z: dpgnn_event(num_train=n, batch_size=m, max_degree=k,
                                      noise_multiplier=z, sampling=p["sampling"])), True
    if mechanism == "gaussian":
        return (lambda z: gaussian_event(noise_multiplier=z)), True
    if mechanism == "laplace":
        return (lambda b: laplace_event(noise_multiplier=b)), True
    eps = _require(p["epsilon"], "--epsilon", mechanism)
    return (lambda _: randomized_response_event(epsilon=eps, num_buckets=p["num_buckets"])), False


def _noise_for_fixed_mechanism(mechanism: str, p: dict) -> Optional[float]:
    if mechanism == "laplace" and p["noise_multiplier"] is None and p["epsilon"] is not None:
        return 1.0 / p["epsilon"]
    if mechanism == "rr":
        return None
    return _require(p["noise_multiplier"], "--noise-multiplier (or --target-epsilon)", mechanism)


def _run(mechanism: str, p: dict) -> dict:
    make_event, has_noise = _event_factory(mechanism, p)
    relation = NeighboringRelation.REPLACE if mechanism == "rr" else None
    if p["mode"] == "paper" and p["accountant"] == "pld":
        raise click.UsageError("--mode paper is Theorem 2's RDP analysis; use --accountant rdp")
    if p["target_epsilon"] is not None:
        if not has_noise:
            raise click.UsageError(
                f"--target-epsilon needs a noise multiplier; {mechanism} has none")
        noise = calibrate_noise_multiplier(make_event, steps=p["steps"],
                                           target_epsilon=p["target_epsilon"],
                                           target_delta=p["delta"], accountant=p["accountant"],
                                           relation=relation)
    else:
        noise = _noise_for_fixed_mechanism(mechanism, p)
    event = make_event(noise)
    unit, relation = resolve_scope(event, None, relation)
    accountant = make_accountant(p["accountant"], unit=unit, relation=relation)
    accountant.compose(event, p["steps"])
    return {"epsilon": accountant.get_epsilon(p["delta"]), "delta": p["delta"],
            "noise_multiplier": noise, "accountant": p["accountant"], "mechanism": mechanism,
            "steps": p["steps"]}


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
@click.option("--M", "multiplier", type=float, default=None, help="heterpoisson: multiplier M.")
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
    try:
        result = _run(mechanism, params)
    except InvalidParameterError as err:
        raise click.BadParameter(str(err), param_hint=_OPTION_OF.get(err.name, err.name)) from err
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
