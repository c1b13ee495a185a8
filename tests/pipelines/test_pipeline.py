"""Pipeline assembly (no component runs here; compilation: test_kubeflow_runner.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pipelines import component_table
from pipelines.config import COMPONENT_IDS, REPO_ROOT, load_config
from pipelines.pipeline import SCHEMA_FILE, create_components, create_pipeline

COMPONENTS = list(COMPONENT_IDS)


def test_create_pipeline_wires_every_component(shared_data: Path) -> None:
    config = load_config("cranfield-knrm")
    pipeline = create_pipeline(config)
    ids = [c.id for c in pipeline.components]
    # KNRM reads no corpus vectors and the config has no tuner.max_trials: the CorpusEncoder's
    # and the Tuner's rows are left out (their `include`).
    left_out = ("CorpusEncoder", "Tuner")
    assert sorted(ids) == sorted(c for c in COMPONENTS if c not in left_out)
    # Built in the table's order (the Pipeline sorts them topologically).
    assert [c.id for c in create_components(config)] == [
        c for c in COMPONENT_IDS if c not in left_out
    ]
    assert pipeline.enable_cache
    assert f"--direct_running_mode={config.runner.beam.direct_running_mode}" in (
        pipeline.beam_pipeline_args
    )
    by_id = {c.id: c for c in pipeline.components}
    # No Resolver: the evaluator finds its baseline, the model served, under the Pusher's
    # destination. The Pusher obeys the evaluator's blessing; the Trainer waits for the gate.
    evaluator = by_id["RankingEvaluator"]
    assert "baseline_model" not in evaluator.inputs
    assert evaluator.exec_properties["push_destination"] == config.pusher.destination
    assert by_id["Pusher"].inputs["model_blessing"].producer_component_id == "RankingEvaluator"
    assert "ExampleGate" in {node.id for node in by_id["Trainer"].upstream_nodes}
    assert SCHEMA_FILE.exists()
    assert by_id["ImportSchemaGen"].exec_properties["schema_file"] == str(SCHEMA_FILE)
    # The model card's config is the config, without where the file was on this machine.
    card_config = json.loads(by_id["Pusher"].exec_properties["model_card_config"])
    assert "source" not in card_config and card_config["runner"]["pipeline_name"]


def test_the_component_table_is_read_without_tfx() -> None:
    """The KFP entrypoint reads the table in every task's container before TFX's imports (their
    time is reported apart): neither the table nor the entrypoint module may import TFX, TF or
    ml_metadata."""
    code = (
        "import sys, pipelines.kfp_entrypoint, pipelines.component_table\n"
        "print(sorted(m for m in ('tfx', 'tensorflow', 'ml_metadata') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
    rows = component_table.COMPONENTS
    assert set(component_table.DISPLAY_NAMES) == set(COMPONENT_IDS) == {r.id for r in rows}
    # Every artifact type title has one row introducing it.
    titles = [t for r in rows for t in r.artifact_types]
    assert len(titles) == len(set(titles)) == len(component_table.ARTIFACT_TYPES)


def _splits(trainer, key: str) -> list[str]:
    """The splits of a Trainer's TrainArgs / EvalArgs exec property (JSON of the proto)."""
    value = trainer.exec_properties[key]
    return list(json.loads(value)["splits"] if isinstance(value, str) else value.splits)


