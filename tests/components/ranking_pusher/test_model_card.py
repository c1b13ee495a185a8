"""The model card's model section: how the model was trained and what it serves is what the
Trainer's recipe wrote beside the SavedModel, printed as it is (no recipe flag read here)."""

from __future__ import annotations

from components.ranking_pusher import model_card
from trainer_module.config import TrainerConfig
from trainer_module.recipes import recipe_for


def _card(trainer: dict, description: list[str] | None) -> dict:
    return model_card.build(
        version="5",
        serving_path="/srv/5",
        model_uri="/m",
        model_id=3,
        evaluation=None,
        evaluation_uri=None,
        datagen_summary=None,
        pipeline_config={"trainer": trainer},
        model_description=description,
    )


def test_card_prints_the_recipes_description_of_a_companion_encoder() -> None:
    """A dual encoder with a companion (trainer recipe.frozen_documents): the card says which
    checkpoint is appended and how the two cosines are weighted, from the recipe's own lines."""
    trainer = {
        "model": "dual_encoder",
        "dual_encoder": {"checkpoint_dir": "/ckpt/minilm"},
        "loss": "listwise_softmax",
        "recipe": {
            "type": "frozen_documents",
            "frozen_documents": {
                "companion_checkpoint_dir": "/ckpt/mpnet",
                "companion_weight": 0.3,
            },
        },
    }
    description = recipe_for(TrainerConfig.from_dict(trainer)).describe()
    card = _card(trainer, description)
    assert card["model_description"] == description
    md = model_card.markdown(card)
    assert "- recipe `frozen_documents`: the query tower trained against" in md
    assert "- companion encoder `/ckpt/mpnet`, used as it is" in md
    assert "a score 0.70 * the model's cosine + 0.30 * the companion's" in md
    trainer["recipe"]["frozen_documents"]["companion_checkpoint_dir"] = None
    plain = recipe_for(TrainerConfig.from_dict(trainer)).describe()
    assert "companion encoder" not in model_card.markdown(_card(trainer, plain))


def test_card_without_a_description_prints_none() -> None:
    """A model exported before recipes described themselves: no recipe line, nothing else."""
    md = model_card.markdown(_card({"model": "knrm"}, None))
    assert "recipe `" not in md and "- architecture: `knrm`" in md
