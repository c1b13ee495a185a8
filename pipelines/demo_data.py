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
import random
from pathlib import Path

from rankcore.file_io import write_text_atomic

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
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "documents": str(out / "corpus.jsonl"),
        "queries": str(out / "queries.jsonl"),
        "qrels": str(out / "qrels.txt"),
    }
    write_text_atomic(
        paths["documents"],
        "".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, _, t in docs),
    )
    write_text_atomic(
        paths["queries"], "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries)
    )
    write_text_atomic(paths["qrels"], "".join(f"{q} 0 {d} {g}\n" for q, d, g in qrels))
    return paths
