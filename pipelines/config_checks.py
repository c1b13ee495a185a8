"""The checks of a loaded pipeline config that look across sections or at the input files.

pipelines/config.py `load_config` runs them once every key and type is right: the cross-section
contradictions (cross-validation vs the split, the Trainer's recipe vs the sampling mode), the
`${VAR}` expansion of paths, then whether the input files exist and are what their keys say
(their first records, the qrels' grades). Each raises a ConfigError naming the key and file.
"""

from __future__ import annotations

import dataclasses
import glob
import os

from components.ranking_datagen.config import cross_validation_folds
from pipelines.config import PATH_DEFAULTS, REPO_ROOT, PipelineConfig
from rankcore import config_loader
from rankcore.config_loader import ConfigError
from trainer_module.config import TrainerConfig
from trainer_module.models.registry import PRETRAINED_MODEL_NAMES
from trainer_module.pretrained import missing_checkpoint
from trainer_module.recipes import RECIPES, corpus_tower, recipe_for
from trainer_module.tuning_config import apply_values, combinations

# The keys holding paths or URIs: ${VAR} is expanded and a relative path made absolute.
PATH_KEYS = {
    "collection": ("documents", "queries", "qrels", "first_stage_run"),
    "datagen.vocab": ("vocab_file",),
    "datagen.hybrid": ("checkpoint_dir",),
    "datagen.split": (
        "train_qids",
        "dev_qids",
        "test_qids",
        "train_qrels",
        "dev_qrels",
        "test_qrels",
    ),
    "trainer.bert": ("checkpoint_dir",),
    "trainer.dual_encoder": ("checkpoint_dir",),
    "trainer.recipe.frozen_documents": ("companion_checkpoint_dir",),
    "pusher": ("destination",),
    "runner": ("pipeline_root",),
}


def check_cross_validation(config: PipelineConfig) -> None:
    """With `evaluator.cross_validation.folds` k, the folds are datagen.split's kfold hash with
    k folds: another split method or fold count is a contradiction, refused naming both keys
    (by RankingDataGen's own check, which its executor applies again)."""
    try:
        cross_validation_folds(config.evaluator.cross_validation.folds, config.datagen.split)
    except ValueError as e:
        raise ConfigError(f"{config.source}: {e}") from None


def check_companion_weights(config: PipelineConfig) -> None:
    """A companion weight chosen after training (recipe.frozen_documents.companion_weights)
    is chosen by each Trainer on its own dev queries: refused with cross-validation, whose fold
    models take their frozen parts from the served model (each fold could choose another
    weight), and beside a Tuner searching companion_weight, whose values it would override."""
    if not recipe_for(config.trainer).companion_weights():
        return
    key = f"{config.source}: trainer.recipe.frozen_documents.companion_weights"
    if config.evaluator.cross_validation.folds:
        raise ConfigError(
            f"{key}: each cross-validation fold's Trainer would choose its own weight, and a "
            "fold model takes its frozen parts from the served model: remove companion_weights "
            "(tuner.space can search recipe.frozen_documents.companion_weight for all folds), "
            "or set evaluator.cross_validation.folds: 0"
        )
    if config.tuner.enabled and "recipe.frozen_documents.companion_weight" in config.tuner.space:
        raise ConfigError(
            f"{key}: the Trainer chooses the weight after training, so the Tuner's "
            "tuner.space.recipe.frozen_documents.companion_weight would never be served: "
            "remove one of the two"
        )


