"""An evaluation and a recording from Python, with cfgs only (docs/python.rst): what ``scripts/eval.py`` and
``scripts/record.py`` do, without their flags.

Run it with ``tools/run.sh python docs/examples/run_from_python.py [OUTPUT_DIR]``; ``tests/runs/test_runs_library.py``
runs it.
"""

from __future__ import annotations

import os
import sys

from isaaclab_suspend.chunking import stats_table
from isaaclab_suspend.runs import EmbeddedModelCfg, EvaluationCfg, RecordingCfg, RunEnvCfg, evaluate, record


def main(output_dir: str = "outputs/python_runs", num_envs: int = 16, steps: int = 400, episodes: int = 16) -> dict:
    """Evaluate Cartpole's embedded LQR planner under the naive trigger and the global clock, then record
    ``episodes`` demos of it on the global clock; returns the figures of both."""
    env = RunEnvCfg(task="Isaac-Cartpole-Suspendable", num_envs=num_envs, seed=7, desync=True)
    runs = evaluate(EvaluationCfg(env=env, model=EmbeddedModelCfg(chunk_length=16), schedules=["any", "global_clock"],
                                  steps=steps))
    print(stats_table({name: run.figures for name, run in runs.items()}))
    demos = record(RecordingCfg(env=env, model=EmbeddedModelCfg(chunk_length=16), episodes=episodes,
                                output=os.path.join(output_dir, "cartpole.hdf5")))
    print(f"{demos.written} episodes written to {demos.paths[0]} in {demos.steps} steps")
    return {"evaluation": {name: run.figures for name, run in runs.items()}, "recording": demos}


if __name__ == "__main__":
    main(*sys.argv[1:2])
