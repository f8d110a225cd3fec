"""The report card of any node model: ``gp.assess(model, data, train_fn=..., privacy=...)``.

What an attacker can learn from a model the user trained in their own loop
(`gnnprivacy.make_private`), from a non-private PyG model they want to release, or from a
built-in method's trainer. The model is any object with ``forward(x, edge_index)`` returning
one row of logits per node (an ``nn.Module``), a `PrivateTraining` (its model), or a library
trainer (``predict_logits``). The card has the layout of the built-in card
(`gnnprivacy.auditing.report_card`), and its model sections are computed by the same
functions (`posterior_sections`) for both:

* **claimed**: ε and δ with unit, relation and scope from ``privacy=`` (a `PrivateTraining`,
  its ``.privacy`` dict with ``epsilon``, a `RunRecord`), or none: a non-private release,
  which the card says;
* **membership inference without retraining**: loss and confidence thresholds calibrated on
  the non-members the user marks (``nonmembers=``, default the test nodes) against the members
  (``members=``, default the training nodes): AUC with a bootstrap interval, the TPR at the
  thresholds that give 1% and 0.1% FPR on a calibration half of the non-members (the FPR they
  realise on the other half beside), and the empirical epsilon lower bound of the loss scores;
* **LiRA** (`gnnprivacy.attacks.lira`) when ``train_fn(data, seed) -> model`` is given:
  ``shadows`` models trained by the user's own function, each on a random half of the
  candidate nodes (``data.train_mask`` set to the half), online and offline, ROC curves and
  TPR at 1% and 0.1% FPR; the released model is also scored against the shadows;
* **code audit** (`gnnprivacy.auditing.code.code_audit`) of one run of ``train_fn`` when it
  trains through `make_private` (the executed noise, clip and sampling rate against the claim);
* **link stealing** on the released posteriors: He et al.'s Attack-0 (unsupervised), with a
  bootstrap interval, and ``auc_vs_nhop``
  (linked pairs against pairs at distance ``n_hop``);
* **utility**: test accuracy of the model on ``data.test_mask``.

The empirical lower bounds (code audit, membership scores) stand beside the claim; a bound
above the claim is flagged on the card. The bounds from membership scores treat each node as
one trial of the membership game (the one-run view of auditing): an indication, not a proof.

*Privacy*: assessing reads the released model's outputs (and trains shadows on the user's
data); it releases nothing and spends no budget.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from gnnprivacy.errors import InvalidParameterError

__all__ = ["assess_model", "assess_models", "is_model", "claim_of", "model_logits",
           "posterior_sections"]

#: scores of the threshold attacks: higher = member
THRESHOLD_SCORES = ("loss", "confidence")


def _unwrap(model):
    """The predictor behind ``model``: a `PrivateTraining`'s model, else ``model``."""
    if hasattr(model, "engine") and hasattr(model, "model") and hasattr(model, "privacy"):
        return model.model
    return model


def is_model(obj) -> bool:
    obj = _unwrap(obj)
    return isinstance(obj, torch.nn.Module) or hasattr(obj, "predict_logits")


def _expected_features(module: torch.nn.Module) -> int | None:
    """Input feature size of the first layer that states one (``in_channels``,
    ``in_features``); ``None`` when unknown or lazy."""
    for sub in module.modules():
        for attr in ("in_channels", "in_features"):
            size = getattr(sub, attr, None)
            if isinstance(size, int) and size > 0:
                return size
            if isinstance(size, tuple) and size and all(isinstance(v, int) for v in size):
                return size[0] if size[0] > 0 else None
    return None