def check_training_lists(config: PipelineConfig) -> None:
    """The Trainer's recipe reads the train split as sampled groups or as whole candidate
    lists (its `train_data`), and RankingDataGen writes lists only with
    `datagen.sampling.mode: lists`. A mismatch is refused, naming both keys, before any
    component runs (the Trainer would stop on the train split's group size only after
    RankingDataGen)."""
    wants = recipe_for(config.trainer).train_data
    mode = config.datagen.sampling.mode
    if wants is None:
        return  # zero-shot: the train split is not read
    recipe = f"trainer.recipe.type {config.trainer.recipe.type}"
    if wants == "lists" and mode != "lists":
        raise ConfigError(
            f"{config.source}: {recipe} trains on each train query's whole candidate list: "
            f"set datagen.sampling.mode to lists (it is {mode})"
        )
    if mode == "lists" and wants != "lists":
        lists = [name for name, cls in RECIPES.items() if cls.train_data == "lists"]
        raise ConfigError(
            f"{config.source}: datagen.sampling.mode: lists writes whole candidate lists, which "
            f"{recipe} does not train on (only trainer.recipe.type {' or '.join(lists)}): set "
            "that, or use a sampling mode (pairwise, listwise, pointwise)"
        )


def check_corpus_case(config: PipelineConfig) -> None:
    """The CorpusEncoder tokenizes each document once for every reader of the corpus vectors:
    with hybrid retrieval it folds case as datagen.hybrid.lowercase says, and a frozen
    document tower looks its documents up by the examples' ids (datagen.vocab.lowercase). When
    both read the vectors the two settings must agree, or every lookup of one side misses."""
    datagen = config.datagen
    if not datagen.hybrid.checkpoint_dir or datagen.hybrid.lowercase == datagen.vocab.lowercase:
        return
    if corpus_tower(config.trainer, datagen.max_doc_length) is None:
        return
    raise ConfigError(
        f"{config.source}: datagen.hybrid.lowercase ({datagen.hybrid.lowercase}) differs from "
        f"datagen.vocab.lowercase ({datagen.vocab.lowercase}), and both hybrid retrieval and "
        f"trainer.recipe.type {config.trainer.recipe.type} read the corpus vectors, which "
        "embed each document once: set them equal"
    )


def expand_paths(config: PipelineConfig) -> None:
    """${VAR} expanded and relative paths made absolute, every unset variable named."""
    source = config.source
    defaults = dict(PATH_DEFAULTS, RANKPIPE_PIPELINE_NAME=config.runner.pipeline_name)
    problems = []
    for section, keys in PATH_KEYS.items():
        obj = config
        for part in section.split("."):
            obj = getattr(obj, part)
        for key in keys:
            value = getattr(obj, key)
            if not value:
                continue
            try:
                expanded = config_loader.expand_env(value, defaults)
            except KeyError as e:
                problems.append(
                    f"{source}: {section}.{key}: environment variable {e.args[0]} is not set"
                )
                continue
            if "://" not in expanded and not os.path.isabs(expanded):
                expanded = str((REPO_ROOT / expanded).resolve())
            setattr(obj, key, expanded)
    if problems:
        raise ConfigError(problems)


def _expand_space_paths(config: PipelineConfig) -> list[str]:
    """The tuner's space values of path keys (a checkpoint to try) expanded as expand_paths
    expands the key itself; the unset variables and missing local paths as problems."""
    defaults = dict(PATH_DEFAULTS, RANKPIPE_PIPELINE_NAME=config.runner.pipeline_name)
    problems = []
    for key, values in config.tuner.space.items():
        section, _, leaf = f"trainer.{key}".rpartition(".")
        if leaf not in PATH_KEYS.get(section, ()):
            continue
        for i, value in enumerate(values):
            if not isinstance(value, str):
                continue
            where = f"{config.source}: tuner.space.{key}[{i}]"
            try:
                value = config_loader.expand_env(value, defaults)
            except KeyError as e:
                problems.append(f"{where}: environment variable {e.args[0]} is not set")
                continue
            if "://" not in value and not os.path.isabs(value):
                value = str((REPO_ROOT / value).resolve())
            values[i] = value
    return problems


