"""Tests for components.ranking_datagen.readers: real collections and hand-written edge cases."""

from __future__ import annotations

import gzip
import pickle
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from readers_testlib import check_qrels_against, cranfield_query_numbers

from components.ranking_datagen.readers import (
    BAD_RECORDS_TAG,
    READERS,
    BadRecord,
    BadRecordError,
    BeirCorpus,
    BeirQrels,
    BeirQueries,
    CranfieldDocuments,
    CranfieldQrels,
    CranfieldQueries,
    Document,
    Judgment,
    MsMarcoTsvDocuments,
    MsMarcoTsvQueries,
    Query,
    ReadCollectionFile,
    Reader,
    RunEntry,
    TrecQrels,
    TrecRun,
    TrecSgmlDocuments,
    TrecTopics,
    get_reader,
)


def _write(tmp_path: Path, name: str, content: str | bytes) -> str:
    path = tmp_path / name
    data = content.encode("utf-8") if isinstance(content, str) else content
    if name.endswith(".gz"):
        data = gzip.compress(data)
    path.write_bytes(data)
    return str(path)


def _split(items: list) -> tuple[list, list[BadRecord]]:
    good = [x for x in items if not isinstance(x, BadRecord)]
    bad = [x for x in items if isinstance(x, BadRecord)]
    return good, bad


def _line_of(path: Path, text: str) -> int:
    """1-based number of the first line equal to ``text`` (trailing whitespace/CR stripped)."""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.rstrip() == text:
            return number
    raise AssertionError(f"{text!r} not in {path}")


# ------------------------------------------------------------------------------------------
# Real data
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cranfield(shared_data: Path) -> Path:
    return shared_data / "cranfield"


@pytest.fixture(scope="module")
def msmarco(shared_data: Path) -> Path:
    return shared_data / "msmarco-dl19-subset"


@pytest.fixture(scope="module")
def trec_eval_data(shared_data: Path) -> Path:
    return shared_data / "trec_eval"


def test_cranfield_documents(cranfield: Path) -> None:
    path = cranfield / "cran.all.1400"
    docs = list(CranfieldDocuments(allow_empty_text=True).read(str(path)))
    assert len(docs) == 1400
    assert [d.docid for d in docs] == [str(i) for i in range(1, 1401)]
    first = docs[0]
    # Title then abstract (the abstract repeats the title in this collection).
    assert first.text.startswith(
        "experimental investigation of the aerodynamics of a wing in a slipstream . "
    )
    assert "an experimental study of a wing in a propeller slipstream was made" in first.text
    assert "brenckman" not in first.text  # .A is not text
    assert "j. ae. scs." not in first.text  # nor is .B
    by_id = {d.docid: d.text for d in docs}
    assert by_id["471"] == "" and by_id["995"] == ""


def test_cranfield_documents_reports_the_two_empty_ones(cranfield: Path) -> None:
    path = cranfield / "cran.all.1400"
    good, bad = _split(list(CranfieldDocuments().read_with_errors(str(path))))
    assert len(good) == 1398
    assert bad == [
        BadRecord(str(path), _line_of(path, ".I 471"), "empty text for docid '471'"),
        BadRecord(str(path), _line_of(path, ".I 995"), "empty text for docid '995'"),
    ]
    with pytest.raises(BadRecordError) as err:
        list(CranfieldDocuments(on_bad_record="fail").read(str(path)))
    assert str(err.value) == f"{path}:{_line_of(path, '.I 471')}: empty text for docid '471'"


def test_cranfield_queries_use_file_order_not_dot_i(cranfield: Path) -> None:
    path = str(cranfield / "cran.qry")
    queries = list(CranfieldQueries().read(path))
    assert len(queries) == 225
    assert [q.qid for q in queries] == [str(i) for i in range(1, 226)]
    by_id = {q.qid: q.text for q in queries}
    assert by_id["3"] == (
        "what problems of heat conduction in composite slabs have been solved so far ."
    )
    assert "\r" not in "".join(by_id.values())
    numbers = cranfield_query_numbers(path)
    assert len(numbers) == 225
    assert (numbers["1"], numbers["2"], numbers["3"], numbers["4"]) == ("001", "002", "004", "008")
    assert numbers["225"] == "365"


