"""Loss registry: config name -> the per-example loss function it configures (losses.py).

The one list of loss names: trainer_module/config.py takes `LOSS_NAMES` from here, so this
module imports losses.py (TensorFlow) only inside the factories (the pipeline config loads
without TensorFlow).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainer_module.config import TrainerConfig

Factory = Callable[["TrainerConfig"], Callable[..., Any]]


def _pairwise_hinge(cfg: TrainerConfig):
    from trainer_module import losses

    return lambda s, y: losses.pairwise_hinge(s, y, cfg.hinge_margin)


def _pairwise_logistic(cfg: TrainerConfig):
    from trainer_module import losses

    return losses.pairwise_logistic


def _pointwise_sigmoid(cfg: TrainerConfig):
    from trainer_module import losses

    graded = cfg.pointwise_target == "graded"
    return lambda s, y: losses.pointwise_sigmoid(s, y, graded, cfg.max_label)


def _listwise_softmax(cfg: TrainerConfig):
    from trainer_module import losses

    return losses.listwise_softmax


LOSSES: dict[str, Factory] = {
    "pairwise_hinge": _pairwise_hinge,
    "pairwise_logistic": _pairwise_logistic,
    "pointwise_sigmoid": _pointwise_sigmoid,
    "listwise_softmax": _listwise_softmax,
}
# The `trainer.loss` names trainer_module/config.py accepts, in registry order (the group
# losses; the in-batch loss is the in_batch recipe's own, trainer_module/recipes/in_batch.py).
LOSS_NAMES = tuple(LOSSES)