def check_tuner_paths(config: PipelineConfig) -> None:
    """The tuner space's local paths (a checkpoint to try) exist, as check_input_paths checks
    the keys' own (and like it, only when the inputs are checked: a compile for the cluster
    names paths of the image)."""
    missing = [
        f"{config.source}: tuner.space.{key}[{i}]: {value} does not exist"
        for key, values in config.tuner.space.items()
        if f"trainer.{key}".rpartition(".")[2]
        in PATH_KEYS.get(f"trainer.{key}".rpartition(".")[0], ())
        for i, value in enumerate(values)
        if isinstance(value, str) and "://" not in value and not os.path.exists(value)
    ]
    if config.tuner.enabled and missing:
        raise ConfigError(missing)


def check_tuner(config: PipelineConfig) -> None:
    """With a Tuner, every key of `tuner.space` is a trainer key and every combination of its
    values is a trainer section that could run here (its recipe's own rules, the sampling
    mode it trains on, the corpus case): refused before any component runs, naming the
    combination, rather than after the trials before it (trainer_module/tuning.py)."""
    if not config.tuner.enabled:
        return
    problems = []
    for key in config.tuner.space:
        try:
            config_loader.check_key(TrainerConfig, key)
        except ConfigError as e:
            problems += [
                p.replace("--set ", f"{config.source}: tuner.space.", 1) for p in e.problems
            ]
    problems += _expand_space_paths(config)
    if problems:
        raise ConfigError(problems)
    base = dataclasses.asdict(config.trainer)
    for values in combinations(config.tuner.space):
        try:
            trainer = TrainerConfig.from_dict(apply_values(base, values))
            trial = dataclasses.replace(config, trainer=trainer)
            check_training_lists(trial)
            check_corpus_case(trial)
        except (ConfigError, ValueError) as e:
            lines = e.problems if isinstance(e, ConfigError) else [str(e)]
            problems += [f"{config.source}: tuner.space combination {values}: {p}" for p in lines]
    if problems:
        raise ConfigError(problems)


def check_input_paths(config: PipelineConfig) -> None:
    """Fails, naming each key, when input files are missing (demo files are made on demand);
    a missing checkpoint names the key in use (trainer.<model>.checkpoint_dir, ...)."""
    if config.collection.demo.enabled:
        check_demo_paths(config)
        return
    checks = [
        ("collection.documents", config.collection.documents),
        ("collection.queries", config.collection.queries),
        ("collection.qrels", config.collection.qrels),
        ("collection.first_stage_run", config.collection.first_stage_run),
        ("datagen.vocab.vocab_file", config.datagen.vocab.vocab_file),
        ("datagen.split.train_qids", config.datagen.split.train_qids),
        ("datagen.split.dev_qids", config.datagen.split.dev_qids),
        ("datagen.split.test_qids", config.datagen.split.test_qids),
        ("datagen.split.train_qrels", config.datagen.split.train_qrels),
        ("datagen.split.dev_qrels", config.datagen.split.dev_qrels),
        ("datagen.split.test_qrels", config.datagen.split.test_qrels),
    ]
    model = config.trainer.model
    if model in PRETRAINED_MODEL_NAMES:
        ckpt = getattr(config.trainer, model).checkpoint_dir
        key = f"trainer.{model}.checkpoint_dir"
        checks.append((key, ckpt and os.path.join(ckpt, "model.safetensors")))
    for key, ckpt in recipe_for(config.trainer).checkpoint_dirs().items():  # a companion
        checks.append((f"trainer.{key}", os.path.join(ckpt, "model.safetensors")))
    hybrid = config.datagen.hybrid.checkpoint_dir
    checks.append(
        ("datagen.hybrid.checkpoint_dir", hybrid and os.path.join(hybrid, "model.safetensors"))
    )
    problems = []
    for key, value in checks:
        missing = missing_checkpoint(value)
        if missing:
            problems.append(
                f"{config.source}: {key}: the pretrained {missing.name} "
                "checkpoint is not installed; run `make pretrained` (or point the key at a "
                "checkpoint directory)"
            )
        elif value and "://" not in value and not glob.glob(value):
            problems.append(f"{config.source}: {key}: no such file: {value}")
    if problems:
        raise ConfigError(problems)