def test_cranfield_qrels(cranfield: Path) -> None:
    path = cranfield / "cranqrel"
    qrels = list(CranfieldQrels().read(str(path)))
    assert len(qrels) == 1837
    # gain = 5 - code: code 1 (128 lines) -> 4, 2 (387) -> 3, 3 (734) -> 2, 4 (363) -> 1.
    assert Counter(j.relevance for j in qrels) == {4: 128, 3: 387, 2: 734, 1: 363, 0: 225}
    zero_per_query = Counter(j.qid for j in qrels if j.relevance == 0)
    assert set(zero_per_query) == {str(i) for i in range(1, 226)}
    assert set(zero_per_query.values()) == {1}
    # The one double-space line, "40 85  3".
    assert _line_of(path, "40 85  3") > 0
    assert Judgment("40", "85", 2) in qrels
    assert qrels[0] == Judgment("1", "184", 3)


def test_cranfield_qrels_match_queries_and_documents(cranfield: Path) -> None:
    qrels = list(CranfieldQrels().read(str(cranfield / "cranqrel")))
    qids = {q.qid for q in CranfieldQueries().read(str(cranfield / "cran.qry"))}
    all_docs = CranfieldDocuments(allow_empty_text=True).read(str(cranfield / "cran.all.1400"))
    assert check_qrels_against(qrels, qids, {d.docid for d in all_docs}) == []
    # Skipping the empty documents loses a judged one: doc 995 is judged for query 125.
    kept = CranfieldDocuments(on_bad_record="skip").read(str(cranfield / "cran.all.1400"))
    bad = check_qrels_against(
        qrels, qids, {d.docid for d in kept}, path="cranqrel", on_bad_record="skip"
    )
    assert bad == [BadRecord("cranqrel", 0, "judged docid '995' (qid '125') is not in the corpus")]


def test_msmarco_subset(msmarco: Path) -> None:
    docs = list(BeirCorpus().read(str(msmarco / "corpus.jsonl")))
    assert len(docs) == 5000
    assert len({d.docid for d in docs}) == 5000
    assert docs[0].docid == "4380635"
    assert docs[0].text.startswith("Fahrenheit Scale-Daniel Gabriel Fahrenheit.")  # no title
    queries = list(BeirQueries().read(str(msmarco / "queries.jsonl")))
    assert len(queries) == 50
    assert queries[0] == Query("19335", "anthropological definition of environment")
    qrels = list(BeirQrels().read(str(msmarco / "qrels" / "test.tsv")))
    assert len(qrels) == 4102
    assert Counter(j.relevance for j in qrels) == {1: 1601, 2: 1804, 3: 697}
    assert len({j.qid for j in qrels}) == 43
    assert qrels[0] == Judgment("19335", "1720389", 1)
    assert check_qrels_against(qrels, {q.qid for q in queries}, {d.docid for d in docs}) == []


def test_trec_eval_qrels(trec_eval_data: Path) -> None:
    qrels = list(TrecQrels().read(str(trec_eval_data / "qrels.test")))
    assert len(qrels) == 3681
    assert Counter(j.qid for j in qrels) == {"301": 1708, "302": 1061, "303": 912}
    assert Counter(j.relevance for j in qrels) == {0: 3120, 1: 561}
    assert qrels[0] == Judgment("301", "CR93E-10279", 0)
    with_comments = list(TrecQrels().read(str(trec_eval_data / "qrels.test.with-comments")))
    # "#" starts a comment only at the start of a line: "CR#93E-1860" is a docno, as in
    # trec_eval (whose own test expects the same measures from both files).
    assert with_comments == [
        j._replace(docid="CR#93E-1860") if j.docid == "CR93E-1860" else j for j in qrels
    ]
    graded = list(TrecQrels().read(str(trec_eval_data / "qrels.rel_level")))
    assert Counter(j.relevance for j in graded) == {-1: 304, 0: 2818, 1: 462, 2: 14, 3: 77, 4: 6}


