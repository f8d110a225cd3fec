import pytest

from gnnprivacy.errors import InvalidParameterError, UnknownNameError
from gnnprivacy.method.config import RunConfig, load_yaml_config, resolve_config


def test_fractions_must_sum_to_at_most_one():
    with pytest.raises(InvalidParameterError, match="fractions summing to <= 1"):
        RunConfig(train_frac=0.8, val_frac=0.2, test_frac=0.2)
    RunConfig(train_frac=0.8, val_frac=0.0, test_frac=0.2)


def test_missing_data_root_is_named(tmp_path):
    with pytest.raises(InvalidParameterError, match="data_root"):
        RunConfig(data_root=str(tmp_path / "nope"))


def test_unknown_method_lists_choices():
    with pytest.raises(UnknownNameError, match="gcn"):
        resolve_config({"method": "no-such-method"})


def test_unknown_key_names_key_and_valid_ones():
    with pytest.raises(UnknownNameError) as err:
        resolve_config({"method": "gcn", "bogus_key": 1})
    assert "bogus_key" in str(err.value) and "dataset" in str(err.value)


def test_yaml_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(InvalidParameterError, match="valid YAML"):
        load_yaml_config(bad)
    lst = tmp_path / "list.yaml"
    lst.write_text("- 1\n- 2\n")
    with pytest.raises(InvalidParameterError, match="mapping"):
        load_yaml_config(lst)


def test_dataset_args_parse():
    from gnnprivacy.method.config import parse_dataset_args

    assert parse_dataset_args("num_nodes=200,homophily=0.9,name=x,flag=true") == {
        "num_nodes": 200, "homophily": 0.9, "name": "x", "flag": True}
    with pytest.raises(InvalidParameterError, match="dataset_args"):
        RunConfig(dataset_args="num_nodes")
