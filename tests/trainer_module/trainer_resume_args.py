"""FnArgs shared by the SIGKILL resume test and its subprocess (same run fingerprint).

A SimpleNamespace with FnArgs' attribute names: importing tfx costs the subprocess ~20 s
(test_trainer_export covers run_fn with the real tfx FnArgs).
"""

import trainer_testdata

STEPS = 20


def fn_args(examples: str, transform_graph: str, root: str, execution_id: int):
    # log_every=1: train_results' loss_history then has every step's loss, which shows which
    # batch each step of a resumed session trained on.
    # keep_finished_checkpoints: the tests compare the finished runs' last checkpoints.
    cfg = trainer_testdata.small_config(
        train_steps=STEPS,
        checkpoint_every=5,
        validate_every=10,
        log_every=1,
        keep_finished_checkpoints=True,
    )
    return trainer_testdata.fn_args(
        root, examples, transform_graph, cfg, STEPS, execution_id, real=False
    )
