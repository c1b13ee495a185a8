"""RankingDataGen, StatisticsGen and the RankingEvaluator with Beam workers of their own.

The components run on Beam's portable runner with an EXTERNAL environment: the SDK workers are
processes of a worker pool started apart from the launcher (beam_worker_pool.py: its own
environment, HOME, TMPDIR and working directory, and, where mount namespaces work, the
launcher's temp dir and the executors' temp dirs hidden from it). That is the Fn API path of a
Flink or Spark cluster's workers; the workers reach the job's files only through the paths the
job gives them, all under directories declared shared (`--rankpipe_shared_mount`: the pipeline
root and Beam's `--temp_location`, and the collection), as an object store would be.

Two LocalDagRunner runs of the Cranfield pipeline (pipelines/configs/cranfield-knrm.yaml, a
short training), each in a child process:

- the reference, on the DirectRunner in memory: RankingDataGen, StatisticsGen, the schema and
  gate, the Trainer (one step) and the RankingEvaluator;
- the EXTERNAL run: RankingDataGen, StatisticsGen and the RankingEvaluator on the worker pool,
  the evaluator scoring the reference's model (imported: one model for both, so the evaluator's
  outputs can be compared).

Every file of their outputs must be the same bytes, but for what says when and where it ran
(`normalized`). Also: the work directories under --temp_location are gone after the run, a
dead pool fails the job with an error naming its address, and no pool process outlives it.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from beam_worker_pool import WorkerPool, WorkerPoolError, worker_pool

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]
BEAM_NODES = ("RankingDataGen", "StatisticsGen", "RankingEvaluator")
OVERRIDES = [
    # Fewer training samples than the shipped config (as the RankingDataGen tests do) and one
    # training step: the model only has to exist; both runs score the same one.
    "datagen.sampling.samples_per_query=8",
    "datagen.num_shards=3",
    "trainer.train_steps=1",
    "trainer.checkpoint_every=1",
    "trainer.validate_every=1",
]
# Our worker image (Beam's boot on top of ours, docs/datagen.md): on a cluster it is what
# EXTERNAL pools run; here it also keeps TFX from building and staging an sdist of itself for
# workers that already have everything (pipelines/config.py TFX_DEPENDENCY_FLAGS).
WORKER_IMAGE = "--sdk_container_image=rankpipe-beam:test"


# ------------------------------------------------------------------------------------------
# The child process: one LocalDagRunner run
# ------------------------------------------------------------------------------------------


def _run_here(spec: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Builds and runs the pipeline of `spec` (see run_pipeline); returns the URIs of its
    artifacts, node -> output key -> URI."""
    from ml_metadata.metadata_store import metadata_store
    from tfx import v1 as tfx

    from components.ranking_evaluator.component import RankingEvaluator
    from pipelines.component_table import BY_ID, Wiring
    from pipelines.config import load_config
    from pipelines.pipeline import create_components

    config = load_config("cranfield-knrm", spec["overrides"])
    built = {c.id: c for c in create_components(config)}
    if spec["model"] is None:  # the reference: all but the Pusher
        components = [c for node, c in built.items() if node != "Pusher"]
    else:  # RankingDataGen, StatisticsGen, the reference's model, the RankingEvaluator
        model, model_run = (
            tfx.dsl.Importer(source_uri=spec[key], artifact_type=kind).with_id(node)
            for key, kind, node in (
                ("model", tfx.types.standard_artifacts.Model, "ImportModel"),
                ("model_run", tfx.types.standard_artifacts.ModelRun, "ImportModelRun"),
            )
        )
        # The Trainer as the evaluator's wiring (pipelines/component_table.py) reads it.
        trainer = SimpleNamespace(
            outputs={"model": model.outputs["result"], "model_run": model_run.outputs["result"]}
        )
        upstream = {"RankingDataGen": built["RankingDataGen"], "Trainer": trainer}
        wiring = Wiring(config, upstream, schema_file="")  # the evaluator reads no schema
        evaluator = RankingEvaluator(**BY_ID["RankingEvaluator"].args(wiring))
        components = [built["RankingDataGen"], built["StatisticsGen"], model, model_run, evaluator]
    connection = tfx.orchestration.metadata.sqlite_metadata_connection_config(
        config.runner.metadata_path
    )
    pipeline = tfx.dsl.Pipeline(
        pipeline_name=config.runner.pipeline_name,
        pipeline_root=config.runner.pipeline_root,
        components=components,
        enable_cache=False,
        metadata_connection_config=connection,
        beam_pipeline_args=config.runner.beam.pipeline_args(),
    )
    tfx.orchestration.LocalDagRunner().run(pipeline)
    root = Path(config.runner.pipeline_root)
    uris: dict[str, dict[str, str]] = {}
    for artifact in metadata_store.MetadataStore(connection).get_artifacts():
        path = Path(artifact.uri)
        if root in path.parents:  # <root>/<node>/<output key>/<execution id>
            node, key = path.relative_to(root).parts[:2]
            uris.setdefault(node, {})[key] = artifact.uri
    return uris


