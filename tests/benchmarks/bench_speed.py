"""`make bench-speed`: is `rankpipe run cranfield` as fast as a script? (issue 16)

Side by side in one run, on Cranfield with the real all-MiniLM-L6-v2 checkpoint (`make
pretrained`), zero-shot dual encoder + BM25 fusion (pipelines/configs/cranfield.yaml with
train_steps 0: the checkpoint as it is, which the plain script also runs):

  (d) pipeline   the whole `rankpipe run cranfield` as a process (LocalDagRunner, fresh
                 outputs: no cache), with each component's seconds from its MLMD execution;
  (e) script     the whole job as a plain script with the same TF encoder, run as its own
                 process as a user runs one (speed_script.py: imports, the checkpoint loaded,
                 bm25s top-100 (k1 0.9, b 0.4), every distinct query/document encoded once,
                 min-max fusion with alpha tuned on the dev queries, nDCG@10 on the test
                 queries via pytrec_eval, on the pipeline's dev/test query split); (e-work) the
                 same job in this process with the encoder already loaded and traced (what
                 earlier versions of this benchmark called (e)). (d) and (e) run interleaved;
  (a) floor      a split's distinct query and document token ids (what the evaluator / the
                 Trainer score) encoded once with the same TF encoder (DualEncoder.embed_doc,
                 tf.function), in a plain loop over length-sorted batches, after one warm-up
                 call: the test split for (b), the dev split for (c);
  (b) evaluator  the RankingEvaluator's scoring pass (components/ranking_evaluator/scoring.py
                 score_split, with the pipeline's Beam settings) on the pipeline's model,
                 embedding every text (the zero-shot model has no frozen tower, so no
                 document vectors come from the corpus vectors); (b') the pass inside the
                 pipeline run (metrics.json scoring_seconds);
  (c) validation the Trainer's dev scoring (validation.score_dev_embedded, what
                 Controller.score_dev runs for a dual encoder: each distinct dev text once) plus
                 the alpha grid (fusion.tune_alpha), in this process; (c') the same inside the
                 pipeline run, from the Trainer's own timings (TrainResult.seconds).

Goals (issue 16): (b) and (c) within 1.3x of (a) on the same split, (d) within 2x of (e).
The machine is shared and timings are noisy: compare the ratios of one run. `--per-pair` also
times the evaluator scoring every pair (the old path; slow).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import apache_beam as beam  # noqa: E402
import speed_script  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401  (the TransformGraph's tokenizer ops)
import tensorflow_transform as tft  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402
from bench_common import (  # noqa: E402
    execution_seconds,
    latest_uri,
    run_cranfield_pipeline,
    split_records,
)

from components.ranking_datagen import readers  # noqa: E402
from components.ranking_evaluator import eval_examples, scoring  # noqa: E402
from pipelines.config import BeamConfig, load_config  # noqa: E402
from rankcore import fusion  # noqa: E402
from trainer_module import validation  # noqa: E402
from trainer_module.config import TrainerConfig  # noqa: E402
from trainer_module.models import build_model  # noqa: E402
from trainer_module.pretrained import installed_minilm_dir  # noqa: E402
from trainer_module.run_fn import read_vocab  # noqa: E402

# The lengths `rankpipe run cranfield` cuts at (cranfield.yaml datagen), read from the config so
# that the floor, the script and the pipeline encode the same tokens.
_DATAGEN = load_config("cranfield").datagen
MAX_Q, MAX_D = _DATAGEN.max_query_length, _DATAGEN.max_doc_length
BATCH = 128  # cranfield.yaml trainer.eval_batch_size
DEPTH, K1, B = 100, 0.9, 0.4  # cranfield.yaml datagen
DATA = Path(os.environ.get("RANKPIPE_SHARED_DATA", Path(__file__).parents[3] / "shared" / "data"))


def encoder_config() -> TrainerConfig:
    return TrainerConfig.from_dict(
        {
            "model": "dual_encoder",
            "dual_encoder": {"checkpoint_dir": installed_minilm_dir()},
            "recipe": {"type": "in_batch"},
            "train_steps": 0,
        }
    )


def floor(embed, records: list[bytes]) -> tuple[float, int]:
    """(a): the split's distinct texts, truncated as the model truncates, encoded once."""
    texts: dict[tuple[str, str], list[int]] = {}
    for record in records:
        qid, docid, query, doc = eval_examples.example_pair(record)
        texts[("q", qid)] = list(query[:MAX_Q])
        texts[("d", docid)] = list(doc[:MAX_D])
    t0 = time.perf_counter()
    speed_script.encode_once(embed, list(texts.values()))
    return time.perf_counter() - t0, len(texts)


def embed_fn(model):
    """model.embed_doc as one tf.function (the Controller's, one tower: the zero-shot
    checkpoint embeds queries and documents alike), traced before any timing."""
    spec = tf.TensorSpec([None, None], tf.int64)
    embed = tf.function(lambda x: model.embed_doc(x, training=False), input_signature=[spec])
    embed(tf.ones([2, 3], tf.int64))
    return embed


