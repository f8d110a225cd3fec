"""White-box audit of the executed code (``gp.audit(..., mode="code")``, ``audit --mode code``).

The mechanism audit simulates the accountant's own model of a method, so a bug in the
trainer (noise drawn with the wrong std, a clip that is skipped, batches sampled at the
wrong rate) is invisible to it. This audit runs the real training path (the same
`gnnprivacy.method.runner.run` as ``gnnprivacy train``) with gradient canaries in
the style of Nasr et al. (*Tight Auditing of Differentially Private Machine Learning*,
USENIX Security 2023): at every executed step each engine's clipped sum carries an extra
block of Dirac canary gradients, clipped by the engine's own clipping function and noised by
the engine's own noise draw (`gnnprivacy.training.dp.audit_hooks`). The auditor
observes every noisy update and estimates what the code released:

* the noise std ``σ̂`` on coordinates no canary touches (``n`` Gaussian draws: a
  chi-square confidence interval);
* the clipped canary contribution ``Ĉ`` (least squares over the steps where canaries were
  sampled, which the white-box auditor knows);
* the sampling rate, from the realised batch sizes against the planned expected batch.

The executed noise multiplier ``σ̂ / Ĉ`` and rate, taken at the ends of their confidence
intervals that make the run look most private, are put into the method's own step events,
which a fresh accountant composes with the rest of the run's ledger. The result,
``epsilon_lower_bound``, is a lower confidence bound (``confidence`` per estimated
parameter) on the epsilon the library's accountant gives the code that actually ran; the
audit flags the run when it exceeds the epsilon the run reported.

Beside the canaries, every engine's boundary is observed
(`gnnprivacy.training.dp.audit_observer`) and checked against the accountant's event and
ledger (`gnnprivacy.auditing.outside`): the executed sampling rate against the event's
rate, the parameter updates against the ledger's step count (a resumed run together with
the run that wrote its checkpoint), the engine's clipped sum against per-subgraph gradients
recomputed independently, each parameter's noise against the std the event accounts for,
the noise of every release against every other's (a reused or correlated draw), and the
units' occurrences against the event's occurrence bound, with each batch's rows against the
data its membership names. A failed check is listed in ``details["failed_checks"]`` and
flags the run. Every shipped path has each check made (``tests/auditing/
test_every_path_audited.py`` enumerates them).

When the audit knows the data (``audit_method_code``, or ``code_audit(train, data=...)``),
it also checks what the run *publishes* (`gnnprivacy.auditing.publication`): the run is
repeated on a counterfactual copy of the data with every noisy release replayed from the
first run, and every published value that changed (a record field, a log line, a
checkpoint, a model file) must be named in ``privacy["unaccounted"]``.

What it cannot see: releases outside the engine are replayed but not measured (GAP's
aggregation hops are composed as recorded), a wrong per-subgraph sum on steps after the
replayed ones, batches whose membership it cannot read (fixed-shape device batches: those
checks report ``checked: False``), and more than one rank of a sharded run (one rank is the
single-process release).
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from typing import Any

import torch

__all__ = ["audit_method_code", "code_audit", "executed_epsilon", "measure_engine"]


def _z(confidence: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(confidence))


def measure_engine(hook, *, confidence: float) -> dict[str, Any]:
    """Estimates (and one-sided confidence ends) of one engine's executed noise, clip and
    sampling rate from its canary observations."""
    from scipy.stats import chi2

    engine = hook.engine
    y = torch.stack(hook.observed) if hook.observed else torch.zeros(0, hook.num_canaries
                                                                      + hook.num_noise)
    m = hook.num_canaries
    noise = y[:, m:].reshape(-1)
    n = int(noise.numel())
    out: dict[str, Any] = {"steps_observed": int(y.shape[0]), "noise_draws": n,
                           "planned_noise_std": engine.noise_std,
                           "planned_clip_norm": engine.clip_norm,
                           "planned_expected_batch": engine.expected_batch_size,
                           "canary_rate": hook.rate, "canary_multiplicity": hook.multiplicity}
    if n < 2:
        return {**out, "measured": False}
    var = float(noise.square().mean())
    sigma = math.sqrt(var)
    sigma_hi = math.sqrt(n * var / chi2.ppf(1 - confidence, n))
    counts = torch.stack(hook.counts).double() if hook.counts else torch.zeros(0, m)
    ksq = float(counts.square().sum())
    out.update(noise_std=sigma, noise_std_upper=sigma_hi)
    if ksq == 0:
        return {**out, "measured": False, "note": "no canary was sampled: the clip is unmeasured"}
    c_hat = float((counts * y[:, :m]).sum()) / ksq
    c_lo = c_hat - _z(confidence) * sigma_hi / math.sqrt(ksq)
    if c_lo <= 0:
        return {**out, "measured": False, "clip": c_hat,
                "note": "the canaries' clipped contribution is not bounded away from 0 at "
                        "this confidence (too much noise for the canaries sampled): more "
                        "canaries or steps measure it"}
    sizes = torch.tensor(hook.batch_sizes, dtype=torch.float64)
    mean = float(sizes.mean())
    spread = float(sizes.std()) if sizes.numel() > 1 else 0.0
    rate_lo = (mean - _z(confidence) * spread / math.sqrt(sizes.numel())) / \
        engine.expected_batch_size
    planned = engine.noise_std / engine.clip_norm
    ratio_hi = sigma_hi / c_lo if c_lo > 0 else math.inf
    out.update(measured=True, clip=c_hat, clip_lower=c_lo, mean_batch=mean,
               rate_factor=mean / engine.expected_batch_size, rate_factor_lower=rate_lo,
               noise_factor=(sigma / c_hat) / planned if c_hat > 0 else math.inf,
               noise_factor_upper=ratio_hi / planned)
    return out


def _rescaled(event, noise_factor: float, rate_factor: float):
    """``event`` with its noise multiplier times ``noise_factor`` and its sampling rate
    times ``rate_factor`` (capped at 1)."""
    import attr
    from dp_accounting import dp_event

    from gnnprivacy.accounting.events import DpGnnDpEvent, HeterPoissonDpEvent, ScopedDpEvent

    if isinstance(event, ScopedDpEvent):
        return attr.evolve(event, event=_rescaled(event.event, noise_factor, rate_factor)) \
            if attr.has(type(event)) else ScopedDpEvent(
                _rescaled(event.event, noise_factor, rate_factor), event.unit, event.relation)
    if isinstance(event, dp_event.PoissonSampledDpEvent):
        return dp_event.PoissonSampledDpEvent(
            min(1.0, event.sampling_probability * rate_factor),
            _rescaled(event.event, noise_factor, rate_factor))
    if isinstance(event, dp_event.GaussianDpEvent):
        return dp_event.GaussianDpEvent(event.noise_multiplier * noise_factor)
    if isinstance(event, HeterPoissonDpEvent):
        return attr.evolve(event, noise_multiplier=event.noise_multiplier * noise_factor,
                           sampling_probability=min(1.0, event.sampling_probability
                                                    * rate_factor))
    if isinstance(event, DpGnnDpEvent):
        batch = max(1, min(event.num_train, round(event.batch_size * rate_factor)))
        return attr.evolve(event, noise_multiplier=event.noise_multiplier * noise_factor,
                           batch_size=batch)
    raise TypeError(f"no rescaling rule for {type(event).__name__}")


def _fresh_like(acc):
    from gnnprivacy.accounting import make_accountant

    options = {}
    if acc.kind == "pld":
        options = {"value_discretization_interval": acc._vdi,          # noqa: SLF001
                   "heterpoisson_tail_mass": acc._tail_mass}           # noqa: SLF001
    return make_accountant(acc.kind, unit=acc.unit, relation=acc.relation, **options)


def executed_epsilon(hooks, measurements, *, delta: float) -> float:
    """The run's ledger composed again with every engine's step event at its measured
    (confidence-end) noise and rate; other events (e.g. GAP's aggregation hops) as recorded."""
    by_event = {}
    for hook, meas in zip(hooks, measurements):
        if not meas.get("measured"):
            continue
        by_event[id(hook.engine.step_event)] = (hook.engine.step_event, meas)
    accountants = {id(h.engine.accountant): h.engine.accountant for h in hooks}
    worst = 0.0
    for acc in accountants.values():
        fresh = _fresh_like(acc)
        for entry in acc.ledger.entries:
            match = next((m for e, m in by_event.values() if e == entry.event), None)
            event = entry.event if match is None else _rescaled(
                entry.event, match["noise_factor_upper"], max(match["rate_factor_lower"], 0.0))
            fresh.compose(event, entry.count)
        worst = max(worst, float(fresh.get_epsilon(delta)))
    return worst


@contextmanager
def _loader_batches_noted():
    """Every `make_private` sampler (built-in or a user's subclass) hands the batches it
    draws to the running audit: the membership of a user-loop step is read there."""
    from gnnprivacy.training.dp import audit_hooks
    from gnnprivacy.training.private.samplers import SubgraphSampler

    def wrap(sample):
        def noted(self, *args, **kwargs):
            batch = sample(self, *args, **kwargs)
            audit_hooks.note_batch(batch, self)
            return batch
        return noted

    classes, todo = [], [SubgraphSampler]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if "sample" in vars(cls) and cls is not SubgraphSampler:
            classes.append((cls, vars(cls)["sample"]))
    for cls, sample in classes:
        cls.sample = wrap(sample)
    try:
        yield
    finally:
        for cls, sample in classes:
            cls.sample = sample


def code_audit(train, *, epsilon_claimed: float | None = None, delta: float | None = None,
               seed: int = 0, confidence: float = 0.999, num_canaries: int = 1024,
               num_noise: int = 256, canary_scale: float = 10.0, method: str = "custom",
               dataset: str = "", data=None, _published=None):
    """Run ``train()`` (any code that trains through `DPEngine`
    or `gnnprivacy.make_private`) under canaries and audit what it released.

    Args:
        train: a zero-argument callable that trains; it may return a dict with the run's
            ``epsilon`` and ``delta`` (used when the arguments below are ``None``).
        epsilon_claimed, delta: what the run reports.
        confidence: one-sided confidence of each estimated parameter's end.
        num_canaries, num_noise, canary_scale: the canary block
            (`CodeAuditSession`).
        data: the private data, when ``train`` takes it (``train(data)`` returning a dict
            of everything the run publishes: ``pt.privacy``, state dicts ...); the run is
            then made twice more for the publication check
            (`gnnprivacy.auditing.publication`; ``details["publication"]``).

    Returns:
        `AuditResult` (mode ``"code"``); ``violation`` when
        the executed epsilon's lower confidence bound exceeds the claim or a boundary
        check fails (``details["checks"]``, ``details["failed_checks"]``).

    Raises:
        InvalidParameterError: ``train`` ran no noisy step of a private engine.
    """
    from gnnprivacy.auditing.outside import boundary_checks
    from gnnprivacy.auditing.result import AuditResult
    from gnnprivacy.errors import InvalidParameterError
    from gnnprivacy.training.dp.audit_hooks import CodeAuditSession

    t0 = time.perf_counter()
    session = CodeAuditSession(seed=seed, num_canaries=num_canaries, num_noise=num_noise,
                               canary_scale=canary_scale)
    run = train if data is None else (lambda: train(data))
    with session.active(), _loader_batches_noted():
        outcome = run() or {}
    if not session.engines:
        raise InvalidParameterError("train", "training through the DP engine (a noisy step of "
                                    "a private engine)", "no engine observed")
    claim = float(outcome["epsilon"] if epsilon_claimed is None else epsilon_claimed)
    delta = float(outcome["delta"] if delta is None else delta)
    measurements = [measure_engine(h, confidence=confidence) for h in session.engines]
    bound = executed_epsilon(session.engines, measurements, delta=delta)
    steps = sum(len(h.observed) for h in session.engines)
    checks, failed = boundary_checks(session.engines)
    published = None
    if data is not None or _published is not None:
        from gnnprivacy.auditing.publication import publication_check

        published = (publication_check(train, data) if _published is None
                     else publication_check(*_published))
        if published.get("checked") and not published["passed"]:
            failed = failed + [f"publication ({published['detail']})"]
    return AuditResult(method, dataset, "code", claim, bound, None, steps, confidence, delta,
                       seconds=time.perf_counter() - t0,
                       details={"engines": measurements, "run": _summary(outcome),
                                "checks": checks, "failed_checks": failed,
                                "publication": published,
                                "note": "epsilon_lower_bound: the method's accountant at the "
                                        "executed noise, clip and sampling rate measured from "
                                        "canaries in every noisy update (each at its "
                                        f"{confidence:.1%} one-sided confidence end)"})


def _summary(outcome: dict) -> dict:
    """The plain values of what ``train`` returned (the epsilon, delta, metrics), for the
    audit's details; tensors and state dicts are left out."""
    return {k: v for k, v in outcome.items() if isinstance(v, (int, float, str, type(None)))}


def audit_method_code(method: str, dataset: str, values: dict, *, data=None, seed: int = 0,
                      publication: bool = True, **kw):
    """`code_audit` of a registered method, trained by the runner (the code path of
    ``gnnprivacy train``) with ``values``; the claim is the epsilon the run reports.

    With ``publication`` (default), the run is also made twice more as ``gnnprivacy train``
    makes it, writing its record, model file and checkpoints, on the data and on a
    counterfactual copy, for the publication check (`gnnprivacy.auditing.publication`); the
    data are loaded from ``dataset`` when not given."""
    from gnnprivacy.method.runner import run

    def train():
        record = run({"method": method, "dataset": dataset, **values}, save=False, data=data)
        return {"epsilon": record.epsilon, "delta": record.delta,
                "test_accuracy": record.metrics.get("test_accuracy")}

    published = None
    if publication:
        if data is None:
            from gnnprivacy.method.config import resolve_config
            from gnnprivacy.method.data import load_run_data

            data = load_run_data(resolve_config({"method": method, "dataset": dataset,
                                                 **values})[0])
        published = (published_run(method, dataset, values), data)
    return code_audit(train, seed=seed, method=method, dataset=dataset,
                      _published=published, **kw)


def published_run(method: str, dataset: str, values: dict):
    """``train(data)`` for the publication check: one run through the runner with its
    files written (into a fresh folder), returning what it published: the record, the
    content of every file it wrote, its log lines and progress."""
    import tempfile
    from pathlib import Path

    from gnnprivacy.method.runner import run

    def train(data) -> dict:
        with tempfile.TemporaryDirectory(prefix="gp-publication-") as folder:
            lines, bars = [], []

            def progress(description, total):
                bar = {"description": description, "total": total, "updates": []}
                bars.append(bar)
                return type("Bar", (), {"update": lambda self, n=1: bar["updates"].append(n)})()

            record = run({"method": method, "dataset": dataset, **values, "runs_dir": folder},
                         data=data, run_id="audit", log=lines.append, progress=progress)
            return published_outputs({"record": record.to_dict(), "log": lines,
                                      "progress": bars}, folder)

    return train


def published_outputs(out: dict, folder: str, *others: str) -> dict:
    """``out`` with ``"files"``: the content of every file under ``folder`` (a run's
    outputs), in comparable form; the paths of ``folder`` and ``others`` (temporary folders
    that differ between two runs) replaced in every string, and a record's file checksums
    dropped (the files themselves are compared)."""
    from pathlib import Path

    files = {str(p.relative_to(folder)): _file_content(p)
             for p in sorted(Path(folder).rglob("*")) if p.is_file()}
    return _scrubbed({**out, "files": files}, (folder, *others))


def _file_content(path):
    """What a written file holds, in comparable form (JSON parsed, tensors loaded)."""
    import json

    from gnnprivacy.training.checkpoint import read_weights_only

    if path.suffix == ".json":
        return _json_strings(json.loads(path.read_text()))
    if path.suffix in (".pt", ".ckpt"):
        return _json_strings(read_weights_only(path, name="file", expected="a saved tensor file"))
    if path.suffix == ".npz":
        import numpy as np

        with np.load(path) as z:
            return {k: z[k].tolist() for k in z.files}
    return path.read_bytes()


def _json_strings(value):
    """``value`` with the JSON documents it holds as strings (a saved model's record)
    parsed, so their wall-clock fields are skipped like the record's."""
    import json

    if isinstance(value, dict):
        return {k: _json_strings(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_strings(v) for v in value]
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return _json_strings(json.loads(value))
        except ValueError:
            return value
    return value


def _scrubbed(value, folders: tuple[str, ...]):
    if isinstance(value, dict):
        return {k: (sorted(v) if k == "files" and all(isinstance(x, dict) and "sha256" in x
                                                      for x in v.values())
                    else _scrubbed(v, folders)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrubbed(v, folders) for v in value]
    if isinstance(value, str):
        for k, folder in enumerate(folders):
            value = value.replace(folder, f"<folder {k}>")
    return value
