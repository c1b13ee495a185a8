"""The compiled pipeline run inside the image we ship (`make image` then `make image-test`).

Every task of the compiled spec runs through tests/kfp_local/ (the stand-in for the
KFP v2 driver and launcher) in a fresh container of the built image (tests/image/buildah_pods.py):
the image's file system, environment, numeric user and working directory, the spec's own command
and arguments, and the launcher's real local paths (/minio/...). Nothing of this machine reaches
the containers except what a cluster would provide: the object store (through the launcher's
download and upload), a shared volume for the push destination (a PVC mount on a cluster), and
the collection files copied into each container where a derived image would COPY them.

Not collected by the default suite (pyproject.toml norecursedirs; CI runs no container engine).
$RANKPIPE_IMAGE names the image (default: `make image`'s localhost/rankpipe:<source tag>).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from unittest import mock

import pytest

from pipelines import image_tag, kubeflow_runner
from pipelines.config import COMPONENT_IDS, PipelineConfig, load_config

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pipelines"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: kfp_local

import buildah_pods  # noqa: E402
import kfp_testing  # noqa: E402
from kfp_local import LocalKfpBackend  # noqa: E402

IMAGE = os.environ.get("RANKPIPE_IMAGE", f"localhost/rankpipe:{image_tag.source_tag()}")
PUSH_MOUNT = "/mnt/models"  # the volume every pod shares (a PVC on a cluster)
DATA_DIR = "/rankpipe/data"  # where a derived image would COPY a collection
TASK_TIMEOUT = 900


@pytest.fixture(scope="module")
def image() -> str:
    try:
        config = buildah_pods.image_config(IMAGE)
    except (buildah_pods.BuildahError, OSError) as e:
        pytest.fail(f"image {IMAGE} not available (run `make image` first): {e}")
    assert config.get("User") == "1000:1000", config.get("User")
    return IMAGE


def _compile(config: PipelineConfig, output: Path) -> Path:
    """`rankpipe compile`'s spec, after its cluster-path check: everything but the push
    destination (a volume path here, where a cluster would use gs://) must be a path inside the
    image or a URI."""
    import dataclasses

    checked = dataclasses.replace(
        config, pusher=dataclasses.replace(config.pusher, destination="gs://bucket/models")
    )
    kubeflow_runner.check_cluster_paths(checked)
    with mock.patch.object(kubeflow_runner, "check_cluster_paths", lambda *a, **k: None):
        job = kubeflow_runner.build_pipeline_job(config, "yaml")
    text = kubeflow_runner.render(job, "yaml", output.name)
    assert str(output.parent) not in text and str(kubeflow_runner.REPO_ROOT) not in text
    output.write_text(text)
    return output


def _run_in_image(
    image: str, work: Path, config: PipelineConfig, files: dict[str, str]
) -> tuple[LocalKfpBackend, object, buildah_pods.BuildahPods, Path]:
    spec = _compile(config, work / "pipeline.yaml")
    models = work / "models"
    models.mkdir()
    os.chown(models, 1000, 1000)  # the volume's owner is the pods' user (fsGroup on a cluster)
    pods = buildah_pods.BuildahPods(image, volumes={str(models): PUSH_MOUNT}, files=files)
    backend = LocalKfpBackend(work / "backend", timeout=TASK_TIMEOUT, pods=pods)
    t0 = time.perf_counter()
    try:
        result = backend.run(spec)
    finally:
        leftover = pods.leftover_containers()
        for name in leftover:
            buildah_pods.buildah("rm", name)
    seconds = time.perf_counter() - t0
    print(
        f"\n{config.runner.pipeline_name}: {seconds:.0f}s in the image; per task (s): "
        + ", ".join(f"{n} {t.seconds:.0f}" for n, t in result.tasks.items())
        + "; buildah from (s): "
        + ", ".join(f"{n} {s:.1f}" for n, s in pods.from_seconds.items())
    )
    assert not leftover, f"containers not removed: {leftover}"
    return backend, result, pods, models


def _check_run(result, pods: buildah_pods.BuildahPods, models: Path, destination: str) -> None:
    # the demo (KNRM) reads no corpus vectors and has no Tuner: no CorpusEncoder, no Tuner
    assert set(result.tasks) == set(COMPONENT_IDS) - {"CorpusEncoder", "Tuner"}
    assert all(task.returncode == 0 for task in result.tasks.values())
    # Every container task ran in a pod of its own, with the spec's own command and the
    # launcher's real local paths (no rebasing).
    containers = {n for n, t in result.tasks.items() if t.returncode is not None}
    assert set(pods.from_seconds) == containers
    for name in containers:
        executor_input = result.tasks[name].executor_input
        assert executor_input["outputs"]["outputFile"].startswith("/minio/"), name
    # The model was pushed to the shared volume, by the image's user.
    pushed = result.tasks["Pusher"].outputs["pushed_model"].custom_properties
    assert pushed["pushed"] == 1
    assert pushed["pushed_destination"].startswith(destination + "/")
    on_host = models / Path(pushed["pushed_destination"]).relative_to(PUSH_MOUNT)
    assert (on_host / "saved_model.pb").is_file()
    assert (on_host / "variables").is_dir()
    assert (on_host / "saved_model.pb").stat().st_uid == 1000


def test_image_runs_as_its_numeric_user_with_the_launcher_dirs_writable(
    image: str, tmp_path: Path
) -> None:
    pods = buildah_pods.BuildahPods(image)
    pod = pods("probe")
    try:
        assert not (pod.root / "usr" / "bin" / "g++").exists()  # the runtime has no compiler
        log = tmp_path / "probe.log"
        with open(log, "wb") as f:
            returncode = pod.run(
                [
                    "sh",
                    "-c",
                    "id -u; id -g; pwd; command -v python; "
                    "for d in /gcs /minio /s3; do touch $d/x || exit 3; done; "
                    "touch /rankpipe/x 2>/dev/null && exit 4; "
                    "python -c 'import pipelines.kfp_entrypoint, tfx, tensorflow'",
                ],
                {},
                f,
                600,
            )
        out = log.read_text().split()
        assert returncode == 0, log.read_text()
        assert out[:4] == ["1000", "1000", "/rankpipe", "/rankpipe/.venv/bin/python"]
    finally:
        pod.remove()
    assert not pods.leftover_containers()


@pytest.mark.e2e
def test_compiled_demo_runs_in_the_image(image: str, tmp_path: Path) -> None:
    destination = f"{PUSH_MOUNT}/demo"
    outputs = tmp_path / "outputs"
    config = kfp_testing.demo_config(outputs, [])  # writes the demo collection on this machine
    files = {}
    collection = {}
    for key in ("documents", "queries", "qrels"):
        host = getattr(config.collection, key)
        files[host] = f"{DATA_DIR}/demo/{Path(host).name}"
        collection[key] = files[host]
    # The same config pointing at the image's copy (no local check: the files are in the pods).
    config = load_config(
        "demo",
        kfp_testing.SMALL_DEMO
        + [f"collection.{k}={v}" for k, v in collection.items()]
        + [
            "collection.demo.enabled=false",
            f"runner.pipeline_root={kfp_testing.PIPELINE_ROOT}",
            f"pusher.destination={destination}",
        ],
        check_inputs=False,
    )
    _, result, pods, models = _run_in_image(image, tmp_path, config, files)
    _check_run(result, pods, models, destination)


def _first_documents(source: Path, target: Path, count: int) -> set[str]:
    """Writes the first `count` documents of a Cranfield collection file (records start with
    `.I <docid>`); returns their docids."""
    kept, docids = [], set()
    for line in source.read_text().splitlines(keepends=True):
        if line.startswith(".I "):
            if len(docids) == count:
                break
            docids.add(line.split()[1])
        kept.append(line)
    target.write_text("".join(kept))
    return docids


def _judgments_of(source: Path, target: Path, docids: set[str]) -> int:
    """Writes the Cranfield qrels lines (`qid docid relevance`) of `docids` (the datagen refuses
    judgments of documents not in the corpus); returns how many."""
    lines = [
        line
        for line in source.read_text().splitlines()
        if line.split()[1:2] in ([], [""]) or line.split()[1] in docids
    ]
    target.write_text("\n".join(lines) + "\n")
    return len(lines)


@pytest.mark.e2e
def test_compiled_cranfield_knrm_runs_in_the_image_on_200_documents(
    image: str, tmp_path: Path, shared_data: Path
) -> None:
    cran = shared_data / "cranfield"
    data = tmp_path / "cranfield"
    data.mkdir()
    docids = _first_documents(cran / "cran.all.1400", data / "cran.all.200", 200)
    assert len(docids) == 200
    assert _judgments_of(cran / "cranqrel", data / "cranqrel", docids) > 100
    shutil.copyfile(cran / "cran.qry", data / "cran.qry")
    files = {
        str(data / n): f"{DATA_DIR}/cranfield/{n}" for n in ("cran.all.200", "cran.qry", "cranqrel")
    }
    destination = f"{PUSH_MOUNT}/cranfield-knrm"
    config = load_config(
        "cranfield-knrm",
        [
            f"collection.documents={DATA_DIR}/cranfield/cran.all.200",
            f"collection.queries={DATA_DIR}/cranfield/cran.qry",
            f"collection.qrels={DATA_DIR}/cranfield/cranqrel",
            "datagen.vocab.size=2000",
            *kfp_testing.SMALL_BUDGET,
            # Bless whatever 20 steps give, so the push path runs.
            "evaluator.min_delta_vs_first_stage=null",
            "evaluator.min_delta_vs_baseline=null",
            f"runner.pipeline_root={kfp_testing.PIPELINE_ROOT}",
            f"pusher.destination={destination}",
        ],
        check_inputs=False,
    )
    _, result, pods, models = _run_in_image(image, tmp_path, config, files)
    _check_run(result, pods, models, destination)
