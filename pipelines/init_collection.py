"""`rankpipe init DIR --collection PATH`: a runnable config for a collection, from its files.

A new user's collection needed 20 to 45 minutes of README reading before a first run, and the
config they copied (the demo's) carried another collection's choices. This recognises the
common layouts by their files:

- BEIR: corpus.jsonl, queries.jsonl and qrels/*.tsv (gzipped too). BEIR's own
  qrels/train.tsv, dev.tsv and test.tsv are the splits (datagen.split.method: qrels_files):
  test is evaluated, dev makes the choices; without dev a held-out slice of train does; with
  only test.tsv, every judged query is evaluated by 5-fold cross-validation.
- Cranfield: cran.all.1400 (any *.all.*), cran.qry, cranqrel.
- MS MARCO TSV: collection.tsv, queries*.tsv, qrels*.tsv or .txt (TREC qrels).
- TREC: SGML documents (<DOC>), topics (<top>) and qrels (4 columns), found by their first
  lines; a TREC run (6 columns) there becomes the first stage instead of BM25.

The config it writes is short and commented: the collection's paths and formats, its splits,
and the shipped recipe (the MiniLM dual encoder with the MPNet companion, feedback and fusion
of pipelines/configs/cranfield.yaml, read from that file so it is never kept twice), or, where
`make pretrained` has not installed the checkpoints, KNRM trained from scratch (said on the
console: it rarely beats BM25). It never writes into the collection's directory.
"""

from __future__ import annotations

import gzip
import os
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

CONFIG_NAME = "rankpipe.yaml"
CONFIG_DIR = Path(__file__).resolve().parent / "configs"
# The shipped recipe and its from-scratch fallback: their datagen, trainer and evaluator
# sections are the recipe a new collection gets.
RECIPE_CONFIG = CONFIG_DIR / "cranfield.yaml"
FALLBACK_CONFIG = CONFIG_DIR / "cranfield-knrm.yaml"
CV_FOLDS = 5
_SNIFF_BYTES = 4096


class InitError(ValueError):
    """The collection could not be recognised, or the config not written; says what to do."""


@dataclass
class Layout:
    """A recognised collection: its files, formats and how its queries are split."""

    kind: str  # beir, cranfield, msmarco_tsv, trec
    documents: str
    documents_format: str
    queries: str
    queries_format: str
    qrels: str
    qrels_format: str
    split: dict[str, Any] = field(default_factory=dict)  # datagen.split ({}: k-fold CV)
    first_stage_run: str | None = None
    notes: list[str] = field(default_factory=list)  # what init decided, for the console

    @property
    def cross_validated(self) -> bool:
        return not self.split


