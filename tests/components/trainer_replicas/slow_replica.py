"""A Trainer replica (components/trainer_replicas/replica.py) slowed down so that the resume
test can kill it between checkpoints. Same arguments as the replica module."""

import sys
import time

from components.trainer_replicas import replica
from trainer_module import training

_check = training.Controller._check


def _slow_check(self, step, out):
    _check(self, step, out)
    time.sleep(0.25)  # leaves time to SIGKILL a replica between checkpoints


if __name__ == "__main__":
    training.Controller._check = _slow_check
    sys.exit(replica.main())