def run_pipeline(
    shared: Path,
    launcher: Path,
    shared_data: Path,
    name: str,
    beam: list[str],
    model: dict | None = None,
) -> dict[str, dict[str, str]]:
    """One run in a child process whose temp dir and working directory are `launcher` (the
    launcher's own disk), its pipeline root `shared`/`name`. `beam`: the `runner.beam` --set
    overrides. `shared_data`: the collections. `model`: the reference's Trainer outputs to
    evaluate (None: train)."""
    root = shared / name
    root.mkdir(parents=True, exist_ok=True)
    spec = {
        "overrides": [
            *OVERRIDES,
            f"runner.pipeline_name=external-workers-{name}",
            f"runner.pipeline_root={root}",
            f"pusher.destination={shared / 'serving'}",
            *beam,
        ],
        "model": model and model["model"],
        "model_run": model and model["model_run"],
    }
    spec_path, result_path = root / "spec.json", root / "result.json"
    spec_path.write_text(json.dumps(spec))
    env = dict(os.environ, TMPDIR=str(launcher / "tmp"), RANKPIPE_SHARED_DATA=str(shared_data))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    (launcher / "tmp").mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, __file__, str(spec_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=launcher,
        timeout=900,
    )
    if not result_path.exists():
        raise RuntimeError(f"pipeline child exited with {proc.returncode}:\n{proc.stderr[-6000:]}")
    result = json.loads(result_path.read_text())
    if "error" in result:
        raise RuntimeError(f"{name} run failed: {result['error']}\n{proc.stderr[-6000:]}")
    return result["uris"]


# ------------------------------------------------------------------------------------------
# The runs
# ------------------------------------------------------------------------------------------


def files_of(uri: str) -> dict[str, bytes]:
    """Every file under an artifact URI, by path relative to it."""
    base = Path(uri)
    return {
        str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("external-workers")
    shared, launcher = base / "shared", base / "launcher"
    (launcher / "tmp").mkdir(parents=True)
    # What the workers must not see: the launcher's own directory, and the executors' temp
    # dirs (LocalDagRunner puts them under the pipeline root, in <node>/.system).
    hidden = [launcher, *(shared / "external" / node / ".system" for node in BEAM_NODES)]
    times = {}
    with worker_pool(base / "worker-scratch", hidden) as pool:
        start = time.monotonic()
        reference = run_pipeline(
            shared,
            launcher,
            shared_data,
            "reference",
            ["runner.beam.direct_running_mode=in_memory", "runner.beam.direct_num_workers=1"],
        )
        times["reference"] = time.monotonic() - start
        pool.check_alive()
        args = [
            *pool.beam_args,
            f"--rankpipe_shared_mount={shared}",
            f"--rankpipe_shared_mount={shared_data}",
            f"--temp_location={shared / 'beam-tmp'}",
            WORKER_IMAGE,
        ]
        start = time.monotonic()
        try:
            external = run_pipeline(
                shared,
                launcher,
                shared_data,
                "external",
                [f"runner.beam.extra_args={json.dumps(args)}"],
                model=reference["Trainer"],
            )
        except RuntimeError as e:
            pool.check_alive()  # a dead pool says so first
            raise RuntimeError(f"{e}\nworker pool log:\n{pool.log_tail()}") from None
        times["external"] = time.monotonic() - start
        log = pool.log_path.read_text(errors="replace")
    print(f"seconds: reference {times['reference']:.0f}, external {times['external']:.0f}")
    return {
        "reference": reference,
        "external": external,
        "pool": pool,
        "pool_log": log,
        "shared": shared,
        "launcher": launcher,
    }


# What legitimately differs between the two runs, and nothing else:
#
# - how long things took: RankingDataGen's summary (`seconds`, `timings`), the evaluator's
#   `*seconds` and `candidates_per_second`; and `model_id`, the MLMD id of the scored model
#   (the external run imported it into its own MLMD database);
# - the TransformGraph's saved_model.pb in two ways TensorFlow writes the run into it: the
#   lookup table's shared_name embeds the path of the staged vocabulary (the work directory:
#   one per execution, on every runner), and functions and their `_user_specified_name`s are
#   numbered by TensorFlow's process-wide counter (tf.Transform traces in a fresh SDK worker
#   here, after the driver's own tracing in memory); the function library is compared as a
#   set, since TensorFlow writes it sorted by those names. fingerprint.pb holds checksums of
#   saved_model.pb: its other hashes (signatures, object graph, variables) must match. The
#   vocabulary asset and the variables are compared byte for byte.
# - StatisticsGen's float means and standard deviations in their last bits: TFDV sums them
#   per bundle and merges the partial sums in the order the runner bundles the examples
#   (floating-point addition is not associative). Every count, histogram, quantile, min, max
#   and top value is compared exactly, and those two to 1e-12 relative.
TIMING_KEYS = ("seconds", "timings", "per_second")
MLMD_IDS = ("model_id",)
_WORK_DIR_IN_TABLE_NAME = re.compile(r'"hash_table_[^"]*?/stage/vocabulary/')
_COUNTED_NAME = re.compile(r"(__inference_\w*?_)\d+\b")
_COUNTED_ARG_NAME = re.compile(r'(key: "_user_specified_name"\s+value \{\s+s: ")\d+"')
_SUMMED_STATISTICS = ("mean", "std_dev", "avg_num_values")


def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _without_timings(v)
            for k, v in value.items()
            if not k.endswith(TIMING_KEYS) and k not in MLMD_IDS
        }
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _neutral_names(text: str) -> str:
    text = _WORK_DIR_IN_TABLE_NAME.sub('"hash_table_<work dir>/stage/vocabulary/', text)
    text = _COUNTED_NAME.sub(r"\1<N>", text)
    return _COUNTED_ARG_NAME.sub(r'\1<N>"', text)


