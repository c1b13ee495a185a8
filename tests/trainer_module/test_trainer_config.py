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
    import typing

    allowed = {
        "int",
        "float",
        "str",
        "bool",
        "list[str]",
        "list[float]",
        "str | None",
        "int | None",
        "float | None",
    }

    def check(cls):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.type in allowed:
                continue
            assert f.type.endswith("Config"), f"{cls.__name__}.{f.name}: {f.type}"
            check(hints[f.name])

    check(TrainerConfig)


def _ranking(fusion: dict | None = None, **feedback) -> dict:
    """The `ranking` section of a trainer config: `fusion` keys, feedback keys."""
    return {"ranking": {"fusion": fusion or {}, "feedback": feedback}}


DUAL = {"model": "dual_encoder"}


@pytest.mark.parametrize(
    "data, message",
    [
        (_ranking(mode="tuned"), "ranking.feedback.mode tuned needs model=dual_encoder"),
        (_ranking(mode="rocchio"), "ranking.feedback.mode must be one of"),
        ({**DUAL, **_ranking({"mode": "fixed"}, mode="tuned")}, "needs ranking.fusion.mode tuned"),
        ({**DUAL, **_ranking({"mode": "none"}, mode="fixed")}, "fixed needs ranking.fusion.mode"),
        ({**DUAL, **_ranking(mode="fixed", docs=0)}, "changes nothing"),
        ({**DUAL, **_ranking(weight=-1)}, r"ranking\.feedback\.weight must be >= 0"),
        ({**DUAL, **_ranking(neighbours=-1)}, r"ranking\.feedback\.neighbours must be"),
        ({**DUAL, **_ranking(source="dense")}, r"ranking\.feedback\.source must be one of"),
        (_ranking({"mode": "mean"}), r"ranking\.fusion\.mode must be one of"),
        (_ranking({"alpha": 1.5}), r"ranking\.fusion\.alpha must be in \[0, 1\]"),
    ],
)
def test_feedback_needs_a_dual_encoder_and_fusion(data, message):
    with pytest.raises(ValueError, match=message):
        TrainerConfig.from_dict({"dual_encoder": {"checkpoint_dir": "/ckpt"}, **data})


def test_the_ranking_section_and_its_fixed_feedback_setting():
    cfg = TrainerConfig.from_dict(
        {
            **DUAL,
            "dual_encoder": {"checkpoint_dir": "/ckpt"},
            **_ranking({"mode": "fixed", "alpha": 0.3}, mode="fixed", docs=5, source="fused"),
        }
    )
    assert (cfg.ranking.fusion.mode, cfg.ranking.fusion.alpha) == ("fixed", 0.3)
    assert cfg.ranking.feedback.setting() == {
        "docs": 5,
        "weight": 0.5,
        "neighbours": 0,
        "neighbour_weight": 0.3,
        "from": "fused",
    }
    assert TrainerConfig().ranking.fusion.mode == "tuned"
    assert TrainerConfig().ranking.feedback.mode == "none"


@pytest.mark.parametrize(
    "old, new",
    [
        ("fusion", "ranking.fusion.mode"),
        ("fusion_alpha", "ranking.fusion.alpha"),
        ("feedback", "ranking.feedback.mode"),
        ("feedback_from", "ranking.feedback.source"),
        ("feedback_docs", "ranking.feedback.docs"),
        ("feedback_weight", "ranking.feedback.weight"),
        ("feedback_neighbours", "ranking.feedback.neighbours"),
        ("feedback_neighbour_weight", "ranking.feedback.neighbour_weight"),
    ],
)
def test_a_flat_key_of_earlier_versions_names_its_new_place(old, new, tmp_path):
    """The YAML of an earlier version fails on each moved key with the key to write instead,
    from the file and from --set (rankcore/config_loader.py's MOVED_KEYS)."""
    from pipelines.config import load_config
    from rankcore.config_loader import ConfigError

    with pytest.raises(ConfigError, match=rf"^trainer config: {old} is now {new}$"):
        TrainerConfig.from_dict({old: 1})
    path = tmp_path / "old.yaml"
    path.write_text(f"trainer:\n  {old}: 1\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert f"{path}: trainer.{old} is now trainer.{new}" in error.value.problems
    path.write_text("trainer: {}\n")
    with pytest.raises(ConfigError) as error:
        load_config(path, [f"trainer.{old}=1"])
    assert f"--set trainer.{old}: trainer.{old} is now trainer.{new}" in error.value.problems
    assert not any("unknown key" in line for line in error.value.problems)