def test_trec_eval_results(trec_eval_data: Path) -> None:
    run = list(TrecRun().read(str(trec_eval_data / "results.test")))
    assert len(run) == 1500
    assert Counter(e.qid for e in run) == {"301": 500, "302": 500, "303": 500}
    assert run[0] == RunEntry("301", "FR940202-2-00150", 2.129133, 104)
    ranks = [e.rank for e in run if e.qid == "301"]
    assert ranks != sorted(ranks)  # kept as read, not renumbered
    trunc = list(TrecRun().read(str(trec_eval_data / "results.trunc")))
    assert len(trunc) == 584
    assert {e.qid for e in trunc} == {"301", "303"}
    # A line with trailing junk after the run tag, as trec_eval tolerates.
    assert RunEntry("301", "FBIS3-27619", 2.138276, 99) in trunc


def test_lucene_run(cranfield: Path) -> None:
    run = list(TrecRun().read(str(cranfield / "runs" / "lucene-english-100.run")))
    assert len(run) == 225 * 100
    per_query = Counter(e.qid for e in run)
    assert set(per_query) == {str(i) for i in range(1, 226)}
    assert set(per_query.values()) == {100}
    assert {e.rank for e in run} == {0}  # rank column all 0: kept, ranking is by score
    assert run[0] == RunEntry("1", "51", 15.070387, 0)


# ------------------------------------------------------------------------------------------
# Hand-written files, good input
# ------------------------------------------------------------------------------------------

SGML = """\
<DOC><DOCNO> d1 </DOCNO><TEXT>One-line document.</TEXT></DOC>
<DOC>
<DOCNO>d2</DOCNO>
<DATE>1990</DATE>
<HEADLINE>
Big &amp; <i>bold</i> news
</HEADLINE>
<TEXT>
First paragraph.
<P>Second   paragraph.</P>
</TEXT>
</DOC>
junk between documents is ignored
<DOC>
<DOCNO>d3</DOCNO>
<DOCHDR>http://example.com header</DOCHDR>
Plain body without text tags.
</DOC>
"""


def test_trec_sgml(tmp_path: Path) -> None:
    path = _write(tmp_path, "docs.sgml", SGML)
    assert list(TrecSgmlDocuments().read(path)) == [
        Document("d1", "One-line document."),
        Document("d2", "Big & bold news First paragraph. Second paragraph."),
        Document("d3", "Plain body without text tags."),
    ]
    only_text = TrecSgmlDocuments(text_tags=["TEXT"])
    assert list(only_text.read(path))[1].text == "First paragraph. Second paragraph."


TOPICS = """\
<top>
<num> Number: 301
<title> International Organized Crime

<desc> Description:
Identify organizations that participate in international criminal activity.

<narr> Narrative:
A relevant document must as a minimum identify the organization.
</top>

<top>
<num> Number: 051 <title> Topic: Airbus Subsidies
<desc> Description: Document will discuss government assistance to Airbus.
</top>
"""


def test_trec_topics(tmp_path: Path) -> None:
    path = _write(tmp_path, "topics.txt", TOPICS)
    assert list(TrecTopics().read(path)) == [
        Query("301", "International Organized Crime"),
        Query("051", "Airbus Subsidies"),
    ]
    with_desc = list(TrecTopics(fields=("title", "desc")).read(path))
    assert with_desc[0].text == (
        "International Organized Crime "
        "Identify organizations that participate in international criminal activity."
    )
    narr = list(TrecTopics(fields=["narr"], allow_empty_text=True).read(path))
    assert narr[0].text == "A relevant document must as a minimum identify the organization."
    assert narr[1].text == ""  # topic 051 has no <narr>
    with pytest.raises(ValueError, match="fields"):
        TrecTopics(fields=["summary"])