def check_demo_paths(config: PipelineConfig) -> None:
    """With `collection.demo.enabled`, the generated collection goes under the outputs
    directory (or the pipeline root), never into a directory the user named: a mistyped path
    to the user's own collection once made the demo overwrite their corpus. Checked before
    anything is written; the generator itself also refuses a directory it does not own."""
    from pipelines import demo_data

    coll = config.collection
    directory = os.path.dirname(coll.documents)
    fix = "to read your own collection set collection.demo.enabled: false (or: rankpipe init)"
    if "://" in coll.documents:
        raise ConfigError(
            f"{config.source}: collection.documents: {coll.documents}: the demo collection is "
            f"generated on this machine's disk, under the outputs directory; {fix}"
        )
    wrong = demo_data.misplaced(coll.documents, coll.queries, coll.qrels)
    if wrong:
        raise ConfigError(
            f"{config.source}: {wrong}: collection.demo.enabled generates corpus.jsonl, "
            f"queries.jsonl and qrels.txt in one directory; {fix}"
        )
    outputs = config_loader.expand_env("${RANKPIPE_OUTPUTS}", PATH_DEFAULTS)
    owned = [os.path.realpath(outputs), os.path.realpath(config.runner.pipeline_root)]
    real = os.path.realpath(directory)
    if not any(real == o or real.startswith(o + os.sep) for o in owned):
        raise ConfigError(
            f"{config.source}: collection.documents: {coll.documents}: "
            "collection.demo.enabled generates the demo collection, which goes under the "
            f"outputs directory ({outputs}), not into {directory}; {fix}"
        )


def check_worker_paths(config: PipelineConfig) -> None:
    """With a Beam runner whose workers may run elsewhere (Dataflow, a Flink or Spark job
    server, an EXTERNAL worker pool), fails, naming the key, on a location those workers open
    that is a path of this machine they do not reach (neither an object-store URI nor under a
    --rankpipe_shared_mount): the pipeline root (StatisticsGen's and the RankingEvaluator's
    artifacts), the documents, the push destination (the evaluator's baseline). Before any
    component runs; the executors check again (components/worker_dirs.py, docs/datagen.md
    "Distributed runners")."""
    args = config.runner.beam.extra_args
    if not any(arg == "--runner" or arg.startswith("--runner=") for arg in args):
        return  # the DirectRunner; and no Beam import for the common case
    from components import worker_dirs

    if worker_dirs.workers_see_local_disk(args):
        return
    for key, value in (
        ("runner.pipeline_root", config.runner.pipeline_root),
        ("collection.documents", config.collection.documents),
        ("pusher.destination", config.pusher.destination),
    ):
        if value and not worker_dirs.reachable_by_workers(value, args):
            raise ConfigError(
                f"{config.source}: {key}: {value!r} is a path on this machine, and the workers "
                f"of the Beam runner {worker_dirs.describe_runner(args)} (runner.beam.extra_args) "
                f"may run elsewhere; use a gs:// URI, or a path under a directory every worker "
                f"mounts at the same path ({worker_dirs.SHARED_MOUNT_FLAG}=DIR in "
                "runner.beam.extra_args; docs/datagen.md, 'Distributed runners')"
            )


