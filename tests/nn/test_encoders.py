"""Tests of gnnprivacy.nn.encoders: shapes, reprs, validation, training, dropout, determinism."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.data import Data

from gnnprivacy.errors import InvalidParameterError, UnknownNameError
from gnnprivacy.nn import ACTIVATIONS, SPARSE_INPUT_ENCODERS, Encoder, build_encoder, list_encoders
from gnnprivacy.nn.sparse import feature_dropout, index_rows, to_sparse_csr

ENCODERS = ["gcn", "sage", "gin", "gat", "mlp"]


def tiny_graph(n: int = 60, num_classes: int = 3, num_features: int = 8, seed: int = 0) -> Data:
    """Homophilous random graph with noisy class-indicator features."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % num_classes
    x = torch.randn(n, num_features, generator=g)
    x[torch.arange(n), y] += 1.0
    src = torch.randint(0, n, (4 * n,), generator=g)
    dst = (src + num_classes * torch.randint(1, 4, (4 * n,), generator=g)) % n  # same class
    edge_index = torch.cat([torch.stack([src, dst]), torch.stack([dst, src])], dim=1)
    return Data(x=x, y=y, edge_index=edge_index)


def test_registry_lists_the_five_encoders():
    assert list_encoders() == sorted(ENCODERS)


@pytest.mark.parametrize("name", ENCODERS)
@pytest.mark.parametrize("num_layers", [1, 2, 3])
def test_output_shape(name, num_layers):
    data = tiny_graph()
    model = build_encoder(name, 8, 3, hidden_channels=16, num_layers=num_layers, heads=4,
                          generator=torch.Generator().manual_seed(0))
    assert isinstance(model, Encoder)
    out = model(data.x, data.edge_index)
    assert out.shape == (data.num_nodes, 3)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", ENCODERS)
def test_repr_names_the_configuration(name):
    model = build_encoder(name, 8, 3, hidden_channels=16, num_layers=2, activation="elu",
                          dropout=0.25, heads=4)
    text = repr(model)
    assert "\n" not in text
    for piece in (f"name={name!r}", "in_channels=8", "out_channels=3", "hidden_channels=16",
                  "num_layers=2", "activation='elu'", "dropout=0.25", "parameters="):
        assert piece in text
    assert ("heads=4" in text) == (name == "gat")
    assert f"parameters={model.num_parameters()}" in text


def test_unknown_encoder_lists_choices():
    with pytest.raises(UnknownNameError) as info:
        build_encoder("gnn", 8, 3)
    for name in ENCODERS:
        assert name in str(info.value)
    assert "'gnn'" in str(info.value)


def test_unknown_activation_lists_choices():
    with pytest.raises(UnknownNameError) as info:
        build_encoder("gcn", 8, 3, activation="swishy")
    assert "relu" in str(info.value) and "'swishy'" in str(info.value)


@pytest.mark.parametrize("kwargs, name", [
    ({"num_layers": 0}, "num_layers"),
    ({"hidden_channels": 0}, "hidden_channels"),
    ({"dropout": 1.0}, "dropout"),
    ({"dropout": -0.1}, "dropout"),
    ({"input_dropout": 1.5}, "input_dropout"),
])
def test_invalid_sizes_and_probabilities(kwargs, name):
    with pytest.raises(InvalidParameterError, match=name):
        build_encoder("gcn", 8, 3, **kwargs)


def test_invalid_channels_and_heads():
    with pytest.raises(InvalidParameterError, match="in_channels"):
        build_encoder("gcn", 0, 3)
    with pytest.raises(InvalidParameterError, match="out_channels"):
        build_encoder("gcn", 8, 0)
    with pytest.raises(InvalidParameterError, match="multiple of heads"):
        build_encoder("gat", 8, 3, hidden_channels=10, heads=4)
    with pytest.raises(InvalidParameterError, match="heads"):
        build_encoder("gat", 8, 3, heads=0)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_every_listed_activation_builds(activation):
    data = tiny_graph()
    model = build_encoder("gcn", 8, 3, hidden_channels=8, activation=activation)
    assert model(data.x, data.edge_index).shape == (data.num_nodes, 3)


def test_gat_heads_are_configurable():
    model = build_encoder("gat", 8, 3, hidden_channels=12, num_layers=2, heads=3)
    first, last = model.model.convs
    assert first.heads == 3 and first.concat and first.out_channels == 4
    assert last.heads == 3 and not last.concat and last.out_channels == 3


@pytest.mark.parametrize("name", ENCODERS)
def test_loss_decreases_on_tiny_graph(name):
    data = tiny_graph()
    model = build_encoder(name, 8, 3, hidden_channels=16, dropout=0.0, heads=4,
                          generator=torch.Generator().manual_seed(1))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(30):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data.x, data.edge_index), data.y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach().item())
    assert losses[-1] < 0.7 * losses[0]


@pytest.mark.parametrize("name", ENCODERS)
def test_dropout_only_in_training_mode(name):
    data = tiny_graph()
    model = build_encoder(name, 8, 3, hidden_channels=16, dropout=0.5, heads=4)
    model.eval()
    assert torch.equal(model(data.x, data.edge_index), model(data.x, data.edge_index))
    model.train()  # positive control: dropout active -> two passes differ
    assert not torch.equal(model(data.x, data.edge_index), model(data.x, data.edge_index))