def test_msmarco_tsv(tmp_path: Path) -> None:
    docs = _write(tmp_path, "collection.tsv", "0\tThe presence of communication.\n1\tSecond.\n")
    assert list(MsMarcoTsvDocuments().read(docs)) == [
        Document("0", "The presence of communication."),
        Document("1", "Second."),
    ]
    queries = _write(tmp_path, "queries.tsv", "1048585\twhat is paula deen's brother\r\n")
    assert list(MsMarcoTsvQueries().read(queries)) == [
        Query("1048585", "what is paula deen's brother")
    ]


def test_beir_small(tmp_path: Path) -> None:
    corpus = _write(
        tmp_path,
        "corpus.jsonl",
        '{"_id": "a", "title": "Title", "text": "body"}\n'
        '{"_id": "b", "title": " ", "text": "only body", "metadata": {}}\n'
        '{"_id": 7, "text": "integer id"}\n',
    )
    assert list(BeirCorpus().read(corpus)) == [
        Document("a", "Title body"),
        Document("b", "only body"),
        Document("7", "integer id"),
    ]
    qrels = _write(tmp_path, "test.tsv", "query-id\tcorpus-id\tscore\nq1\ta\t2\nq1\tb\t0\n")
    assert list(BeirQrels().read(qrels)) == [Judgment("q1", "a", 2), Judgment("q1", "b", 0)]


def test_cranfield_small_query_numbering(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "cran.qry",
        ".I 001\r\n.W\r\nfirst query\r\n.I 002\r\n.W\r\n\r\n.I 004\r\n.W\r\nthird\r\nquery .\r\n",
    )
    # The empty query .I 002 still takes position 2, so the next one stays qid "3".
    good, bad = _split(list(CranfieldQueries().read_with_errors(path)))
    assert good == [Query("1", "first query"), Query("3", "third query .")]
    assert bad == [BadRecord(path, 4, "empty text for qid '2' (.I 002)")]
    assert cranfield_query_numbers(path) == {"1": "001", "2": "002", "3": "004"}


def test_gz_input(tmp_path: Path) -> None:
    content = "1 184 2\n1 29  -1\r\n2 12 1\n"
    plain = _write(tmp_path, "cranqrel", content)
    gz = _write(tmp_path, "cranqrel.gz", content)
    expected = [Judgment("1", "184", 3), Judgment("1", "29", 0), Judgment("2", "12", 4)]
    assert list(CranfieldQrels().read(plain)) == expected
    assert list(CranfieldQrels().read(gz)) == expected
    sgml = _write(tmp_path, "docs.sgml.gz", SGML)
    assert [d.docid for d in TrecSgmlDocuments().read(sgml)] == ["d1", "d2", "d3"]
    # Bad records in a gzipped file name the .gz path and the line of the decompressed text.
    bad_gz = _write(tmp_path, "bad.tsv.gz", "1\tok\n2\n")
    with pytest.raises(BadRecordError) as err:
        list(MsMarcoTsvDocuments().read(bad_gz))
    assert str(err.value) == (f"{bad_gz}:2: expected 2 tab-separated columns (id, text), got 1")


# ------------------------------------------------------------------------------------------
# Hand-written files, bad input, both policies
# ------------------------------------------------------------------------------------------

