import dataclasses

import pytest

from trainer_module.config import TrainerConfig


def test_defaults_are_valid_and_round_trip():
    cfg = TrainerConfig()
    assert TrainerConfig.from_dict(cfg.to_dict()) == cfg
    assert TrainerConfig.from_dict(None) == cfg


def test_nested_sections_from_dict():
    cfg = TrainerConfig.from_dict({"model": "conv_knrm", "conv_knrm": {"max_ngram": 2}})
    assert cfg.conv_knrm.max_ngram == 2
    assert cfg.conv_knrm.filters == TrainerConfig().conv_knrm.filters


@pytest.mark.parametrize(
    "data, field",
    [
        ({"train_steps": -1}, "train_steps"),
        ({"batch_size": 0}, "batch_size"),
        ({"loss": "hinge"}, "loss"),
        ({"model": "bert_large"}, "model"),
        ({"decay": "step"}, "decay"),
        ({"strategy": "tpu"}, "tpu_name"),
        ({"knrm": {"n_kernels": 1}}, "knrm.n_kernels"),
        ({"transformer": {"hidden_size": 30, "num_heads": 4}}, "transformer.hidden_size"),
        ({"bucketing": {"token_budget": 0}}, "bucketing.token_budget"),
        ({"grad_accumulation_steps": 0}, "grad_accumulation_steps"),
        ({"max_loss": 0}, "max_loss"),
        ({"model": "bert"}, "bert.checkpoint_dir"),
        ({"bert": {"head_dropout": 1.0}}, "bert.head_dropout"),
        ({"bert": {"attention_dropout": -0.1}}, "bert.attention_dropout"),
    ],
)
def test_impossible_values_name_the_field(data, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        TrainerConfig.from_dict(data)


def test_unknown_keys_rejected_with_path():
    with pytest.raises(ValueError, match=r"knrm\.embeding_dim"):
        TrainerConfig.from_dict({"knrm": {"embeding_dim": 3}})


def test_field_types_are_plain():
    """The pipeline YAML embeds this config: only plain types and nested config dataclasses."""
    import trainer_module.config as config_module

    allowed = {
        "int",
        "float",
        "str",
        "bool",
        "list[str]",
        "str | None",
        "int | None",
        "float | None",
    }

    def check(cls):
        for f in dataclasses.fields(cls):
            if f.type in allowed:
                continue
            assert f.type.endswith("Config"), f"{cls.__name__}.{f.name}: {f.type}"
            check(getattr(config_module, f.type))

    check(TrainerConfig)


@pytest.mark.parametrize(
    "data, message",
    [
        ({"feedback": "tuned"}, "feedback tuned needs model=dual_encoder"),
        ({"feedback": "rocchio"}, "feedback must be one of"),
        ({"model": "dual_encoder", "feedback": "tuned", "fusion": "fixed"}, "needs fusion=tuned"),
        ({"model": "dual_encoder", "feedback": "fixed", "fusion": "none"}, "fixed needs fusion"),
        ({"model": "dual_encoder", "feedback": "fixed", "feedback_docs": 0}, "changes nothing"),
        ({"model": "dual_encoder", "feedback_weight": -1}, "feedback_weight must be >= 0"),
        ({"model": "dual_encoder", "feedback_neighbours": -1}, "feedback_neighbours must be"),
        ({"model": "dual_encoder", "feedback_from": "dense"}, "feedback_from must be one of"),
    ],
)
def test_feedback_needs_a_dual_encoder_and_fusion(data, message):
    with pytest.raises(ValueError, match=message):
        TrainerConfig.from_dict({"dual_encoder": {"checkpoint_dir": "/ckpt"}, **data})