def test_mlp_ignores_the_graph_and_gnns_do_not():
    data = tiny_graph()
    other = torch.flip(data.edge_index, dims=[1])[:, : data.edge_index.shape[1] // 2]
    mlp = build_encoder("mlp", 8, 3).eval()
    assert torch.equal(mlp(data.x, data.edge_index), mlp(data.x, other))
    assert torch.equal(mlp(data.x), mlp(data.x, other))
    gcn = build_encoder("gcn", 8, 3).eval()
    assert not torch.allclose(gcn(data.x, data.edge_index), gcn(data.x, other))
    with pytest.raises(InvalidParameterError, match="edge_index"):
        gcn(data.x)


@pytest.mark.parametrize("name", ENCODERS)
def test_initialisation_is_deterministic_for_a_seed(name):
    def params(seed):
        model = build_encoder(name, 8, 3, heads=4, generator=torch.Generator().manual_seed(seed))
        return [p.detach().clone() for p in model.parameters()]

    a, b, c = params(7), params(7), params(8)
    assert all(torch.equal(u, v) for u, v in zip(a, b))
    assert not all(torch.equal(u, v) for u, v in zip(a, c))


def test_seeded_build_leaves_global_rng_untouched():
    state = torch.get_rng_state()
    build_encoder("gat", 8, 3, heads=4, generator=torch.Generator().manual_seed(3))
    assert torch.equal(state, torch.get_rng_state())
    build_encoder("gat", 8, 3, heads=4)  # control: without a generator the global RNG is used
    assert not torch.equal(state, torch.get_rng_state())


# -- sparse CSR features ----------------------------------------------------------------------
def sparse_graph(seed: int = 0) -> Data:
    data = tiny_graph(seed=seed, num_features=40)
    g = torch.Generator().manual_seed(seed)
    data.x = (torch.rand(data.num_nodes, 40, generator=g) < 0.05).float()
    data.x[torch.arange(data.num_nodes), data.y] = 1.0
    return data


@pytest.mark.parametrize("name", sorted(SPARSE_INPUT_ENCODERS))
def test_sparse_input_gives_the_dense_output(name):
    data = sparse_graph()
    model = build_encoder(name, 40, 3, hidden_channels=16, heads=4).eval()
    dense = model(data.x, data.edge_index)
    sparse = model(to_sparse_csr(data.x), data.edge_index)
    assert torch.allclose(dense, sparse, atol=1e-5)


@pytest.mark.parametrize("name", ["sage", "gin"])
def test_sparse_input_rejected_by_aggregate_first_encoders(name):
    data = sparse_graph()
    model = build_encoder(name, 40, 3, hidden_channels=16)
    with pytest.raises(InvalidParameterError, match="dense"):
        model(to_sparse_csr(data.x), data.edge_index)


def test_index_rows_of_csr_matches_dense():
    x = sparse_graph().x
    rows = torch.tensor([5, 0, 5, 59, 13])
    assert torch.equal(index_rows(to_sparse_csr(x), rows).to_dense(), x[rows])
    assert torch.equal(index_rows(x, rows), x[rows])
    assert index_rows(to_sparse_csr(x), rows[:0]).shape == (0, 40)


def _dropout_rate_ok(out: torch.Tensor, x: torch.Tensor, p: float) -> bool:
    """Zeros stay zero, survivors scaled by 1/(1-p), drop rate p within 5 std devs."""
    nz = x != 0
    kept = out[nz] != 0
    if (out[~nz] != 0).any() or not torch.allclose(out[nz][kept], x[nz][kept] / (1 - p)):
        return False
    tol = 5 * (p * (1 - p) / int(nz.sum())) ** 0.5
    return abs((1 - kept.double().mean().item()) - p) <= tol


@pytest.mark.statistical
def test_sparse_feature_dropout_drops_stored_entries_at_rate_p():
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(400, 300, generator=g) < 0.05) * (1.0 + torch.rand(400, 300, generator=g))
    csr = to_sparse_csr(x)
    assert feature_dropout(csr, 0.3, training=False) is csr
    with torch.random.fork_rng():
        torch.manual_seed(0)
        out = feature_dropout(csr, 0.3, training=True).to_dense()
        wrong = feature_dropout(csr, 0.4, training=True).to_dense() * 0.6 / 0.7
    assert _dropout_rate_ok(out, x, 0.3)
    assert not _dropout_rate_ok(wrong, x, 0.3)  # positive control: rate 0.4, rescaled as 0.3


@pytest.mark.statistical
def test_bulk_dense_feature_dropout_has_dropouts_distribution_and_seed():
    """Large dense inputs take the numpy path: rate p, kept entries scaled by 1/(1-p),
    reproducible under torch.manual_seed, same dtype; small ones stay on F.dropout."""
    from gnnprivacy.nn import sparse as sp

    g = torch.Generator().manual_seed(1)
    x = 1.0 + torch.rand(1100, 1000, generator=g)            # 1.1e6 entries, all non-zero
    assert sp._bulk_dense(x) and not sp._bulk_dense(x[:10])
    with torch.random.fork_rng():
        torch.manual_seed(0)
        out = feature_dropout(x, 0.3, training=True)
        torch.manual_seed(0)
        again = feature_dropout(x, 0.3, training=True)
        wrong = feature_dropout(x, 0.4, training=True) * 0.6 / 0.7
    assert torch.equal(out, again) and out.dtype == x.dtype and out.shape == x.shape
    kept = out != 0
    torch.testing.assert_close(out[kept], x[kept] / 0.7)
    assert _dropout_rate_ok(out, x, 0.3)
    assert not _dropout_rate_ok(wrong, x, 0.3)  # positive control: rate 0.4, rescaled as 0.3
    assert torch.equal(x, 1.0 + torch.rand(1100, 1000, generator=torch.Generator().manual_seed(1)))
    x64 = x.double()
    assert feature_dropout(x64, 0.5, training=True).dtype == torch.float64
