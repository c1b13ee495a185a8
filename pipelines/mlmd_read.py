"""Reading a pipeline's SQLite MLMD store, as `rankpipe run`'s console (a finished component's
key figure, pipelines/console/figures.py) and `rankpipe runs` (pipelines/runs.py) both do.

One copy of the read-only connection and of the custom-property accessor, which were written
twice before. ml_metadata is imported when a store is opened, not with this module: the console
imports it at start-up, before anything has run.
"""

from __future__ import annotations

from typing import Any


def open_readonly(path: str) -> Any:
    """A read-only MetadataStore on the SQLite file at `path` (the runner keeps writing it)."""
    from ml_metadata import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = path
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    return metadata_store.MetadataStore(config)


def prop(item: Any, name: str) -> Any:
    """A custom property of an MLMD artifact, execution or context as a Python value (None when
    it is not set)."""
    value = item.custom_properties.get(name)
    if value is None:
        return None
    return getattr(value, value.WhichOneof("value"))


def output_artifacts(store: Any, execution_ids: list[int]) -> tuple[list, dict[int, str]]:
    """The output artifacts of the executions, and their type names by type id."""
    from ml_metadata.proto import metadata_store_pb2

    events = store.get_events_by_execution_ids(execution_ids)
    ids = [e.artifact_id for e in events if e.type == metadata_store_pb2.Event.OUTPUT]
    artifacts = store.get_artifacts_by_id(ids) if ids else []
    types = {t.id: t.name for t in store.get_artifact_types_by_id({a.type_id for a in artifacts})}
    return artifacts, types