# (id, reader class, file name, content, good records kept under "skip", [(line, problem)])
BAD_CASES: list[tuple[str, Callable[..., Reader], str, str | bytes, list, list]] = [
    (
        "tsv_wrong_columns",
        MsMarcoTsvDocuments,
        "c.tsv",
        "1\tone\n2\ttwo\textra\n3\n4\tfour\n",
        [Document("1", "one"), Document("4", "four")],
        [
            (2, "expected 2 tab-separated columns (id, text), got 3"),
            (3, "expected 2 tab-separated columns (id, text), got 1"),
        ],
    ),
    (
        "tsv_empty_text",
        MsMarcoTsvQueries,
        "q.tsv",
        "1\tone\n2\t  \n",
        [Query("1", "one")],
        [(2, "empty text for qid '2'")],
    ),
    (
        "tsv_undecodable",
        MsMarcoTsvDocuments,
        "c.tsv",
        b"1\tcaf\xc3\xa9\n2\tbad \xff\xfe byte\n3\tok\n",
        [Document("1", "café"), Document("3", "ok")],
        [(2, "undecodable bytes (not UTF-8) at column 7: b'\\xff\\xfe b'")],
    ),
    (
        "tsv_duplicate_docid",
        MsMarcoTsvDocuments,
        "c.tsv",
        "1\tone\n2\ttwo\n1\tagain\n",
        [Document("1", "one"), Document("2", "two")],
        [(3, "duplicate docid '1' (first seen at line 1)")],
    ),
    (
        "sgml_unterminated_before_next_doc",
        TrecSgmlDocuments,
        "d.sgml",
        "<DOC>\n<DOCNO>a</DOCNO>\n<TEXT>no end</TEXT>\n<DOC>\n<DOCNO>b</DOCNO>\nbody b\n</DOC>\n",
        [Document("b", "body b")],
        [(1, "unterminated <DOC> (next <DOC> at line 4)")],
    ),
    (
        "sgml_unterminated_at_eof",
        TrecSgmlDocuments,
        "d.sgml",
        "<DOC><DOCNO>a</DOCNO>text a</DOC>\n\n<DOC>\n<DOCNO>b</DOCNO>\ntext b\n",
        [Document("a", "text a")],
        [(3, "unterminated <DOC> (no closing tag before end of file)")],
    ),
    (
        "sgml_missing_docno_and_empty_text",
        TrecSgmlDocuments,
        "d.sgml",
        "<DOC>\n<TEXT>x</TEXT>\n</DOC>\n<DOC>\n<DOCNO>e</DOCNO><TEXT> </TEXT>\n</DOC>\n"
        "<DOC><DOCNO>ok</DOCNO>fine</DOC>\n",
        [Document("ok", "fine")],
        [(1, "missing <DOCNO> in <DOC>"), (4, "empty text for docid 'e'")],
    ),
    (
        "sgml_undecodable_drops_doc",
        TrecSgmlDocuments,
        "d.sgml",
        b"<DOC>\n<DOCNO>a</DOCNO>\n<TEXT>\nbad \x80\n</TEXT>\n</DOC>\n"
        b"<DOC><DOCNO>b</DOCNO>b</DOC>\n",
        [Document("b", "b")],
        [(4, "undecodable bytes (not UTF-8) at column 5: b'\\x80'")],
    ),
    (
        "sgml_duplicate_docno",
        TrecSgmlDocuments,
        "d.sgml",
        "<DOC><DOCNO>a</DOCNO>one</DOC>\n<DOC>\n<DOCNO>a</DOCNO>\ntwo\n</DOC>\n",
        [Document("a", "one")],
        [(2, "duplicate docid 'a' (first seen at line 1)")],
    ),
    (
        "topics_unterminated_and_missing_num",
        TrecTopics,
        "t.txt",
        "<top>\n<title> no number\n</top>\n<top>\n<num> Number: 5\n<title> open\n"
        "<top>\n<num> Number: 6\n<title> six\n</top>\n",
        [Query("6", "six")],
        [(1, "missing <num> in <top>"), (4, "unterminated <top> (next <top> at line 7)")],
    ),
    (
        "topics_empty_title_and_duplicate",
        TrecTopics,
        "t.txt",
        "<top><num> Number: 1 <title> one </top>\n<top><num> Number: 2 <title>  </top>\n"
        "<top><num> Number: 1 <title> again </top>\n",
        [Query("1", "one")],
        [(2, "empty text for qid '2'"), (3, "duplicate qid '1' (first seen at line 1)")],
    ),
    (
        "beir_corpus_bad_lines",
        BeirCorpus,
        "corpus.jsonl",
        '{"_id": "1", "text": "ok"}\n{"_id": "2", "text": \n["not", "an object"]\n'
        '{"text": "no id"}\n{"_id": "3"}\n{"_id": "4", "title": "", "text": ""}\n',
        [Document("1", "ok")],
        [
            (2, "invalid JSON: Expecting value at column 22"),
            (3, "expected a JSON object, got list"),
            (4, "missing or invalid '_id': None"),
            (5, "missing or non-string 'text' for _id '3'"),
            (6, "empty text for docid '4'"),
        ],
    ),
    (
        "beir_queries_duplicate",
        BeirQueries,
        "queries.jsonl",
        '{"_id": "q1", "text": "a"}\n{"_id": "q1", "text": "b"}\n',
        [Query("q1", "a")],
        [(2, "duplicate qid 'q1' (first seen at line 1)")],
    ),
    (
        "beir_qrels_bad_lines",
        BeirQrels,
        "test.tsv",
        "q1\td1\t1\nq1 d2 1\nq1\td3\thigh\nq1\td1\t2\n",
        [Judgment("q1", "d1", 1)],
        [
            (2, "expected 3 tab-separated columns (qid, docid, grade), got 1"),
            (3, "non-integer relevance 'high'"),
            (4, "duplicate pair qid 'q1' docid 'd1' (first seen at line 1)"),
        ],
    ),
    (
        "trec_qrels_bad_lines",
        TrecQrels,
        "qrels",
        "301 0 d1 1\n301 0 d2\n301 0 d3 yes\n301 0 d4 1.5\n301  0\td5   0\n301 0 d1 0\n",
        [Judgment("301", "d1", 1), Judgment("301", "d5", 0)],
        [
            (2, "expected 4 columns (qid iter docid rel), got 3"),
            (3, "non-integer relevance 'yes'"),
            (4, "non-integer relevance '1.5'"),
            (6, "duplicate pair qid '301' docid 'd1' (first seen at line 1)"),
        ],
    ),
    (
        "trec_run_bad_lines",
        TrecRun,
        "run",
        "1 Q0 a 1 2.5 r\n1 Q0 b 2 r\n1 Q0 c x 1.0 r\n1 Q0 d 3 high r\n1 Q0 e 4 nan r\n"
        "1 Q0 a 5 1.0 r\n1 Q0 f 0 -1e3 r trailing words\n",
        [RunEntry("1", "a", 2.5, 1), RunEntry("1", "f", -1000.0, 0)],
        [
            (2, "expected 6 columns (qid Q0 docid rank score runid), got 5"),
            (3, "non-integer rank 'x'"),
            (4, "non-numeric score 'high'"),
            (5, "non-finite score 'nan'"),
            (6, "duplicate pair qid '1' docid 'a' (first seen at line 1)"),
        ],
    ),
    (
        "cranfield_qrels_bad_lines",
        CranfieldQrels,
        "cranqrel",
        "1 184 2 \n1 29 7\n1 30\n1 31 x\n1 184 3\n1 32 5\n",
        [Judgment("1", "184", 3), Judgment("1", "32", 0)],
        [
            (2, "unknown Cranfield relevance code 7 (expected 1..5 or -1)"),
            (3, "expected 3 columns (qid docid code), got 2"),
            (4, "non-integer relevance code 'x'"),
            (5, "duplicate pair qid '1' docid '184' (first seen at line 1)"),
        ],
    ),
    (
        "cranfield_docs_bad_blocks",
        CranfieldDocuments,
        "cran.all",
        "stray\n.I 1\n.T\ntitle one\n.W\nbody one\n.I\n.W\nx\n.I 3\n.T\n.W\n.I 1\n.T\ndup\n",
        [Document("1", "title one body one")],
        [
            (1, "text before the first '.I' line"),
            (7, "'.I' line must carry one id, got '.I'"),
            (10, "empty text for docid '3'"),
            (13, "duplicate docid '1' (first seen at line 2)"),
        ],
    ),
    (
        "cranfield_queries_duplicate_dot_i",
        CranfieldQueries,
        "cran.qry",
        b".I 001\r\n.W\r\none\r\n.I 001\r\n.W\r\ntwo\r\n.I 003\r\n.W\r\nbad \xe9\r\n",
        [Query("1", "one")],
        [
            (4, "duplicate '.I 001' for qid '2' (first seen at line 1)"),
            (9, "undecodable bytes (not UTF-8) at column 5: b'\\xe9'"),
        ],
    ),
]


