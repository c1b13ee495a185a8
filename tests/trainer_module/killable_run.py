"""Subprocess body for the SIGKILL resume test: run_fn, slowed down so it can be killed mid-run.

Usage: killable_run.py EXAMPLES TRANSFORM_GRAPH PIPELINE_ROOT EXECUTION_ID
"""

import sys
import time

import trainer_resume_args

from trainer_module import training
from trainer_module.run_fn import run_fn

_check = training.Controller._check


def _slow_check(self, step, out):
    _check(self, step, out)
    time.sleep(0.3)  # leaves time to SIGKILL between checkpoints


if __name__ == "__main__":
    training.Controller._check = _slow_check
    examples, transform_graph, root, execution_id = sys.argv[1:5]
    run_fn(trainer_resume_args.fn_args(examples, transform_graph, root, int(execution_id)))