def _saved_model_text(data: bytes) -> str:
    from google.protobuf import text_format
    from tensorflow.core.protobuf import saved_model_pb2

    model = saved_model_pb2.SavedModel.FromString(data)
    functions = []
    for meta_graph in model.meta_graphs:
        library = meta_graph.graph_def.library
        functions += [_neutral_names(text_format.MessageToString(f)) for f in library.function]
        del library.function[:]
    return _neutral_names(text_format.MessageToString(model)) + "".join(sorted(functions))


def _fingerprint_text(data: bytes) -> str:
    from tensorflow.core.protobuf import fingerprint_pb2

    fingerprint = fingerprint_pb2.FingerprintDef.FromString(data)
    fingerprint.ClearField("saved_model_checksum")  # of saved_model.pb's bytes
    fingerprint.ClearField("graph_def_program_hash")  # of its function names, among others
    return str(fingerprint)


def _statistics_differ(a: bytes, b: bytes) -> str | None:
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import statistics_pb2

    def lines(data: bytes) -> list[str]:
        stats = statistics_pb2.DatasetFeatureStatisticsList.FromString(data)
        return text_format.MessageToString(stats).splitlines()

    first, second = lines(a), lines(b)
    if len(first) != len(second):
        return f"{len(first)} lines against {len(second)}"
    for x, y in zip(first, second):
        key, _, value = x.strip().partition(": ")
        other_key, _, other = y.strip().partition(": ")
        summed = key == other_key and key in _SUMMED_STATISTICS
        if x != y and not (summed and math.isclose(float(value), float(other), rel_tol=1e-12)):
            return f"{x.strip()!r} against {y.strip()!r}"
    return None


def difference(node: str, name: str, a: bytes, b: bytes) -> str | None:
    """None when file `name` of `node`'s outputs is the same in both runs but for what
    legitimately differs (above); else what differs."""
    if a == b:
        return None
    base = os.path.basename(name)
    if base == "summary.json" or (node == "RankingEvaluator" and base == "metrics.json"):
        same = _without_timings(json.loads(a)) == _without_timings(json.loads(b))
    elif base == "summary.md":  # summary.json as a table
        rows = [
            [
                ln
                for ln in data.decode().splitlines()
                if not ln.startswith(("| seconds ", "| timings "))
            ]
            for data in (a, b)
        ]
        same = rows[0] == rows[1]
    elif name == "transform_fn/saved_model.pb":
        same = _saved_model_text(a) == _saved_model_text(b)
    elif name == "transform_fn/fingerprint.pb":
        same = _fingerprint_text(a) == _fingerprint_text(b)
    elif node == "StatisticsGen" and base == "FeatureStats.pb":
        return _statistics_differ(a, b)
    else:
        same = False
    return None if same else "bytes differ"


