"""A saved model holds only what its record's epsilon covers (issue 32, part 3).

GAP's saved file once held ``features_``: the noisy aggregates *and* the hop-0 block, each
node's own encoder embedding without noise. With the released encoder, that block tells a
training node's true feature vector from a wrong candidate every time. The distinguisher
below reads only the saved file and the two candidates; the broken control saves the hop-0
block again and must be caught.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.nn import functional as F

from gnnprivacy.datasets import load_dataset
from gnnprivacy.training import persist
from gnnprivacy.training.gap import GAPTrainer
from gnnprivacy.training.node_dp import DPGNNTrainer, DPMLPTrainer, HeterPoissonTrainer

GAP_FAST = dict(encoder_epochs=2, epochs=2, hidden=8, max_degree=2, epsilon=8.0)


@pytest.fixture(scope="module")
def csbm():
    return load_dataset("csbm", num_nodes=300, seed=0)


@pytest.fixture(scope="module")
def gap(csbm):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return GAPTrainer(**GAP_FAST, generator=0).fit(csbm)


def hop0_distinguisher(path, data) -> float:
    """Fraction of training nodes whose true feature vector the file tells from a wrong
    candidate (the next training node's features): the candidate whose embedding by the saved
    encoder lies nearer to one of the node's saved ``hidden``-wide rows blocks wins."""
    blob = torch.load(path, weights_only=True)
    tensors = blob["tensors"]
    hidden = int(tensors["encoder_.0.weight"].shape[0])
    encoder = torch.nn.Sequential(torch.nn.Linear(tensors["encoder_.0.weight"].shape[1], hidden),
                                  torch.nn.SELU(), torch.nn.Linear(hidden, hidden))
    encoder.load_state_dict({k[len("encoder_."):]: v for k, v in tensors.items()
                             if k.startswith("encoder_.")})
    n = int(data.num_nodes)
    per_node = [t for k, t in tensors.items() if t.dim() == 2 and t.shape[0] == n
                and t.shape[1] % hidden == 0]
    blocks = [t[:, i:i + hidden] for t in per_node for i in range(0, t.shape[1], hidden)]
    if not blocks:
        return 0.5  # nothing per node in the file: a coin flip
    train = data.train_mask.nonzero().flatten()
    wrong = train.roll(1)
    with torch.no_grad():
        true_e = F.normalize(encoder(data.x[train].float()), dim=1)
        wrong_e = F.normalize(encoder(data.x[wrong].float()), dim=1)
    saved = torch.stack([b[train] for b in blocks])                    # [blocks, nodes, hidden]
    d_true = (saved - true_e).norm(dim=2).min(dim=0).values
    d_wrong = (saved - wrong_e).norm(dim=2).min(dim=0).values
    return float((d_true < d_wrong).float().mean())


def test_gap_saved_model_does_not_reveal_training_features(gap, csbm, tmp_path):
    path = persist.save_model_file(tmp_path / "gap.model.pt", trainer=gap, data=csbm,
                                   method="gap")
    success = hop0_distinguisher(path, csbm)
    assert success < 0.7, success                     # 0.5 is a coin flip; 1.0 was the leak
    assert "features_" not in torch.load(path, weights_only=True)["tensors"]


def test_broken_control_saving_hop0_is_caught(gap, csbm, tmp_path, monkeypatch):
    """The old file: the hop-0 block saved beside the aggregates (`features_`)."""
    hop0 = gap._hop0(csbm.x.float())
    gap_entry = persist._TRAINERS["GAPTrainer"]
    monkeypatch.setitem(persist._TRAINERS, "GAPTrainer",
                        (*gap_entry[:2], (*gap_entry[2], "features_"), gap_entry[3]))
    monkeypatch.setattr(gap, "features_", torch.cat([hop0, gap.aggregates_], dim=1),
                        raising=False)
    path = persist.save_model_file(tmp_path / "old.model.pt", trainer=gap, data=csbm,
                                   method="gap")
    assert hop0_distinguisher(path, csbm) == 1.0


def test_gap_predictions_and_an_old_file_with_features(gap, csbm, tmp_path):
    """Predictions on the fitted graph are unchanged by keeping only the aggregates, and a
    file written with ``features_`` still loads (its hop-0 block dropped)."""
    path = persist.save_model_file(tmp_path / "gap.model.pt", trainer=gap, data=csbm,
                                   method="gap")
    loaded, _ = persist.load_model_file(path)
    assert torch.equal(loaded.predict_logits(csbm), gap.predict_logits(csbm))
    blob = torch.load(path, weights_only=True)
    aggregates = blob["tensors"].pop("aggregates_")
    blob["tensors"]["features_"] = torch.cat([gap._hop0(csbm.x.float()), aggregates], dim=1)
    torch.save(blob, tmp_path / "old.model.pt")
    old, _ = persist.load_model_file(tmp_path / "old.model.pt")
    assert not hasattr(old, "features_") and torch.equal(old.aggregates_, aggregates)
    assert torch.equal(old.predict_logits(csbm), gap.predict_logits(csbm))


FAST = {
    HeterPoissonTrainer: dict(q_b=0.2, steps=3, noise_multiplier=1.0, degree_public=True,
                              hidden_channels=8),
    DPGNNTrainer: dict(max_degree=3, batch_size=32, steps=3, noise_multiplier=1.0,
                       hidden_channels=8),
    DPMLPTrainer: dict(batch_size=32, steps=3, noise_multiplier=1.0, hidden_channels=8),
}


@pytest.mark.parametrize("cls", list(FAST), ids=lambda c: c.__name__)
def test_every_saved_weight_is_a_noisy_parameter(cls, csbm, tmp_path):
    """The node-DP trainers' files hold the model's parameters (each released through the
    noisy optimizer) and nothing per node; a buffer (updated without noise) would fail."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = cls(**FAST[cls], generator=0).fit(csbm)
    path = persist.save_model_file(tmp_path / "m.pt", trainer=trainer, data=csbm, method="x")
    saved = set(torch.load(path, weights_only=True)["tensors"])
    params = {f"model_.{k}" for k, _ in trainer.model_.named_parameters()}
    extra = saved - params                 # beyond the noisy parameters: listed, or a failure
    assert params <= saved and extra <= LISTED.get(cls, set()), extra
    unaccounted = " ".join(trainer.privacy_record()["unaccounted"])
    assert all(name in unaccounted for name in extra), (extra, unaccounted)


#: what a trainer's file holds beyond its parameters, each named in privacy.unaccounted
LISTED = {HeterPoissonTrainer: {"train_mask_"}}   # the run's training nodes, for private inference


def test_a_buffer_in_the_model_is_caught(csbm, tmp_path):
    """Broken control of the test above: a model with a buffer saves more than parameters."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = DPMLPTrainer(**FAST[DPMLPTrainer], generator=0).fit(csbm)
    trainer.model_.register_buffer("running_mean", csbm.x.mean(0))
    path = persist.save_model_file(tmp_path / "m.pt", trainer=trainer, data=csbm, method="x")
    saved = set(torch.load(path, weights_only=True)["tensors"])
    assert saved != {f"model_.{k}" for k, _ in trainer.model_.named_parameters()}
