import numpy as np
import pytest
import tensorflow as tf
import trainer_testdata

from trainer_module import inputs


def test_parse_group_splits_and_truncates():
    record = trainer_testdata.group_example(
        "q1", [5, 6, 7], ["a", "b"], [[8, 9, 10, 11], [12]], [1.0, 0.0], [1, 1]
    )
    got = inputs.parse_group(tf.constant(record), max_query_length=2, max_doc_length=3)
    np.testing.assert_array_equal(got["query"], [5, 6])
    np.testing.assert_array_equal(got["docs"], [[8, 9, 10], [12, 0, 0]])
    np.testing.assert_array_equal(got["labels"], [1.0, 0.0])


def test_train_batches_shape_and_determinism(examples_dir):
    cfg = trainer_testdata.small_config(batch_size=4)
    files = trainer_testdata.split_pattern(examples_dir, "train")
    assert inputs.peek_group_size(files) == 2

    def first_batches():
        ds = inputs.make_train_dataset(files, cfg, 8, 16, 2, per_replica_batch=4)
        return [b for b in ds.take(3)]

    a, b = first_batches(), first_batches()
    assert a[0]["docs"].shape[:2] == [4, 2]
    assert a[0]["query"].shape[0] == 4
    for x, y in zip(a, b):  # seeded shuffle: same order every run
        np.testing.assert_array_equal(x["docs"], y["docs"])


def test_static_shapes_pad_to_max_lengths(examples_dir):
    cfg = trainer_testdata.small_config(static_shapes=True)
    ds = inputs.make_train_dataset(
        trainer_testdata.split_pattern(examples_dir, "train"), cfg, 8, 16, 2, 4
    )
    assert ds.element_spec["docs"].shape.as_list() == [4, 2, 16]
    assert ds.element_spec["query"].shape.as_list() == [4, 8]


def test_bucketing_respects_token_budget(examples_dir):
    cfg = trainer_testdata.small_config(bucketing={"enabled": True, "token_budget": 120})
    ds = inputs.make_train_dataset(
        trainer_testdata.split_pattern(examples_dir, "train"), cfg, 8, 16, 2, 4
    )
    sizes = set()
    for batch in ds.take(10):
        b, n, ld = batch["docs"].shape
        assert b * n * (8 + ld) <= 120
        sizes.add(b)
    assert len(sizes) > 1  # different lengths -> different batch sizes


def test_bucket_boundaries_geometric():
    bounds = inputs.bucket_boundaries(30, 8, 1.5)
    assert bounds[0] == 8 and bounds == sorted(set(bounds)) and bounds[-1] < 30


def test_eval_dataset_flattens_candidates(examples_dir):
    ds = inputs.make_eval_dataset(trainer_testdata.split_pattern(examples_dir, "dev"), 16, 8, 16)
    batch = next(iter(ds))
    assert batch["doc"].shape[0] == 16 and batch["qid"].dtype == tf.string
    assert set(batch["judged"].numpy()) <= {0, 1}


@pytest.mark.parametrize("batch_size", [1, 3, 16])
def test_eval_batch_parsing_equals_per_record_parsing(examples_dir, batch_size):
    """make_eval_dataset's vectorized parsing gives exactly what parse_group per record, its
    first candidate and padded_batch gave: cut and padded alike, in file order."""
    records = trainer_testdata.read_records(trainer_testdata.split_pattern(examples_dir, "dev")[0])
    records = records[:20] + [  # a cut query and doc, an empty document, a one-id query
        trainer_testdata.group_example("q", [5, 6, 7, 8], ["a"], [list(range(10, 19))], [1.0], [1]),
        trainer_testdata.group_example("r", [9], ["c"], [[]], [2.0], [0]),
    ]
    lq, ld = 3, 6
    got = [
        inputs.parse_eval_batch(tf.constant(records[i : i + batch_size]), lq, ld)
        for i in range(0, len(records), batch_size)
    ]
    want = (
        tf.data.Dataset.from_tensor_slices(records)
        .map(lambda r: inputs.parse_group(r, lq, ld))
        .map(
            lambda x: {
                "qid": x["qid"],
                "docid": x["docids"][0],
                "query": x["query"],
                "doc": x["docs"][0],
                "label": x["labels"][0],
                "judged": x["judged"][0],
                "first_stage_score": x["first_stage_scores"][0],
            }
        )
        .padded_batch(batch_size)
    )
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys()
        for key in w:
            assert g[key].dtype == w[key].dtype
            np.testing.assert_array_equal(g[key].numpy(), w[key].numpy(), err_msg=key)