def _head(path: Path) -> str:
    """The first few KB of a file as text (gzip-aware), for recognising its format."""
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            return f.read(_SNIFF_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _one(
    directory: Path, patterns: tuple[str, ...], what: str, flag: str, pinned: dict[str, str]
) -> Path | None:
    """The one file matching the first pattern that matches any (or the one the user pinned
    with `flag`); an error naming `flag` when several do."""
    if pinned.get(flag.lstrip("-")):
        return Path(pinned[flag.lstrip("-")]).resolve()
    for pattern in patterns:
        found = sorted(p for p in directory.glob(pattern) if p.is_file())
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            names = ", ".join(p.name for p in found)
            raise InitError(
                f"{directory}: several files could be the {what} ({names}); name one with {flag}"
            )
    return None


def _beir(root: Path, pinned: dict[str, str]) -> Layout | None:
    corpus = _one(root, ("corpus.jsonl", "corpus.jsonl.gz"), "corpus", "--documents", pinned)
    queries = _one(root, ("queries.jsonl", "queries.jsonl.gz"), "queries", "--queries", pinned)
    qrels_dir = root / "qrels"
    if corpus is None or queries is None or not qrels_dir.is_dir():
        return None
    files = {
        name: next(
            (qrels_dir / f for f in (f"{name}.tsv", f"{name}.tsv.gz") if (qrels_dir / f).is_file()),
            None,
        )
        for name in ("train", "dev", "test")
    }
    pattern = "*.tsv.gz" if any(str(p).endswith(".gz") for p in files.values() if p) else "*.tsv"
    layout = Layout(
        "beir",
        str(corpus),
        "beir_corpus",
        str(queries),
        "beir_queries",
        str(qrels_dir / pattern),
        "beir_qrels",
    )
    train, dev, test = files["train"], files["dev"], files["test"]
    if train is None and dev is not None and test is not None:
        train, dev = dev, None  # judged dev queries are what there is to train on
        layout.notes.append("qrels/dev.tsv trains (there is no train.tsv)")
    if train is not None and (dev is not None or test is not None):
        layout.split = {"method": "qrels_files", "train_qrels": str(train)}
        if dev is not None:
            layout.split["dev_qrels"] = str(dev)
        if test is not None:
            layout.split["test_qrels"] = str(test)
        evaluated = "qrels/test.tsv" if test is not None else "qrels/dev.tsv"
        chosen = (
            "qrels/dev.tsv"
            if dev is not None and test is not None
            else f"a held-out fifth of {Path(str(train)).relative_to(root)}"
        )
        layout.notes.append(
            f"splits: BEIR's own qrels files; {evaluated} is evaluated, the choices are made "
            f"on {chosen}"
        )
    else:
        layout.notes.append(
            f"splits: {CV_FOLDS}-fold cross-validation over every judged query (no train.tsv "
            "beside the evaluated qrels)"
        )
    return layout


def _cranfield(root: Path, pinned: dict[str, str]) -> Layout | None:
    documents = _one(
        root, ("cran.all.1400", "*.all.*", "*.all"), "documents", "--documents", pinned
    )
    queries = _one(root, ("cran.qry", "*.qry"), "queries", "--queries", pinned)
    qrels = _one(root, ("cranqrel", "*qrel"), "qrels", "--qrels", pinned)
    if documents is None or queries is None or qrels is None:
        return None
    layout = Layout(
        "cranfield", str(documents), "cranfield", str(queries), "cranfield", str(qrels), "cranfield"
    )
    layout.notes.append(f"splits: {CV_FOLDS}-fold cross-validation over every judged query")
    return layout


def _msmarco(root: Path, pinned: dict[str, str]) -> Layout | None:
    documents = _one(
        root, ("collection.tsv", "collection.tsv.gz"), "documents", "--documents", pinned
    )
    if documents is None:
        return None
    queries = _one(
        root, ("queries.tsv", "queries*.tsv", "queries*.tsv.gz"), "queries", "--queries", pinned
    )
    qrels = _one(
        root, ("qrels.tsv", "qrels*.tsv", "qrels*.txt", "qrels*"), "qrels", "--qrels", pinned
    )
    if queries is None or qrels is None:
        return None
    layout = Layout(
        "msmarco_tsv",
        str(documents),
        "msmarco_tsv",
        str(queries),
        "msmarco_tsv",
        str(qrels),
        "trec_qrels",
    )
    layout.notes.append(f"splits: {CV_FOLDS}-fold cross-validation over every judged query")
    return layout


_QRELS_LINE = re.compile(r"^\S+\s+\S+\s+\S+\s+-?\d+\s*$")
_RUN_LINE = re.compile(r"^\S+\s+\S+\s+\S+\s+\d+\s+\S+\s+\S+\s*$")


def _trec(root: Path, pinned: dict[str, str]) -> Layout | None:
    """TREC files are named anything: recognised by their first lines."""
    docs, topics, qrels, runs = [], [], [], []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")):
        head = _head(path)
        lines = [line for line in head.splitlines()[:5] if line.strip()]
        if re.search(r"<DOC>", head, re.I) and re.search(r"<DOCNO>", head, re.I):
            docs.append(path)
        elif re.search(r"<top>", head, re.I):
            topics.append(path)
        elif lines and all(_RUN_LINE.match(line) for line in lines):
            runs.append(path)
        elif lines and all(_QRELS_LINE.match(line) for line in lines):
            qrels.append(path)
    for key, found in (("documents", docs), ("queries", topics), ("qrels", qrels)):
        if pinned.get(key):
            found[:] = [Path(pinned[key]).resolve()]
    if not (docs and topics and qrels):
        return None
    for what, found, flag in (("topics", topics, "--queries"), ("qrels", qrels, "--qrels")):
        if len(found) > 1:
            names = ", ".join(str(p.relative_to(root)) for p in found)
            raise InitError(
                f"{root}: several files look like TREC {what} ({names}); name one with {flag}"
            )
    parents = {p.parent for p in docs}
    documents = str(docs[0]) if len(docs) == 1 else str(root / "**" / "*")
    if len(docs) > 1 and len(parents) == 1:
        documents = str(next(iter(parents)) / "*")
    layout = Layout(
        "trec", documents, "trec_sgml", str(topics[0]), "trec_topics", str(qrels[0]), "trec_qrels"
    )
    if len(runs) == 1:
        layout.first_stage_run = str(runs[0])
        layout.notes.append(f"first stage: the TREC run {runs[0].name} (instead of BM25)")
    layout.notes.append(f"splits: {CV_FOLDS}-fold cross-validation over every judged query")
    return layout


DETECTORS = (
    ("BEIR", _beir),
    ("Cranfield", _cranfield),
    ("MS MARCO TSV", _msmarco),
    ("TREC", _trec),
)


def detect(collection: str | Path, pinned: dict[str, str] | None = None) -> Layout:
    """The collection's layout, from its files; InitError says what was looked for. `pinned`:
    files the user named ("documents", "queries", "qrels"), used as they are."""
    pinned = {k: v for k, v in (pinned or {}).items() if v}
    for key, value in pinned.items():
        if not Path(value).is_file():
            raise InitError(f"--{key} {value}: no such file")
    root = Path(collection).resolve()
    if not root.is_dir():
        raise InitError(
            f"--collection {collection}: not a directory (give the collection's folder)"
        )
    for _, detector in DETECTORS:
        layout = detector(root, pinned)
        if layout is not None:
            return layout
    found = ", ".join(sorted(p.name for p in root.iterdir())[:8]) or "nothing"
    raise InitError(
        f"{root}: no known collection layout (found: {found}). Looked for BEIR (corpus.jsonl, "
        "queries.jsonl, qrels/*.tsv), Cranfield (cran.all.1400, cran.qry, cranqrel), MS MARCO "
        "(collection.tsv, queries*.tsv, qrels*) and TREC files (<DOC> documents, <top> topics, "
        "4-column qrels); or write the config by hand (docs/config-reference.md)"
    )


def _recipe(pretrained: bool) -> dict[str, Any]:
    """The datagen, trainer and evaluator sections of the shipped recipe (or its fallback)."""
    data = yaml.safe_load((RECIPE_CONFIG if pretrained else FALLBACK_CONFIG).read_text())
    recipe = {key: data.get(key, {}) for key in ("datagen", "trainer", "evaluator")}
    # Cranfield's own choices that are not the recipe's: its grade threshold (a 0/1 collection
    # has no grade 2) and its minimum nDCG@10.
    recipe["datagen"].get("sampling", {}).pop("positive_threshold", None)
    recipe["evaluator"].pop("min_values", None)
    return recipe


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "collection"


def build_config(layout: Layout, name: str, pipeline_name: str, pretrained: bool) -> dict[str, Any]:
    """The config as a dict (render_config writes it with its comments)."""
    collection: dict[str, Any] = {
        "name": name,
        "documents": layout.documents,
        "documents_format": layout.documents_format,
        "queries": layout.queries,
        "queries_format": layout.queries_format,
        "qrels": layout.qrels,
        "qrels_format": layout.qrels_format,
    }
    if layout.first_stage_run:
        collection["first_stage_run"] = layout.first_stage_run
    recipe = _recipe(pretrained)
    datagen, evaluator = recipe["datagen"], recipe["evaluator"]
    evaluator.pop("cross_validation", None)
    if layout.cross_validated:
        evaluator = {"cross_validation": {"folds": CV_FOLDS}, **evaluator}
        datagen["split"] = {"method": "kfold", "num_folds": CV_FOLDS}
    else:
        datagen["split"] = dict(layout.split)
    evaluator["split"] = "test"
    return {
        "collection": collection,
        "datagen": datagen,
        "trainer": recipe["trainer"],
        "evaluator": evaluator,
        "runner": {"pipeline_name": pipeline_name},
    }


_SECTION_COMMENTS = {
    "collection": "# The collection, as `rankpipe init` found it (its files are only read).",
    "datagen": "# Candidates (BM25 unless collection.first_stage_run), splits and tokenization.",
    "trainer": "# The reranker and how it trains (docs/trainer.md).",
    "evaluator": "# The test queries' evaluation and the gate that blesses or refuses the model.",
    "runner": "# Artifacts go to outputs/pipelines/<pipeline_name>, pushed models to "
    "outputs/serving/<pipeline_name>.",
}


def render_config(config: dict[str, Any], layout: Layout, source: str, pretrained: bool) -> str:
    recipe = (
        "all-MiniLM-L6-v2 as a dual encoder, its query tower fine-tuned "
        "against frozen document vectors, all-mpnet-base-v2 beside it, pseudo-relevance "
        "feedback and fusion with the first stage, chosen on dev (pipelines/configs/"
        "cranfield.yaml)"
        if pretrained
        else "KNRM trained from scratch; the shipped recipe needs `make pretrained`, then "
        "`rankpipe init --recipe shipped --force ...`"
    )
    header = [
        f"rankpipe config for {source} ({layout.kind} layout), written by `rankpipe init`.",
        f"Recipe: {recipe}.",
        "Run it: rankpipe run <this file>; one key for one run: --set trainer.train_steps=500",
        "Every key: docs/config-reference.md",
        *(f"{note[0].upper()}{note[1:]}." for note in layout.notes),
    ]
    lines = [
        wrapped
        for line in header
        for wrapped in textwrap.wrap(
            line, width=100, initial_indent="# ", subsequent_indent="#   ", break_on_hyphens=False
        )
    ]
    for section, body in config.items():
        lines += ["", _SECTION_COMMENTS[section]]
        lines.append(yaml.safe_dump({section: body}, sort_keys=False, width=100).rstrip())
    return "\n".join(lines) + "\n"


@dataclass
class InitResult:
    config_path: str
    layout: Layout
    pretrained: bool


def init(
    directory: str | Path,
    collection: str | Path,
    name: str | None = None,
    force: bool = False,
    overrides: dict[str, str | None] | None = None,
    recipe: str = "auto",
) -> InitResult:
    """Writes DIRECTORY/rankpipe.yaml for the collection at COLLECTION; returns where and what.

    `overrides` pins files detection would guess ("documents", "queries", "qrels": paths).
    `recipe`: shipped (needs `make pretrained`), scratch (KNRM from scratch) or auto (shipped
    where the checkpoints are installed).
    """
    from trainer_module.pretrained import PRETRAINED

    root = Path(collection).resolve()
    out = Path(directory).resolve()
    if out == root or root in out.parents:
        raise InitError(
            f"{directory}: inside the collection ({root}); rankpipe never writes there: choose "
            "a directory outside it"
        )
    layout = detect(root, overrides)
    target = out / CONFIG_NAME
    if target.exists() and not force:
        raise InitError(f"{target} exists; --force writes it again")
    installed = all(p.installed() for p in PRETRAINED)
    if recipe == "shipped" and not installed:
        raise InitError(
            f"--recipe shipped needs {' and '.join(p.name for p in PRETRAINED)}: run "
            "`make pretrained`"
        )
    pretrained = installed if recipe == "auto" else recipe == "shipped"
    label = _slug(name or root.name)
    config = build_config(layout, label, f"rankpipe-{_slug(out.name)}", pretrained)
    out.mkdir(parents=True, exist_ok=True)
    # Temp file and rename: never a half-written config. (rankcore.file_io does the same
    # through tf.io.gfile, whose TensorFlow import would cost this command seconds.)
    tmp = out / f".{CONFIG_NAME}.tmp-{os.getpid()}"
    tmp.write_text(render_config(config, layout, str(root), pretrained))
    os.replace(tmp, target)
    return InitResult(str(target), layout, pretrained)
