"""The Beam side of the readers: ``ReadCollectionFile``, a DoFn over file paths.

Apart from ``base`` so that reading the format registry (the pipeline config does, for
`rankpipe config show` among others) imports no Apache Beam; ``readers`` loads this module the
first time ``ReadCollectionFile`` is asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam

from components.ranking_datagen.readers.base import (
    BAD_RECORDS_TAG,
    PACKAGE,
    BadRecord,
    BadRecordError,
    Policy,
    Reader,
    bad_records_counter,
    check_policy,
)


class ReadCollectionFile(beam.DoFn):
    """DoFn: file path -> records (main output) and BadRecords (output tagged
    ``BAD_RECORDS_TAG``). Bad records are counted in ``rankpipe/bad_records_<kind>``; with
    ``on_bad_record="fail"`` the first one raises BadRecordError instead of being emitted.
    ``on_bad_record=None`` uses the reader's own policy."""

    def __init__(self, reader: Reader, on_bad_record: Policy | None = None) -> None:
        super().__init__()
        self.reader = reader
        self.on_bad_record = check_policy(on_bad_record or reader.on_bad_record)
        self.bad_records = bad_records_counter(reader.kind)

    def process(self, path: str) -> Iterator[Any]:
        for item in self.reader.read_with_errors(path):
            if isinstance(item, BadRecord):
                self.bad_records.inc()
                if self.on_bad_record == "fail":
                    raise BadRecordError(item)
                yield beam.pvalue.TaggedOutput(BAD_RECORDS_TAG, item)
            else:
                yield item


ReadCollectionFile.__module__ = PACKAGE