@pytest.mark.parametrize(
    ("reader_cls", "name", "content", "good", "bad"),
    [case[1:] for case in BAD_CASES],
    ids=[case[0] for case in BAD_CASES],
)
def test_bad_input_skip(
    tmp_path: Path,
    reader_cls: Callable[..., Reader],
    name: str,
    content: str | bytes,
    good: list,
    bad: list[tuple[int, str]],
) -> None:
    path = _write(tmp_path, name, content)
    reader = reader_cls(on_bad_record="skip")
    assert list(reader.read(path)) == good
    got_good, got_bad = _split(list(reader.read_with_errors(path)))
    assert got_good == good
    assert got_bad == [BadRecord(path, line, problem) for line, problem in bad]


@pytest.mark.parametrize(
    ("reader_cls", "name", "content", "bad"),
    [(c[1], c[2], c[3], c[5]) for c in BAD_CASES],
    ids=[case[0] for case in BAD_CASES],
)
def test_bad_input_fail(
    tmp_path: Path,
    reader_cls: Callable[..., Reader],
    name: str,
    content: str | bytes,
    bad: list[tuple[int, str]],
) -> None:
    path = _write(tmp_path, name, content)
    line, problem = bad[0]
    with pytest.raises(BadRecordError) as err:
        list(reader_cls(on_bad_record="fail").read(path))
    assert str(err.value) == f"{path}:{line}: {problem}"
    assert err.value.bad_record == BadRecord(path, line, problem)
    assert isinstance(err.value, ValueError)
    # The default policy is "fail".
    with pytest.raises(BadRecordError):
        list(reader_cls().read(path))


