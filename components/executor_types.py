"""The argument types of a TFX executor's `Do` (tfx/dsl/components/base/base_executor.py),
named once for this package's executors: artifacts by key, and exec properties by name."""

from __future__ import annotations

from typing import Any

from tfx import types

Artifacts = dict[str, list[types.Artifact]]
ExecProperties = dict[str, Any]