def test_cross_validation_fans_out_one_trainer_per_fold(shared_data: Path) -> None:
    """evaluator.cross_validation.folds k: k fold Trainers beside the pushed one; fold branch i
    never reads fold i (no query's judgments reach the model that ranks it), picks its alpha on
    fold i+1's eval split only, and the evaluator ranks fold i with fold branch i's model."""
    from rankcore import folds

    k = 5
    config = load_config("cranfield-knrm", [f"evaluator.cross_validation.folds={k}"])
    by_id = {c.id: c for c in create_components(config)}
    trainers = [i for i in by_id if i.startswith("Trainer")]
    assert trainers == ["Trainer", *(f"Trainer_fold{i}" for i in range(k))]
    assert by_id["RankingDataGen"].exec_properties["cross_validation_folds"] == k
    evaluator = by_id["RankingEvaluator"]
    for i in range(k):
        trainer = by_id[folds.node_id("Trainer", i)]
        train = _splits(trainer, "train_args")
        dev = _splits(trainer, "eval_args")
        dev_fold = (i + 1) % k
        assert dev == [f"fold{dev_fold}_eval"]
        assert sorted(train) == sorted(f"fold{f}_train" for f in range(k) if f not in (i, dev_fold))
        assert not any(s.startswith(f"fold{i}_") for s in train + dev)  # no leakage
        assert "ExampleGate" in {n.id for n in trainer.upstream_nodes}
        for key, output in (("fold_model_{}", "model"), ("fold_model_run_{}", "model_run")):
            channel = evaluator.inputs[key.format(i)]
            assert channel.producer_component_id == trainer.id
            assert channel.output_key == output
    # The pushed model: every fold but datagen.split.dev_fold trains, the dev fold validates.
    final = by_id["Trainer"]
    dev_fold = config.datagen.split.dev_fold
    assert _splits(final, "eval_args") == [f"fold{dev_fold}_eval"]
    assert len(_splits(final, "train_args")) == k - 1
    assert evaluator.inputs["model"].producer_component_id == "Trainer"
    assert by_id["Pusher"].inputs["model"].producer_component_id == "Trainer"
    # Without cross-validation: one Trainer on train/dev, no fold inputs.
    plain = {c.id: c for c in create_components(load_config("cranfield-knrm"))}
    assert [i for i in plain if i.startswith("Trainer")] == ["Trainer"]
    assert _splits(plain["Trainer"], "train_args") == ["train"]
    assert not any(key.startswith("fold_model") for key in plain["RankingEvaluator"].inputs)


def test_fold_branches_partition_the_folds() -> None:
    from rankcore import folds

    for k in range(3, folds.MAX_FOLDS + 1):
        branches = [folds.branch(i, k) for i in range(k)]
        assert sorted(b.test for b in branches) == list(range(k))  # each fold tested once
        for b in branches:
            assert sorted((b.test, b.dev, *b.train)) == list(range(k))
        assert folds.split_names(k) == [f"fold{f}_{r}" for f in range(k) for r in ("train", "eval")]
    assert folds.parse_node_id("Trainer_fold3") == ("Trainer", 3)
    assert folds.parse_node_id("Trainer") == ("Trainer", None)


def test_the_corpus_encoder_feeds_datagen_every_trainer_and_the_evaluator(
    shared_data: Path,
) -> None:
    """Cranfield (a dual encoder over frozen documents with a companion): the CorpusEncoder
    runs first, with both encoders at datagen.max_doc_length and their checkpoints' digests,
    and every fold's Trainer and the evaluator read its artifact (RankingDataGen only with
    hybrid retrieval: it need not wait for the encoder otherwise)."""
    from components.corpus_encoder.config import DocumentsConfig, encoders_from_json
    from rankcore.encoders.hf_checkpoint import checkpoint_digest

    config = load_config("cranfield", check_inputs=False)
    built = create_components(config)
    assert built[0].id == "CorpusEncoder"
    readers = [c.id for c in built if "corpus_vectors" in c.inputs]
    trainers = ["Trainer", *(f"Trainer_fold{i}" for i in range(5))]
    assert readers == [*trainers, "RankingEvaluator"]
    for component in built:
        if component.id in readers:
            channel = component.inputs["corpus_vectors"]
            assert channel.producer_component_id == "CorpusEncoder", component.id
    encoder = built[0]
    dual = config.trainer.dual_encoder
    companion = config.trainer.recipe.frozen_documents.companion_checkpoint_dir
    entries = encoders_from_json(encoder.exec_properties["encoders"])
    assert [(e.checkpoint_dir, e.max_length) for e in entries] == [
        (dual.checkpoint_dir, 254),
        (companion, 254),
    ]
    if os.path.isdir(dual.checkpoint_dir):  # `make pretrained`
        assert entries[0].checkpoint_digest == checkpoint_digest(dual.checkpoint_dir)
    docs = DocumentsConfig.from_json(encoder.exec_properties["documents"])
    assert (docs.documents_format, docs.allow_empty_documents, docs.lowercase) == (
        "cranfield",
        True,
        True,
    )
    # Only what the vectors depend on: Trainer and evaluator settings leave the properties
    # as they are (TFX's cache reuses the artifact).
    other = load_config(
        "cranfield",
        ["trainer.train_steps=100", "evaluator.require_significance=false"],
        check_inputs=False,
    )
    assert create_components(other)[0].exec_properties == encoder.exec_properties