@pytest.mark.parametrize("static", [False, True])
def test_batch_parsing_equals_per_record_parsing(examples_dir, static):
    """The vectorized train parsing gives exactly parse_group + padded_batch's batches."""
    records = trainer_testdata.read_records(
        trainer_testdata.split_pattern(examples_dir, "train")[0]
    )
    records = records[:10] + [  # truncated query and doc, an empty document
        trainer_testdata.group_example(
            "q", [5, 6, 7, 8], ["a", "b"], [list(range(10, 19)), []], [1.0, 0.0], [1, 1]
        ),
        trainer_testdata.group_example("r", [9], ["c", "d"], [[7], [8, 9]], [0.0, 2.0], [1, 1]),
    ]
    lq, ld = 3, 6
    got = [
        inputs.parse_train_batch(tf.constant(records[i : i + 4]), lq, ld, static, 2)
        for i in range(0, len(records), 4)
    ]
    shapes = (
        {"query": [lq], "docs": [2, ld], "labels": [None]}
        if static
        else {"query": [None], "docs": [None, None], "labels": [None]}
    )
    want = (
        tf.data.Dataset.from_tensor_slices(records)
        .map(lambda r: inputs.parse_group(r, lq, ld))
        .map(lambda x: {k: x[k] for k in ("query", "docs", "labels")})
        .padded_batch(4, padded_shapes=shapes)
    )
    for g, w in zip(got, want, strict=True):
        for key in ("query", "docs", "labels"):
            assert g[key].dtype == w[key].dtype
            np.testing.assert_array_equal(g[key].numpy(), w[key].numpy(), err_msg=key)
    assert got[-1]["docs"].shape == ([4, 2, ld] if static else [4, 2, 6])


@pytest.mark.parametrize("static", [False, True])
def test_list_batches_cut_query_padding_to_the_batch(static):
    # Query rows of 1..6 ids (a 0 inside a row is not padding), padded to the widest (6).
    lengths = [1, 2, 3, 4, 5, 6, 2, 1]
    queries = np.zeros([len(lengths), 6], np.int64)
    for row, n in enumerate(lengths):
        queries[row, :n] = 7 + row
    queries[5, 2] = 0
    documents = np.ones([4, 2], np.float32)
    index = np.ones([len(lengths), 3], np.int32)
    labels = np.zeros([len(lengths), 3], np.float32)
    mask = np.ones([len(lengths), 3], bool)
    cfg = trainer_testdata.small_config(static_shapes=static)
    lists = inputs.CandidateLists(queries, index, documents, labels, mask)
    ds = inputs.make_list_dataset(lists, cfg, per_replica_batch=2)
    by_id = {int(q[0]): q for q in queries}
    widths = set()
    for batch in ds.take(12):
        got = batch["query"].numpy()
        rows = [by_id[int(q[0])] for q in got]
        want = 6 if static else max(lengths[int(q[0]) - 7] for q in got)
        widths.add(got.shape[1])
        assert got.shape[1] == want
        np.testing.assert_array_equal(got, np.stack(rows)[:, :want])
        np.testing.assert_array_equal(np.stack(rows)[:, want:], 0)  # only padding was cut
    assert widths == {6} if static else len(widths) > 1


def test_multi_worker_pipelines_split_the_one_worker_stream_by_batch(examples_dir):
    """Worker i of n keeps batches i, i + n, ... of the stream one worker reads: together the
    workers train on exactly the global batches of one worker (docs/trainer.md)."""
    import tensorflow as tf

    cfg = trainer_testdata.small_config()
    files = trainer_testdata.split_pattern(examples_dir, "train")
    one = list(inputs.make_train_dataset(files, cfg, 8, 16, 2, 4).take(6))
    workers = [
        list(
            inputs.make_train_dataset(
                files, cfg, 8, 16, 2, 4, tf.distribute.InputContext(2, i, 2)
            ).take(3)
        )
        for i in range(2)
    ]
    for k in range(3):
        for i in range(2):
            np.testing.assert_array_equal(workers[i][k]["docs"], one[2 * k + i]["docs"])
            np.testing.assert_array_equal(workers[i][k]["query"], one[2 * k + i]["query"])


def test_list_batches_carry_each_candidates_row_of_the_document_table():
    """A batch's doc_vectors [b, n, H] are the table's rows its queries' lists name (zeros for
    padding), with the labels and mask of the same queries."""
    rng = np.random.default_rng(0)
    documents = np.concatenate([np.zeros([1, 3]), rng.normal(size=[5, 3])]).astype(np.float32)
    index = np.array([[1, 2, 0], [3, 1, 5], [4, 0, 0], [5, 2, 3]], np.int32)
    mask = index > 0
    labels = (index == 1).astype(np.float32)
    queries = np.arange(1, 5, dtype=np.int64)[:, None]  # query i's id is i + 1
    cfg = trainer_testdata.small_config()
    lists = inputs.CandidateLists(queries, index, documents, labels, mask)
    for batch in inputs.make_list_dataset(lists, cfg, per_replica_batch=2).take(6):
        rows = batch["query"].numpy()[:, 0] - 1
        np.testing.assert_array_equal(batch["doc_vectors"].numpy(), lists.doc_vectors(rows))
        np.testing.assert_array_equal(batch["doc_vectors"].numpy()[~mask[rows]], 0.0)
        np.testing.assert_array_equal(batch["labels"].numpy(), labels[rows])
        np.testing.assert_array_equal(batch["mask"].numpy(), mask[rows])