def model_logits(model, data) -> torch.Tensor:
    """Logits ``[num_nodes, C]`` of ``model`` on the whole graph ``data`` (evaluation mode,
    no gradients; the model's training mode is restored).

    Raises:
        InvalidParameterError: a graph whose feature size is not the model's, a model that
            fails on the graph, or an output that is not one row of logits per node.
    """
    from gnnprivacy.training.predict import node_logits

    model = _unwrap(model)
    n = int(data.num_nodes)
    if isinstance(model, torch.nn.Module):
        want = _expected_features(model)
        if want is not None and int(data.num_features) != want:
            raise InvalidParameterError("data", f"a graph with the model's {want} features "
                                        "per node", f"{int(data.num_features)} features")
        was = model.training
        model.eval()
        try:
            with torch.no_grad():
                out = model(data.x, data.edge_index)
        except RuntimeError as exc:
            raise InvalidParameterError(
                "model", "a model that runs as model(data.x, data.edge_index) on this graph",
                f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from exc
        finally:
            model.train(was)
    elif hasattr(model, "predict_logits"):
        out = node_logits(model, data)
    else:
        raise InvalidParameterError("model", "a node model: an nn.Module with forward(x, "
                                    "edge_index), a PrivateTraining or a trained gnnprivacy "
                                    "trainer", type(model).__name__)
    if not isinstance(out, torch.Tensor) or out.dim() != 2 or int(out.shape[0]) != n:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise InvalidParameterError("model", f"an output of one row of logits per node "
                                    f"(shape [{n}, num_classes])", got)
    if out.shape[1] < 2 or not torch.isfinite(out).all():
        raise InvalidParameterError("model", "finite logits of at least 2 classes per node",
                                    f"shape {tuple(out.shape)}, finite: "
                                    f"{bool(torch.isfinite(out).all())}")
    return out.detach().double().cpu()


# ----------------------------------------------------------------------------- sections
def link_stealing_section(post: np.ndarray, data, *, seed: int = 0, pairs: int = 2000,
                          n_hop: int | None = 2, n_boot: int = 200, attacks=(),
                          known_frac: float | None = None) -> dict:
    """He et al.'s Attack-0 on released posteriors, with a bootstrap interval, and
    ``auc_vs_nhop`` (linked pairs against pairs at distance ``n_hop``; ``None``: skip, it
    pairs every edge of the graph); ``variants``: the attacker-knowledge attacks ``attacks``
    (of 2, 3, 6) on the same pairs
    (`gnnprivacy.attacks.link_stealing.knowledge.knowledge_attacks`, ``known_frac`` of the
    pairs known to 3 and 6; default He et al.'s half)."""
    from gnnprivacy.attacks.link_stealing.he import NodeView, run_he_attack
    from gnnprivacy.attacks.link_stealing.protocols import auc_vs_nhop
    from gnnprivacy.attacks.lira import rank_auc
    from gnnprivacy.attacks.metrics import bootstrap_ci
    from gnnprivacy.datasets.link_splits import PairSet

    rng = np.random.default_rng(seed)
    ei = data.edge_index.numpy()
    und = ei[:, ei[0] < ei[1]]
    pick = rng.choice(und.shape[1], size=min(pairs, und.shape[1]), replace=False)
    pos_u, pos_w = und[0, pick], und[1, pick]
    n = int(data.num_nodes)
    linked = set(map(tuple, und.T.tolist()))
    neg = []
    while len(neg) < pos_u.size:
        a, b = sorted(rng.integers(0, n, size=2).tolist())
        if a != b and (a, b) not in linked:
            neg.append((a, b))
    neg = np.asarray(neg)
    ps = PairSet(np.concatenate([pos_u, neg[:, 0]]), np.concatenate([pos_w, neg[:, 1]]),
                 np.concatenate([np.ones(pos_u.size, int), np.zeros(len(neg), int)]))
    outcome = run_he_attack(0, NodeView(target=post), ps, seed=seed)
    m = outcome.metrics
    ci = bootstrap_ci(outcome.scores, outcome.labels, n_boot=n_boot, metric=rank_auc,
                      generator=np.random.default_rng(seed))
    out = {"attack": "He et al. Attack-0 (posterior correlation distance)",
           "auc": m["auc"], "tpr_at_1pct_fpr": m["tpr_at_1pct_fpr"], "pairs": int(len(ps)),
           "auc_ci95": [ci["low"], ci["high"]]}
    if n_hop is not None:
        nh = auc_vs_nhop(post, ei, n, n_hop, metric="correlation", seed=seed)
        out.update(auc_vs_nhop=nh["auc_vs_nhop"], n_hop=n_hop,
                   nhop_pairs=int(nh["nhop_pairs"]))
    if attacks:
        from gnnprivacy.attacks.link_stealing.knowledge import knowledge_attacks

        kw = {} if known_frac is None else {"known_frac": known_frac}
        out["variants"] = knowledge_attacks(post, data, ps, attacks=tuple(attacks), seed=seed,
                                            n_boot=n_boot, **kw)
    return out


def _calibrated(member: np.ndarray, nonmember: np.ndarray, *, seed: int, n_boot: int) -> dict:
    """AUC (with interval) and the TPR at thresholds set on a calibration half of the
    non-members for 1% and 0.1% FPR, with the FPR realised on the other half."""
    from gnnprivacy.attacks.lira import summarise_scores

    scores = np.concatenate([member, nonmember])
    labels = np.r_[np.ones(member.size, int), np.zeros(nonmember.size, int)]
    full = summarise_scores(scores, labels, seed=seed, n_boot=n_boot)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(nonmember.size)
    cal, held = nonmember[perm[: nonmember.size // 2]], nonmember[perm[nonmember.size // 2:]]
    out = {"auc": full["auc"], "auc_ci95": full["auc_ci95"], "roc": full["roc"],
           "members": int(member.size), "nonmembers": int(nonmember.size)}
    for key, fpr in (("1pct", 0.01), ("0.1pct", 0.001)):
        thr = float(np.quantile(cal, 1.0 - fpr, method="higher"))
        out[f"tpr_at_{key}_fpr"] = float((member > thr).mean())
        out[f"fpr_at_{key}_threshold"] = float((held > thr).mean())
    return out


def membership_sections(logits: torch.Tensor, y: torch.Tensor, members, nonmembers, *,
                        seed: int = 0, n_boot: int = 200) -> dict:
    """The loss and confidence threshold attacks (no retraining), members against the
    marked non-members."""
    loss = torch.nn.functional.cross_entropy(logits, y, reduction="none").numpy()
    conf = torch.softmax(logits, 1).max(1).values.numpy()
    m, nm = _mask(members, y.numel(), "members"), _mask(nonmembers, y.numel(), "nonmembers")
    out = {}
    for name, score in (("loss_threshold", -loss), ("confidence_threshold", conf)):
        out[name] = _calibrated(score[m], score[nm], seed=seed, n_boot=n_boot)
    return out


def posterior_sections(model, data, *, members=None, nonmembers=None, seed: int = 0,
                       link_stealing: bool = True, n_hop: int | None = 2, link_attacks=(),
                       known_frac: float | None = None) -> dict:
    """The sections of a card computed from the released model's outputs on ``data`` alone
    (shared by `assess_model` and the built-in card of a record): ``membership`` (threshold
    attacks), ``link_stealing`` (with the attacker-knowledge ``link_attacks``) and
    ``utility``; ``logits`` as well, for the callers."""
    logits = model_logits(model, data)
    members = data.train_mask if members is None else members
    nonmembers = data.test_mask if nonmembers is None else nonmembers
    out: dict[str, Any] = {"logits": logits, "membership": membership_sections(
        logits, data.y, members, nonmembers, seed=seed)}
    if link_stealing:
        post = torch.softmax(logits, 1).numpy()
        out["link_stealing"] = link_stealing_section(post, data, seed=seed, n_hop=n_hop,
                                                     attacks=link_attacks, known_frac=known_frac)
    test = _mask(data.test_mask, int(data.num_nodes), "data.test_mask")
    out["test_accuracy"] = float((logits.argmax(1) == data.y)[test].double().mean()) \
        if test.any() else None
    return out


def _mask(value, n: int, name: str) -> np.ndarray:
    """A node set (boolean mask or ids) as a boolean numpy mask of length ``n``."""
    t = torch.as_tensor(value)
    if t.dtype == torch.bool:
        if t.numel() != n:
            raise InvalidParameterError(name, f"a boolean mask of {n} nodes or node ids",
                                        f"a mask of {t.numel()}")
        mask = t.numpy().copy()
    else:
        ids = t.long().reshape(-1)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= n):
            raise InvalidParameterError(name, f"node ids in [0, {n})", "ids out of range")
        mask = np.zeros(n, dtype=bool)
        mask[ids.numpy()] = True
    if mask.sum() < 2:
        raise InvalidParameterError(name, "at least 2 nodes", int(mask.sum()))
    return mask


# ----------------------------------------------------------------------------- the claim
def claim_of(privacy) -> dict:
    """The claimed section of a card from ``privacy``: a `PrivateTraining`, a dict (its
    ``.privacy`` with ``epsilon`` added, or a record's ``privacy`` with ``epsilon``/
    ``delta``), a `RunRecord` or ``None`` (not private)."""
    if privacy is None:
        return {"epsilon": math.inf, "delta": None, "unit": None, "relation": None,
                "scope": "none: no differential privacy claimed, the card shows what a "
                         "release without DP leaks", "accounting_mode": None,
                "accountant": None, "unaccounted": []}
    epsilon = delta = None
    if hasattr(privacy, "engine") and hasattr(privacy, "privacy"):         # PrivateTraining
        epsilon, delta, p = float(privacy.epsilon), privacy.delta, privacy.privacy
    elif hasattr(privacy, "epsilon") and hasattr(privacy, "privacy"):      # RunRecord
        epsilon, delta, p = float(privacy.epsilon), privacy.delta, privacy.privacy or {}
    elif isinstance(privacy, dict):
        p = privacy
        epsilon, delta = p.get("epsilon"), p.get("delta")
    else:
        raise InvalidParameterError("privacy", "a PrivateTraining, its .privacy dict with "
                                    "'epsilon', a RunRecord or None", type(privacy).__name__)
    if epsilon is None:
        raise InvalidParameterError("privacy", "the claimed 'epsilon' (and 'delta')",
                                    sorted(p))
    epsilon = float(epsilon)
    return {"epsilon": epsilon, "delta": None if delta is None else float(delta),
            "unit": p.get("unit"), "relation": p.get("relation"),
            "scope": p.get("scope") or ("the released model" if math.isfinite(epsilon)
                                        else None),
            "accounting_mode": p.get("accounting_mode") or p.get("eps_mode"),
            "accountant": p.get("accountant"), "unaccounted": list(p.get("unaccounted", []))}


# ----------------------------------------------------------------------------- shadows
def _call_train_fn(train_fn, data, seed: int):
    out = train_fn(data, seed)
    if not is_model(out):
        raise InvalidParameterError(
            "train_fn", "a function train_fn(data, seed) returning the trained model (an "
            "nn.Module with forward(x, edge_index), or the PrivateTraining)",
            f"a function returning {type(out).__name__}")
    return out


def _shadow_data(data, mask: np.ndarray):
    d = data.clone()
    d.train_mask = torch.from_numpy(mask.copy())
    d.val_mask = torch.zeros_like(d.train_mask)
    d.test_mask = ~d.train_mask
    return d


def lira_section(train_fn, data, target_logits, pool: np.ndarray, target_members: np.ndarray,
                 *, shadows: int, seed: int, fixed_variance: bool = True, progress=None
                 ) -> dict:
    """Train ``shadows`` models with ``train_fn`` on random halves of ``pool`` and run LiRA
    (online, offline, and the released model scored against all shadows): the sections, and
    the released model's ``(member, non-member)`` scores (``None`` without both)."""
    from gnnprivacy._validation import check_int
    from gnnprivacy.attacks.lira import (half_memberships, lira_attack, lira_scores,
                                         logit_confidence, summarise_scores)

    k = check_int("shadows", shadows, low=4)
    n = int(data.num_nodes)
    pool_ids = np.flatnonzero(pool)
    mem = half_memberships(k, pool_ids, n, generator=np.random.default_rng(seed))
    phi = []
    for j in range(k):
        model = _call_train_fn(train_fn, _shadow_data(data, mem[j]), seed * 1_000_003 + j)
        phi.append(logit_confidence(model_logits(model, data), data.y))
        if progress is not None:
            progress(j)
    phi = np.stack(phi)
    out = {}
    for variant in ("online", "offline"):
        out[f"lira_{variant}"] = {**lira_attack(phi, mem, variant=variant, pool=pool_ids,
                                                fixed_variance=fixed_variance, seed=seed),
                                  "query": "full graph", "game": "train_fn on random halves"}
    x = logit_confidence(target_logits, data.y)
    s = lira_scores(x, phi, mem, variant="online", fixed_variance=fixed_variance)[pool_ids]
    lab = target_members[pool_ids]
    ok = np.isfinite(s)
    scores = None
    if 0 < lab[ok].sum() < ok.sum():
        out["lira_released_model"] = {**summarise_scores(s[ok], lab[ok], seed=seed),
                                      "variant": "online", "shadows": k}
        scores = (s[ok][lab[ok]], s[ok][~lab[ok]])
    return out, scores


def _code_audit(train_fn, data, seed: int, claimed: dict) -> dict:
    from gnnprivacy.auditing.code import code_audit

    def train():
        out = _call_train_fn(train_fn, data, seed)
        if hasattr(out, "engine") and hasattr(out, "privacy"):
            return {"epsilon": float(out.epsilon), "delta": float(out.delta)}
        return None

    eps, delta = claimed["epsilon"], claimed["delta"]
    kw = {} if eps is None or not math.isfinite(eps) else {"epsilon_claimed": eps,
                                                           "delta": delta}
    try:
        res = code_audit(train, seed=seed, **kw)
    except InvalidParameterError as exc:
        if exc.name != "train" or "no engine observed" not in str(exc):
            raise
        return {"note": "train_fn does not train through make_private: no code audit"}
    except KeyError:            # neither the claim nor a PrivateTraining to read it from
        raise InvalidParameterError("privacy", "the claimed epsilon and delta (train_fn "
                                    "returns the model, not its PrivateTraining)",
                                    None) from None
    return {k: res.to_dict()[k] for k in ("mode", "epsilon_claimed", "epsilon_lower_bound",
                                           "epsilon_estimate_gdp", "runs", "confidence",
                                           "violation")}


def _empirical(card: dict, scores_of: dict, *, delta: float | None, seed: int) -> None:
    """Empirical epsilon lower bounds from membership scores (heuristic, see the module)."""
    from gnnprivacy.auditing.bounds import empirical_epsilon

    d = delta if delta is not None else 1e-5
    claim = card["claimed"]["epsilon"]
    out = {}
    for name, (member, nonmember) in scores_of.items():
        if member.size < 4 or nonmember.size < 4:
            continue
        r = empirical_epsilon(member, nonmember, delta=d, selection="split",
                              generator=np.random.default_rng(seed))
        out[name] = {"epsilon_lower_bound": r["epsilon_lower_bound"], "delta": d,
                     "confidence": r["confidence"], "runs": r["runs"],
                     "exceeds_claim": bool(r["epsilon_lower_bound"] > claim)}
    if out:
        card["empirical"] = out


# ----------------------------------------------------------------------------- the card
def _check_data(data) -> None:
    from torch_geometric.data import Data

    if not isinstance(data, Data):
        raise InvalidParameterError("data", "a torch_geometric.data.Data", type(data).__name__)
    for attr in ("x", "y", "edge_index", "train_mask", "test_mask"):
        if getattr(data, attr, None) is None:
            raise InvalidParameterError("data", f"a graph with {attr}", "none")


def _link_attacks(value) -> tuple[int, ...]:
    """The attacker-knowledge variants asked for, checked before anything trains (Attack-0
    always runs; naming it is allowed)."""
    try:
        attacks = tuple(int(a) for a in value)
    except (TypeError, ValueError):
        attacks = None
    if attacks is None or any(a not in (0, 2, 3, 6) for a in attacks):
        raise InvalidParameterError("link_attacks", "He et al.'s attacks that apply to one "
                                    "released model, a subset of (0, 2, 3, 6) (1, 4, 5, 7 need "
                                    "a shadow dataset)", value)
    return tuple(sorted(set(attacks) - {0}))


def assess_model(model, data, *, train_fn=None, privacy=None, members=None, nonmembers=None,
                 shadows: int = 8, code_audit: bool = True, link_stealing: bool = True,
                 n_hop: int | None = 2, link_attacks=(2, 3, 6), known_frac: float | None = None,
                 fixed_variance: bool = True, seed: int = 0, name: str | None = None,
                 progress=None) -> dict[str, Any]:
    """The report card of ``model`` released on ``data`` (see the module docstring).

    Args:
        model: an ``nn.Module`` with ``forward(x, edge_index)`` giving one row of logits per
            node, a `PrivateTraining`, or a trained gnnprivacy trainer.
        data: the PyG graph it was trained on (``x``, ``y``, ``edge_index``, ``train_mask``,
            ``test_mask``).
        train_fn: ``train_fn(data, seed) -> model`` (or its `PrivateTraining`), training on
            ``data.train_mask``: LiRA's shadows and the code audit run it.
        privacy: the claim (`claim_of`); default the `PrivateTraining` passed as ``model``,
            else none (a non-private release).
        members, nonmembers: node masks or ids (default the training and the test nodes).
        shadows: LiRA's shadow models (``>= 4``, ``0``: no LiRA; only with ``train_fn``).
        code_audit: audit one run of ``train_fn`` with canaries (when it uses make_private).
        link_stealing, n_hop: the link-stealing section and the distance of its n-hop pairs.
        link_attacks: He et al.'s attacker-knowledge variants beside Attack-0, of 2 (node
            features), 3 (part of the graph), 6 (both); ``()``: Attack-0 only (see
            `gnnprivacy.attacks.link_stealing.knowledge`).
        known_frac: the share of the tested pairs known to attacks 3 and 6 (default He et
            al.'s half); they are tested on the rest.
        fixed_variance: LiRA's global variances (advised for few shadows).
        seed: seeds the attacks' draws and the shadows (shadow ``j`` gets
            ``seed * 1000003 + j``).
        name: the model's name on the card (default: its class name).
        progress: optional callable(j) after each shadow.
    """
    _check_data(data)
    if train_fn is not None and not callable(train_fn):
        raise InvalidParameterError("train_fn", "a function train_fn(data, seed) -> model",
                                    type(train_fn).__name__)
    link_attacks = _link_attacks(link_attacks)
    if privacy is None and hasattr(model, "engine") and hasattr(model, "privacy"):
        privacy = model
    claimed = claim_of(privacy)
    sec = posterior_sections(model, data, members=members, nonmembers=nonmembers, seed=seed,
                             link_stealing=link_stealing, n_hop=n_hop, link_attacks=link_attacks,
                             known_frac=known_frac)
    label = name or type(_unwrap(model)).__name__
    card: dict[str, Any] = {"run_id": label,
                            "method": label,
                            "dataset": str(getattr(data, "name", None) or "custom graph"),
                            "claimed": claimed, "membership": sec["membership"],
                            "utility": {"test_accuracy": sec["test_accuracy"]}}
    if "link_stealing" in sec:
        card["link_stealing"] = {**sec["link_stealing"], "model": "the released posteriors"}
    n = int(data.num_nodes)
    m = _mask(data.train_mask if members is None else members, n, "members")
    nm = _mask(data.test_mask if nonmembers is None else nonmembers, n, "nonmembers")
    loss = -torch.nn.functional.cross_entropy(sec["logits"], data.y, reduction="none").numpy()
    scores_of = {"loss_threshold": (loss[m], loss[nm])}
    if train_fn is not None and shadows:
        lira, released = lira_section(train_fn, data, sec["logits"], m | nm, m,
                                      shadows=shadows, seed=seed,
                                      fixed_variance=fixed_variance, progress=progress)
        card["membership"].update(lira)
        if released is not None:
            scores_of["lira_released_model"] = released
    if train_fn is not None and code_audit:
        audit = _code_audit(train_fn, data, seed, claimed)
        card["audit" if "mode" in audit else "code_audit"] = audit
    _empirical(card, scores_of, delta=claimed["delta"], seed=seed)
    return card


# ----------------------------------------------------------------------------- several models
def _model_entries(models) -> list[tuple[str, Any, Any, Any]]:
    """``[(name, model, privacy, train_fn)]`` from a list of models or a dict ``name ->
    model`` or ``name -> {"model": ..., "privacy": ..., "train_fn": ...}``."""
    if isinstance(models, dict):
        items = list(models.items())
    elif isinstance(models, (list, tuple)):
        items = [(None, m) for m in models]
    else:
        raise InvalidParameterError("models", "a list of models or a dict name -> model",
                                    type(models).__name__)
    if not items:
        raise InvalidParameterError("models", "at least one model", "an empty "
                                    + type(models).__name__)
    entries, seen = [], {}
    for i, (name, value) in enumerate(items):
        spec = dict(value) if isinstance(value, dict) else {"model": value}
        unknown = sorted(set(spec) - {"model", "privacy", "train_fn"})
        if unknown or "model" not in spec:
            raise InvalidParameterError(f"models[{name if name is not None else i}]",
                                        "a model, or a dict with 'model' and optionally "
                                        "'privacy' and 'train_fn'", sorted(spec))
        model = spec["model"]
        if not is_model(model):
            raise InvalidParameterError(f"models[{name if name is not None else i}]",
                                        "a node model: an nn.Module with forward(x, "
                                        "edge_index), a PrivateTraining or a trained gnnprivacy "
                                        "trainer", type(model).__name__)
        label = str(name) if name is not None else type(_unwrap(model)).__name__
        seen[label] = seen.get(label, 0) + 1
        entries.append([label, model, spec.get("privacy"), spec.get("train_fn")])
    counts: dict[str, int] = {}
    for entry in entries:                   # two models of one class: Net #1, Net #2
        if seen[entry[0]] > 1:
            counts[entry[0]] = counts.get(entry[0], 0) + 1
            entry[0] = f"{entry[0]} #{counts[entry[0]]}"
    return [tuple(e) for e in entries]


def assess_models(models, data, **options) -> dict[str, Any]:
    """One report card for several models released on the same graph ``data``: each model's
    card (`assess_model`, the same options for all) and a comparison (render it with
    `gnnprivacy.auditing.report_card.card_to_markdown` / ``card_to_html``: a table with every
    attack's AUC, the membership ROC curves of the models overlaid and the AUCs against the
    claimed epsilon, the models without DP at the right end).

    Args:
        models: a list of models (named by class), or a dict ``name -> model`` or ``name ->
            {"model": ..., "privacy": ..., "train_fn": ...}``: each model with its own claim
            (default: its `PrivateTraining`'s, else none) and ``train_fn`` (LiRA, code audit).
        data: the graph every model was trained on.
        options: `assess_model`'s options other than ``privacy``, ``train_fn`` and ``name``.

    Returns:
        ``{"dataset": ..., "cards": [card, ...]}`` in the order given.

    Raises:
        InvalidParameterError: no models, ``privacy`` / ``train_fn`` / ``name`` given for
            all (each model states its own), or a model that does not run on ``data`` (named;
            checked for every model before anything trains).
    """
    for key in ("privacy", "train_fn", "name"):
        if key in options:
            raise InvalidParameterError(key, "given per model with several models (models="
                                        "{name: {'model': m, 'privacy': ..., 'train_fn': "
                                        "...}})", f"{key}= for all {len(models)} models"
                                        if hasattr(models, "__len__") else key)
    entries = _model_entries(models)
    _check_data(data)
    want = int(data.num_features)
    for name, model, _, _ in entries:       # every model runs on this graph, before training
        inner = _unwrap(model)
        size = _expected_features(inner) if isinstance(inner, torch.nn.Module) else None
        if size is not None and size != want:
            raise InvalidParameterError("models", f"models of one graph, each taking its {want} "
                                        "features per node", f"{name!r} takes {size}")
        try:
            model_logits(model, data)
        except InvalidParameterError as exc:
            raise InvalidParameterError(exc.name, exc.expected, exc.received,
                                        where=f"model {name!r}") from None
    cards = [assess_model(model, data, privacy=privacy, train_fn=train_fn, name=name, **options)
             for name, model, privacy, train_fn in entries]
    return {"dataset": cards[0]["dataset"], "cards": cards}
