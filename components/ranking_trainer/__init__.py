"""RankingTrainer: TFX's Trainer with an optional `corpus_vectors` input whose URI reaches the
run_fn as fn_args.custom_config["corpus_vectors_uri"] (docs/corpus-encoder.md)."""