def test_duplicate_check_can_be_disabled(tmp_path: Path) -> None:
    path = _write(tmp_path, "c.tsv", "1\tone\n1\tagain\n")
    reader = MsMarcoTsvDocuments(check_duplicates=False)
    assert list(reader.read(path)) == [Document("1", "one"), Document("1", "again")]


def test_invalid_policy() -> None:
    with pytest.raises(ValueError, match="on_bad_record"):
        TrecRun(on_bad_record="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on_bad_record"):
        check_qrels_against([], set(), set(), on_bad_record="warn")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------
# Collection-level checks
# ------------------------------------------------------------------------------------------


def test_check_qrels_against() -> None:
    qrels = [
        Judgment("1", "a", 1),
        Judgment("2", "a", 1),  # no query 2
        Judgment("1", "zz", 0),  # judged doc not in the corpus
        Judgment("3", "yy", 2),  # both
    ]
    queries, docs = {"1"}, {"a", "b"}
    bad = check_qrels_against(qrels, queries, docs, path="qrels.txt", on_bad_record="skip")
    assert bad == [
        BadRecord("qrels.txt", 0, "qrels qid '2' has no query"),
        BadRecord("qrels.txt", 0, "judged docid 'zz' (qid '1') is not in the corpus"),
        BadRecord(
            "qrels.txt",
            0,
            "qrels qid '3' has no query; judged docid 'yy' (qid '3') is not in the corpus",
        ),
    ]
    numbered = list(zip([10, 11, 12, 13], qrels, strict=True))
    assert [b.line for b in check_qrels_against(numbered, queries, docs, on_bad_record="skip")] == [
        11,
        12,
        13,
    ]
    with pytest.raises(BadRecordError) as err:
        check_qrels_against(numbered, queries, docs, path="qrels.txt")
    assert str(err.value) == "qrels.txt:11: qrels qid '2' has no query"
    assert check_qrels_against(qrels[:1], queries, docs) == []


# ------------------------------------------------------------------------------------------
# Registry, pickling, Beam
# ------------------------------------------------------------------------------------------


