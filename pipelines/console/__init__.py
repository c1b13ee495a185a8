"""What `rankpipe run` shows while the pipeline runs, and where everything else goes.

Quiet (the default): the console gets one line per component as it starts and as it ends
(status, seconds, one key figure read from the artifacts it produced), the Trainer's progress,
then the summary; everything else, at full verbosity, goes to a log file under the pipeline
root. Verbose (`-v`): every log record on the console as well, nothing redirected.

One module per concern, this package re-exporting what pipelines/commands.py and the tests use:
- capture.py: the log file, and fds 1 and 2 pointed at it (C++ code and child processes);
- records.py: TFX's LocalDagRunner log records and the Trainer's progress record -> lines;
- run_console.py: RunConsole, the lines themselves;
- figures.py: the key figure of a finished component, read from MLMD (which figure: the
  component's row in pipelines/component_table.py);
- errors.py: what a failed run prints, with the fix to try.
"""

from pipelines.console.capture import EarlyCapture, log_path_for
from pipelines.console.errors import config_fix, describe_error, error_block, log_exception
from pipelines.console.records import Progress, _ConsoleHandler
from pipelines.console.run_console import RunConsole

__all__ = [
    "EarlyCapture",
    "Progress",
    "RunConsole",
    "_ConsoleHandler",
    "config_fix",
    "describe_error",
    "error_block",
    "log_exception",
    "log_path_for",
]
