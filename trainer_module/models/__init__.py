"""Reranking models: (query ids [B, Lq], doc ids [B, Ld]) -> scores [B]; id 0 is padding."""

from trainer_module.models.registry import build_model, model_names

__all__ = ["build_model", "model_names"]