def beam_pipeline() -> beam.Pipeline:
    return beam.Pipeline(options=PipelineOptions(BeamConfig().pipeline_args()))


def script_job(transform_graph: str, dev_qids: set[str], test_qids: set[str]) -> dict:
    return {
        "data": str(DATA / "cranfield"),
        "transform_graph": transform_graph,
        "dev_qids": sorted(dev_qids),
        "test_qids": sorted(test_qids),
        "max_query_length": MAX_Q,
        "max_doc_length": MAX_D,
    }


def readers_digest() -> str:
    """speed_script.collection_digest of the collection as our readers parse it."""
    docs = dict(
        readers.get_reader("documents", "cranfield", allow_empty_text=True).read(
            str(DATA / "cranfield" / "cran.all.1400")
        )
    )
    queries = dict(
        readers.get_reader("queries", "cranfield").read(str(DATA / "cranfield" / "cran.qry"))
    )
    qrels: dict[str, dict[str, int]] = {}
    for qid, docid, rel in readers.get_reader("qrels", "cranfield").read(
        str(DATA / "cranfield" / "cranqrel")
    ):
        qrels.setdefault(qid, {})[docid] = int(rel)
    return speed_script.collection_digest(docs, queries, qrels)


def script_process(job: dict) -> tuple[float, dict]:
    """(e): speed_script.py as its own process, as a user runs a script: (wall seconds from
    start to exit, its result line)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(job, f)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("speed_script.py")), f.name],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    os.unlink(f.name)
    if proc.returncode != 0:
        sys.exit(f"speed_script.py failed:\n{proc.stderr[-3000:]}")
    return wall, json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--outputs", help="RANKPIPE_OUTPUTS for the pipeline run (default: temp)")
    parser.add_argument("--per-pair", action="store_true", help="also time per-pair scoring")
    parser.add_argument(
        "--repeats", type=int, default=2, help="of every measurement, interleaved: best of"
    )
    args = parser.parse_args()
    outputs = Path(args.outputs or tempfile.mkdtemp(prefix="bench-speed-"))

    # (d) and (e) first, interleaved: the pipeline (fresh outputs each time, its own process)
    # and the script (its own process), `repeats` times each, best of them.
    pipeline_times, script_times, script_results = [], [], []
    job = None
    for repeat in range(args.repeats):
        t0 = time.perf_counter()
        root = run_cranfield_pipeline(
            # The single test split the script also evaluates (cranfield.yaml cross-validates),
            # and the script's ranking: the checkpoint as it is (cranfield.yaml fine-tunes the
            # query tower) and no pseudo-relevance feedback (cranfield.yaml tunes it).
            outputs / f"run{repeat}",
            "bench-speed",
            [
                "evaluator.cross_validation.folds=0",
                "trainer.ranking.feedback.mode=none",
                "trainer.train_steps=0",
                "trainer.recipe=null",
            ],
            "cranfield",
        )
        pipeline_times.append(time.perf_counter() - t0)
        if job is None:
            examples = latest_uri(root, "Examples")
            job = script_job(
                latest_uri(root, "TransformGraph"),
                {eval_examples.example_key(r)[0] for r in split_records(examples, "dev")},
                {eval_examples.example_key(r)[0] for r in split_records(examples, "test")},
            )
        wall, result = script_process(job)
        print(f"  script process: {wall:.1f}s ({result})", flush=True)
        script_times.append(wall)
        script_results.append(result)
    pipeline_s, script_s = min(pipeline_times), min(script_times)
    script = script_results[script_times.index(script_s)]
    if script["collection"] != readers_digest():
        sys.exit("speed_script.py parsed the collection differently from our readers")
    components = {name: sum(s) for name, s in execution_seconds(root).items()}
    with open(os.path.join(latest_uri(root, "ModelEvaluation"), "metrics.json")) as f:
        metrics = json.load(f)
    with open(os.path.join(latest_uri(root, "ModelRun"), "train_results.json")) as f:
        trained = json.load(f)
    examples = latest_uri(root, "Examples")
    transform_graph = latest_uri(root, "TransformGraph")
    model_dir = os.path.join(latest_uri(root, "Model"), "Format-Serving")

    vocab = read_vocab(transform_graph)
    model = build_model(encoder_config(), len(vocab), MAX_Q, MAX_D, vocab)
    embed = embed_fn(model)
    test_records = split_records(examples, "test")
    dev_records = split_records(examples, "dev")
    test_uri = os.path.join(examples, "Split-test")

    def evaluator(embed_texts: bool = True) -> float:
        t0 = time.perf_counter()
        scoring.score_split(
            beam_pipeline,
            [test_uri],
            {"candidate": model_dir},
            256,
            os.path.join(tempfile.mkdtemp(prefix="bench-speed-scores-"), "part"),
            embed=embed_texts,
        )
        return time.perf_counter() - t0

    def trainer_validation() -> float:
        t0 = time.perf_counter()
        dev = validation.score_dev_embedded(
            {"q": embed, "d": embed},
            [os.path.join(examples, "Split-dev", "*")],
            BATCH,
            MAX_Q,
            MAX_D,
        )
        fusion.tune_alpha(
            dev.run,
            dev.first_stage,
            lambda run: validation.validation_metric(dev.qrels, run, "ndcg_cut_10"),
        )
        return time.perf_counter() - t0

    # Each measurement `repeats` times, interleaved, best of them: the machine is shared.
    names = ("a", "a_dev", "b", "c", "e_in", "b0")
    times: dict[str, list[float]] = {k: [] for k in names}
    layer = tft.TFTransformOutput(transform_graph).transform_features_layer()
    for _ in range(args.repeats):
        floor_s, n_texts = floor(embed, test_records)
        times["a"].append(floor_s)
        times["b"].append(evaluator())
        dev_floor_s, dev_texts = floor(embed, dev_records)
        times["a_dev"].append(dev_floor_s)
        times["c"].append(trainer_validation())
        in_process = speed_script.run(job, embed, layer)
        times["e_in"].append(in_process["work_seconds"])
        if args.per_pair:
            times["b0"].append(evaluator(embed_texts=False))
    best = {k: min(v) for k, v in times.items() if v}
    floor_s, evaluator_s, dev_floor_s = best["a"], best["b"], best["a_dev"]
    validation_s, script_in_s, per_pair_s = best["c"], best["e_in"], best.get("b0")
    same = {k: in_process[k] == script[k] for k in ("alpha", "texts")}
    same["ndcg_cut_10"] = abs(in_process["ndcg_cut_10"] - script["ndcg_cut_10"]) < 1e-9
    if not all(same.values()):
        sys.exit(f"the script in process and as a process disagree: {in_process} / {script}")

    trainer_s = trained.get("seconds", {})
    in_pipeline_s = trainer_s.get("dev_scoring", float("nan")) + trainer_s.get("fusion", 0.0)
    rows = [
        ("(a) floor: encode the test split's distinct texts once", floor_s, f"{n_texts} texts"),
        (
            "(b) RankingEvaluator scoring pass (test)",
            evaluator_s,
            f"{evaluator_s / floor_s:.2f}x (a)",
        ),
        (
            "(b') the pass inside the pipeline run",
            metrics["scoring_seconds"],
            f"{metrics['scoring_seconds'] / floor_s:.2f}x (a)",
        ),
        (
            "(a-dev) floor: encode the dev split's distinct texts once",
            dev_floor_s,
            f"{dev_texts} texts",
        ),
        (
            "(c) Trainer validation + alpha grid (dev)",
            validation_s,
            f"{validation_s / dev_floor_s:.2f}x (a-dev)",
        ),
        (
            "(c') the same inside the pipeline run",
            in_pipeline_s,
            f"{in_pipeline_s / dev_floor_s:.2f}x (a-dev)",
        ),
        (
            "(d) `rankpipe run cranfield` (process wall)",
            pipeline_s,
            f"{pipeline_s / script_s:.2f}x (e), {pipeline_s / script_in_s:.2f}x (e-work)",
        ),
        (
            "(e) plain script as a process (speed_script.py: imports, model load, the job)",
            script_s,
            f"{script['texts']} texts; alpha {script['alpha']:.2f}, test nDCG@10 "
            f"{script['ndcg_cut_10']:.4f}; imports {script['import_seconds']:.1f}s, model load "
            f"{script['load_seconds']:.1f}s",
        ),
        (
            "(e-work) the script's job alone, in this process (model loaded, traced)",
            script_in_s,
            "",
        ),
    ]
    if args.per_pair:
        rows.insert(2, ("(b0) evaluator scoring every pair (old)", per_pair_s, ""))
    print()
    print(
        f"best of {args.repeats} for (a), (b), (c), (d), (e); (b'), (c') from the last pipeline run"
    )
    print("| | seconds | |")
    print("|---|---:|---|")
    for name, seconds, note in rows:
        print(f"| {name} | {seconds:.1f} | {note} |")
    print()
    agg = metrics["aggregate"]
    alpha = (metrics.get("fusion") or {}).get("alpha")
    print(
        f"pipeline: test nDCG@10 {agg['candidate']['ndcg_cut_10']:.4f} at alpha {alpha} "
        f"(first stage {agg['first_stage']['ndcg_cut_10']:.4f}); components: "
        + ", ".join(f"{k} {v:.0f}s" for k, v in sorted(components.items()))
        + "; Trainer: "
        + ", ".join(f"{k} {v:.1f}s" for k, v in trainer_s.items())
    )


if __name__ == "__main__":
    main()