def check_positive_threshold(config: PipelineConfig) -> None:
    """Fails, naming the key, the grades found and a value that works, when
    `datagen.sampling.positive_threshold` leaves the train split without a positive: a config
    mismatch (e.g. the shipped threshold 2 on a 0/1-judged collection), found here from the
    qrels and the split settings before any component runs, rather than by RankingDataGen
    after its collection pass. Local files only: RankingDataGen checks object-store inputs
    itself, with the same function."""
    coll, cfg = config.collection, config.datagen
    if coll.demo.enabled or not coll.qrels or "://" in coll.qrels:
        return
    # Lazy: the readers import Beam, which `rankpipe config` and the compilers do not need.
    from components.ranking_datagen import collection as collection_io
    from components.ranking_datagen import readers, sampling, splits

    # Read under datagen.on_bad_record, as RankingDataGen reads them: under fail its file:line
    # error comes first (a file in another format is refused under skip too), not the
    # threshold's "grades found: none" after every line was skipped.
    report = collection_io.BadRecordReport(cfg.on_bad_record)
    try:
        qrels = collection_io.read_qrels(coll.qrels, coll.qrels_format, report).qrels
    except (readers.BadRecordError, readers.EmptyInputError) as e:
        raise ConfigError(_reader_problem(e, "collection.qrels")) from None
    split_cfg = cfg.split
    if config.evaluator.cross_validation.folds:
        split_of = dict.fromkeys(qrels, "train")  # every query trains in some fold branch
    elif split_cfg.method == "explicit":
        if "://" in (split_cfg.train_qids or "://"):
            return
        split_of = {qid: "train" for _, qid in splits.read_qid_list(split_cfg.train_qids)}
    elif split_cfg.method == "qrels_files":
        if any("://" in (p or "") for p in (split_cfg.train_qrels, split_cfg.dev_qrels)):
            return
        try:
            split_of = splits.qrels_file_split_of(split_cfg, coll.qrels_format).assignment
        except readers.BadRecordError as e:  # a split file in another format
            raise ConfigError(_reader_problem(e, "datagen.split")) from None
    else:
        split_of = splits.kfold_assignment(
            qrels, split_cfg.num_folds, split_cfg.dev_fold, split_cfg.test_fold, split_cfg.seed
        )
    try:
        sampling.resolve_positive_threshold(
            cfg.sampling.positive_threshold, sampling.train_grades(split_of, qrels)
        )
    except sampling.ThresholdError as e:
        skipped = report.count()
        note = (
            f"; {skipped} bad qrels records skipped (datagen.on_bad_record: skip), the first: "
            f"{report.first_example('qrels')}"
            if skipped
            else ""
        )
        raise ConfigError(
            f"{config.source}: datagen.sampling.positive_threshold: {e} (qrels: {coll.qrels}{note})"
        ) from None


def _reader_problem(error: Exception, key: str) -> str:
    """A reader's error as a config problem line: its `<file>:<line>: <problem>` first, then the
    key, unless the problem names its collection key already (a format to set)."""
    text = str(error)
    return text if "collection." in text else f"{text} ({key})"


def check_input_contents(config: PipelineConfig) -> None:
    """Fails, naming the file (and line) and the key, when a local collection file is empty, is
    in another format than its key says ("looks like BEIR corpus (JSON lines), not msmarco_tsv
    (...): set collection.documents_format: beir_corpus"), or, under `datagen.on_bad_record:
    fail`, has a bad first record: each read only as far as its first record
    (collection.check_first_record), before any component runs, not by RankingDataGen after
    the pipeline started. Local files only: RankingDataGen reports object-store ones."""
    coll = config.collection
    if coll.demo.enabled:
        return
    # Lazy: the readers import Beam, which `rankpipe config` and the compilers do not need.
    from components.ranking_datagen import collection as collection_io
    from components.ranking_datagen import readers

    inputs = [
        (readers.DOCUMENTS, "collection.documents", coll.documents, coll.documents_format),
        (readers.QUERIES, "collection.queries", coll.queries, coll.queries_format),
        (readers.QRELS, "collection.qrels", coll.qrels, coll.qrels_format),
        (readers.RUN, "collection.first_stage_run", coll.first_stage_run, "trec_run"),
    ]
    problems = []
    for kind, key, pattern, fmt in inputs:
        if not pattern or "://" in pattern:
            continue
        options = {"allow_empty_text": coll.allow_empty_documents} if kind == "documents" else {}
        try:
            collection_io.check_first_record(
                pattern, kind, fmt, config.datagen.on_bad_record, **options
            )
        except (readers.BadRecordError, readers.EmptyInputError) as e:
            problems.append(_reader_problem(e, key))
    if problems:
        raise ConfigError(problems)
