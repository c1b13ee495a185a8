"""A small synthetic collection for the demo: BEIR corpus/queries and TREC qrels, seeded.

Each document is about one topic (a few of the topic's words among filler words). A query names
two words of a topic; the documents of that topic are relevant (more so when they hold a query
word), and documents of other topics that merely repeat a query word are judged non-relevant.
Term matching (BM25) is fooled by those repetitions; a reranker that learns which words belong
together can fix the order, which gives the demo a learnable signal beyond the first stage.
For demos only: tests of real behaviour use the collections in ../shared/data.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

FILE_NAMES = {"documents": "corpus.jsonl", "queries": "queries.jsonl", "qrels": "qrels.txt"}
# Written beside the files: a directory without it holds somebody else's data, which the demo
# never overwrites (a mistyped collection path once made it overwrite a user's corpus).
MARKER = ".rankpipe-demo"


class NotADemoDirectory(ValueError):
    """The directory holds files the demo generator did not write."""


_SYLLABLES = "ka lo mi re su ta ne vo pi da ru so fe li go ma ze tu ni bo".split()


def _words(rng: random.Random, n: int) -> list[str]:
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))))
    return sorted(words)


def generate(
    out_dir: str | Path, seed: int = 13, num_documents: int = 600, num_queries: int = 60
) -> dict[str, str]:
    """Writes corpus.jsonl, queries.jsonl and qrels.txt under out_dir; returns their paths."""
    rng = random.Random(seed)
    num_topics = max(4, num_queries // 3)
    vocab = _words(rng, num_topics * 12 + 200)
    filler, topic_pool = vocab[:200], vocab[200:]
    topics = [topic_pool[i * 12 : (i + 1) * 12] for i in range(num_topics)]

    docs = []
    for i in range(num_documents):
        topic = rng.randrange(num_topics)
        words = rng.sample(topics[topic], 4) + rng.choices(filler, k=rng.randint(20, 40))
        if rng.random() < 0.5:
            # A distractor: another topic's word, repeated, as term matching overrates.
            other = rng.choice([t for t in range(num_topics) if t != topic])
            words += [rng.choice(topics[other])] * rng.randint(2, 4)
        rng.shuffle(words)
        docs.append((f"D{i}", topic, " ".join(words)))

    queries, qrels = [], []
    for q in range(num_queries):
        topic = q % num_topics
        terms = rng.sample(topics[topic], 2)
        qid = f"Q{q}"
        queries.append((qid, " ".join(terms)))
        for docid, doc_topic, text in docs:
            hits = sum(t in text.split() for t in terms)
            if doc_topic == topic:
                qrels.append((qid, docid, 2 if hits else 1))
            elif hits:
                qrels.append((qid, docid, 0))

    out = Path(out_dir)
    check_writable(out)
    # Written whole into a sibling directory first, then moved in: an interrupted or failed
    # generation leaves no half collection where a run would read it. (Plain files, not
    # rankcore.file_io: its TensorFlow import would cost `rankpipe data demo` seconds.)
    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        texts = {
            "documents": "".join(
                json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, _, t in docs
            ),
            "queries": "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries),
            "qrels": "".join(f"{q} 0 {d} {g}\n" for q, d, g in qrels),
        }
        for key, text in texts.items():
            (staging / FILE_NAMES[key]).write_text(text)
        (staging / MARKER).write_text(marker_text(seed, num_documents, num_queries))
        if not out.exists():
            os.rename(staging, out)
        else:  # an empty directory, or an earlier demo's: replaced file by file
            for name in (*FILE_NAMES.values(), MARKER):
                os.replace(staging / name, out / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {key: str(out / name) for key, name in FILE_NAMES.items()}


def misplaced(documents: str, queries: str, qrels: str) -> str | None:
    """Which collection key is not where the generator writes (FILE_NAMES, in one directory:
    the documents'), as "key: path"; None when all three are."""
    directory = os.path.dirname(documents)
    for key, path in zip(FILE_NAMES, (documents, queries, qrels)):
        if path != os.path.join(directory, FILE_NAMES[key]):
            return f"collection.{key}: {path}"
    return None


def marker_text(seed: int, num_documents: int, num_queries: int) -> str:
    """What MARKER holds: the settings the collection beside it was generated with."""
    return f"seed {seed} documents {num_documents} queries {num_queries}\n"


def is_current(out_dir: str | Path, seed: int, num_documents: int, num_queries: int) -> bool:
    """Whether out_dir holds the whole demo collection of these settings (else it is made
    again: a changed seed or size must not silently reuse an earlier collection)."""
    out = Path(out_dir)
    marker = out / MARKER
    return (
        marker.is_file()
        and marker.read_text() == marker_text(seed, num_documents, num_queries)
        and all((out / name).is_file() for name in FILE_NAMES.values())
    )


def check_writable(out_dir: str | Path) -> None:
    """Refuses a directory that holds anything the demo generator did not write (no MARKER):
    the demo never writes into a directory of the user's data."""
    out = Path(out_dir)
    if not out.exists():
        return
    if not out.is_dir():
        raise NotADemoDirectory(f"{out}: not a directory")
    if (out / MARKER).exists():
        return
    foreign = sorted(p.name for p in out.iterdir())
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise NotADemoDirectory(
            f"{out} holds files the demo generator did not write ({shown}); it writes the "
            "demo collection only into a new or empty directory, or over an earlier demo"
        )