@pytest.mark.parametrize("node", BEAM_NODES)
def test_outputs_are_byte_identical_to_in_memory(runs: dict[str, Any], node: str) -> None:
    reference, external = runs["reference"][node], runs["external"][node]
    assert sorted(reference) == sorted(external)
    identical, normalized, differ = [], [], []
    for key in sorted(reference):
        a, b = files_of(reference[key]), files_of(external[key])
        assert sorted(a) == sorted(b), key
        for name in a:
            what = difference(node, name, a[name], b[name])
            (identical if a[name] == b[name] else normalized).append(f"{key}/{name}")
            if what:
                differ.append(f"{key}/{name}: {what}")
    print(f"{node}: {len(identical)} files identical, normalized: {normalized}")
    assert not differ, differ
    # StatisticsGen sums floats in the order its workers meet the examples: each of its files
    # may differ in the last bits of its sums (normalized above), every other node has files
    # identical byte for byte.
    assert identical or (node == "StatisticsGen" and normalized)


def test_the_work_ran_on_the_pool_and_left_nothing(runs: dict[str, Any]) -> None:
    # One SDK worker per Beam pipeline: RankingDataGen's two passes, StatisticsGen, and at
    # least one evaluator scoring pass; none ran in the launcher.
    started = runs["pool_log"].count("Starting worker with command")
    assert started >= 4, runs["pool_log"][-3000:]
    # The work directories under --temp_location are removed by the executors (nothing
    # else would remove them on an object store).
    assert [p for p in (runs["shared"] / "beam-tmp").rglob("*") if p.is_file()] == []
    assert runs["pool"].processes() == []  # the pool and its workers ended with the fixture


# ------------------------------------------------------------------------------------------
# The pool itself: what its workers see, and a pool that dies
# ------------------------------------------------------------------------------------------

PROBE = textwrap.dedent(
    """
    import json, os, sys, tempfile
    import apache_beam as beam

    args, paths, out = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]

    def probe(_, paths):
        import json, os, tempfile  # in the worker: the launcher's globals do not travel

        seen = {p: os.path.exists(p) for p in paths}
        return json.dumps({"seen": seen, "cwd": os.getcwd(), "tmp": tempfile.gettempdir(),
                           "home": os.environ.get("HOME"), "pid": os.getpid(),
                           "env": sorted(os.environ)})

    with beam.Pipeline(argv=args) as p:
        _ = (p | beam.Create([0]) | beam.Map(probe, paths)
               | beam.io.WriteToText(out, shard_name_template=""))
    """
)


def _probe(pool: WorkerPool, paths: list[str], out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            json.dumps([*pool.beam_args, WORKER_IMAGE]),
            json.dumps(paths),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_workers_see_only_what_they_are_given_and_a_dead_pool_fails_clearly(
    tmp_path: Path,
) -> None:
    launcher, shared = tmp_path / "launcher", tmp_path / "shared"
    shared.mkdir()
    (launcher / "private").mkdir(parents=True)
    (launcher / "private" / "sentinel").write_text("the launcher's")
    with worker_pool(tmp_path / "scratch", [launcher]) as pool:
        out = shared / "probe.json"
        proc = _probe(pool, [str(launcher / "private" / "sentinel"), str(shared)], out)
        assert proc.returncode == 0, proc.stderr[-3000:]
        seen = json.loads(out.read_text())
        assert seen["pid"] not in (os.getpid(), pool.process.pid)  # a worker of the pool's
        assert seen["cwd"] == str(pool.scratch)
        assert seen["tmp"] == seen["home"].replace("home", "tmp") == str(pool.scratch / "tmp")
        assert not any(k.startswith(("RANKPIPE", "CI", "PYTEST")) for k in seen["env"])
        assert seen["seen"][str(shared)]
        # Hidden where mount namespaces work (they do on the CI and development machines).
        assert seen["seen"][str(launcher / "private" / "sentinel")] is (not pool.isolated)

        members = pool.processes()
        assert members
        members[0].kill()  # the pool dies (its workers with it, by stop())
        members[0].wait(10)
        with pytest.raises(WorkerPoolError, match=rf"localhost:{pool.port}\) exited with status"):
            pool.check_alive()
        failed = _probe(pool, [], shared / "probe-dead.json")
        assert failed.returncode != 0
        # Beam's own words: the runner could not ask the pool at that address for a worker.
        assert "StartWorker" in failed.stderr, failed.stderr[-3000:]
        assert f"127.0.0.1:{pool.port}: Failed to connect" in failed.stderr, failed.stderr[-3000:]
    assert pool.processes() == []
    assert all(not p.is_running() or p.status() == "zombie" for p in members)


if __name__ == "__main__":  # the child process of run_pipeline
    _spec_path = Path(sys.argv[1])
    try:
        _result: dict[str, Any] = {"uris": _run_here(json.loads(_spec_path.read_text()))}
    except Exception as e:  # reported to the parent
        _result = {"error": f"{type(e).__name__}: {e}"}
    (_spec_path.parent / "result.json").write_text(json.dumps(_result))
