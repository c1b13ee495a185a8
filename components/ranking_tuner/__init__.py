"""RankingTuner: TFX's Tuner with an optional `corpus_vectors` input, whose trials are whole
Trainer runs (trainer_module/tuning.py; docs/trainer.md "Tuner")."""