def test_registry() -> None:
    assert {kind: sorted(formats) for kind, formats in READERS.items()} == {
        "documents": ["beir_corpus", "cranfield", "msmarco_tsv", "trec_sgml"],
        "queries": ["beir_queries", "cranfield", "msmarco_tsv", "trec_topics"],
        "qrels": ["beir_qrels", "cranfield", "trec_qrels"],
        "run": ["trec_run"],
    }
    for kind, formats in READERS.items():
        for cls in formats.values():
            assert cls.kind == kind
    reader = get_reader("queries", "trec_topics", on_bad_record="skip", fields=["desc"])
    assert isinstance(reader, TrecTopics)
    assert (reader.on_bad_record, reader.fields) == ("skip", ("desc",))
    assert isinstance(get_reader("queries", "cranfield"), CranfieldQueries)
    assert isinstance(get_reader("documents", "cranfield"), CranfieldDocuments)
    with pytest.raises(ValueError, match="unknown reader kind 'corpus'"):
        get_reader("corpus", "trec_sgml")
    with pytest.raises(ValueError, match="unknown run format 'csv'"):
        get_reader("run", "csv")


def test_readers_and_errors_pickle(tmp_path: Path) -> None:
    path = _write(tmp_path, "d.sgml", SGML)
    reader = pickle.loads(pickle.dumps(TrecSgmlDocuments(text_tags=["TEXT"])))
    assert next(iter(reader.read(path))) == Document("d1", "One-line document.")
    err = pickle.loads(pickle.dumps(BadRecordError(BadRecord("p", 3, "why"))))
    assert (str(err), err.bad_record) == ("p:3: why", BadRecord("p", 3, "why"))


def _counter(result: beam.runners.runner.PipelineResult, name: str) -> int:
    counters = result.metrics().query(MetricsFilter().with_namespace("rankpipe").with_name(name))
    return sum(c.committed for c in counters["counters"])


def test_beam_flatmap_counts_skipped(tmp_path: Path) -> None:
    a = _write(tmp_path, "a.tsv", "1\tone\n2\n3\tthree\n")
    b = _write(tmp_path, "b.tsv", "4\tfour\n5\t\n")
    pipeline = TestPipeline()
    docs = (
        pipeline
        | beam.Create([a, b])
        | beam.FlatMap(MsMarcoTsvDocuments(on_bad_record="skip").read)
    )
    assert_that(
        docs, equal_to([Document("1", "one"), Document("3", "three"), Document("4", "four")])
    )
    result = pipeline.run()
    result.wait_until_finish()
    assert _counter(result, "bad_records_documents") == 2


def test_beam_read_collection_file_tagged_output(tmp_path: Path) -> None:
    path = _write(tmp_path, "qrels", "1 0 a 1\n1 0 b\n1 0 a 0\n")
    pipeline = TestPipeline()
    outputs = (
        pipeline
        | beam.Create([path])
        | beam.ParDo(ReadCollectionFile(TrecQrels(), "skip")).with_outputs(
            BAD_RECORDS_TAG, main="records"
        )
    )
    assert_that(outputs.records, equal_to([Judgment("1", "a", 1)]), label="records")
    assert_that(
        outputs[BAD_RECORDS_TAG],
        equal_to(
            [
                BadRecord(path, 2, "expected 4 columns (qid iter docid rel), got 3"),
                BadRecord(path, 3, "duplicate pair qid '1' docid 'a' (first seen at line 1)"),
            ]
        ),
        label="bad",
    )
    result = pipeline.run()
    result.wait_until_finish()
    assert _counter(result, "bad_records_qrels") == 2


def test_beam_read_collection_file_fail(tmp_path: Path) -> None:
    path = _write(tmp_path, "run", "1 Q0 a 1 1.0 r\n1 Q0 b 2 oops r\n")
    pipeline = TestPipeline()
    _ = (
        pipeline
        | beam.Create([path])
        | beam.ParDo(ReadCollectionFile(TrecRun(on_bad_record="skip"), "fail"))
    )
    with pytest.raises(Exception, match=re.escape(f"{path}:2: non-numeric score 'oops'")):
        pipeline.run().wait_until_finish()