def test_corpus_encoders_are_the_union_of_hybrid_retrieval_and_the_document_tower(
    shared_data: Path,
) -> None:
    from rankcore.corpus_vectors import EncoderSpec
    from trainer_module.recipes import corpus_tower

    config = load_config("cranfield", check_inputs=False)
    dual = config.trainer.dual_encoder
    # The Trainer's precision policy on this machine (float32 without a bf16 GPU).
    precision = corpus_tower(config.trainer, 254).parts[0][0].precision
    own, companion = (
        EncoderSpec(dual.checkpoint_dir, 254, precision),
        EncoderSpec(
            config.trainer.recipe.frozen_documents.companion_checkpoint_dir, 254, precision
        ),
    )
    assert component_table.corpus_encoders(config) == [own, companion]
    # Hybrid retrieval with the dual encoder's checkpoint: the same encoder, once.
    hybrid = load_config(
        "cranfield", [f"datagen.hybrid.checkpoint_dir={dual.checkpoint_dir}"], check_inputs=False
    )
    hybrid_own = EncoderSpec(dual.checkpoint_dir, 254)  # dense retrieval computes float32
    assert component_table.corpus_encoders(hybrid) == list(
        dict.fromkeys([hybrid_own, own, companion])
    )
    # KNRM with hybrid retrieval: the hybrid encoder alone; without it, none.
    knrm = load_config(
        "cranfield-knrm",
        [f"datagen.hybrid.checkpoint_dir={dual.checkpoint_dir}"],
        check_inputs=False,
    )
    assert component_table.corpus_encoders(knrm) == [
        EncoderSpec(dual.checkpoint_dir, knrm.datagen.max_doc_length)
    ]
    assert component_table.corpus_encoders(load_config("demo", check_inputs=False)) == []


def test_datagen_reads_the_corpus_vectors_only_for_hybrid_retrieval(shared_data: Path) -> None:
    """msmarco-subset.yaml retrieves hybrid candidates: RankingDataGen reads the vectors there
    (and cranfield.yaml, without hybrid retrieval, does not: the test above)."""
    built = create_components(load_config("msmarco-subset", check_inputs=False))
    datagen = next(c for c in built if c.id == "RankingDataGen")
    assert datagen.inputs["corpus_vectors"].producer_component_id == "CorpusEncoder"


def test_fold_trainers_export_their_query_tower_unless_a_tuner_may_change_frozen_parts(
    shared_data: Path,
) -> None:
    """A fold branch's model is evaluated, never served: its Trainer exports the trained query
    tower only (custom_config query_tower_only; trainer_module/export.py export_query_tower),
    the final Trainer the whole model whose frozen parts complete it. Where a Tuner may choose
    other frozen parts on a branch than on the final one (a recipe key in tuner.space), every
    model is exported whole."""

    def flags(*settings: str) -> dict[str, bool]:
        config = load_config("cranfield", list(settings), check_inputs=False)
        return {
            c.id: bool(json.loads(c.exec_properties["custom_config"]).get("query_tower_only"))
            for c in create_components(config)
            if c.id.startswith("Trainer")
        }

    folds_only = {"Trainer": False, **{f"Trainer_fold{i}": True for i in range(5)}}
    assert flags() == folds_only
    assert flags("tuner.max_trials=2", "tuner.space={train_steps: [0, 120]}") == folds_only
    companion = "recipe.frozen_documents.companion_weight"
    tuned = flags("tuner.max_trials=2", f"tuner.space={{{companion}: [0.3, 0.5]}}")
    assert not any(tuned.values())
