"""Observation demand on the real two-camera push-cube (4 envs, 32x32 RGB, episodes of 60 steps started at random
points): the cameras render only for the model's calls, and what the calls see is bit-identical to a run that
renders every step; with a recorder attached or a model that observes every step, every step renders."""

import pytest
import torch

from isaaclab.managers import SceneEntityCfg

from isaaclab_suspend.chunking import ActionChunkingPolicy
from isaaclab_suspend.runs import EpisodeLedger, rollout, start_episodes
from isaaclab_suspend.runs.recording import dataset_recorder_cfg
from isaaclab_suspend.tasks.embedded import make_default_model
from isaaclab_suspend.tasks.env_factory import open_env

TASK = "Isaac-PushCube-TwoCamera-Suspendable"
CAMERAS = ("scene_camera", "pusher_camera")
H, STEPS, SEED = 8, 64, 5
COUNTS = ("inference_calls", "rows_inferred", "envs_served", "active_env_steps", "suspended_env_steps",
          "episodes_completed", "calls_per_env", "roughness")
ATTRS = {f"scene__{c}__{d}": 32 for c in CAMERAS for d in ("height", "width")} | {"episode_length_s": 1.0}


def _count_renders(env) -> None:
    """Count each camera's renders in ``env.renders`` (Isaac Lab's camera renders in ``_update_buffers_impl`` when
    its data is read after an update)."""
    env.renders = dict.fromkeys(CAMERAS, 0)
    for name in CAMERAS:
        camera = env.scene[name]
        render = camera._update_buffers_impl

        def counted(env_mask, name=name, render=render):
            env.renders[name] += 1
            return render(env_mask)

        camera._update_buffers_impl = counted


@pytest.fixture(scope="module")
def env():
    with open_env(TASK, 4, **ATTRS) as env:
        _count_renders(env)
        yield env


class RecordingModel:
    """The task's planner, keeping a copy of every observation row it is handed."""

    def __init__(self, observe_every_step: bool = False):
        self.planner = make_default_model(TASK, H)
        self.calls: list[dict] = []
        if observe_every_step:
            self.observe_step = lambda obs, moved, restarted: obs

    def __call__(self, obs_rows, env_ids):
        self.calls.append({"env_ids": env_ids.clone(), "policy": obs_rows["policy"].clone(),
                           **{c: obs_rows["images"][c].clone() for c in CAMERAS}})
        return self.planner(obs_rows, env_ids)


def _run(env, schedule: str, demand: bool, model: RecordingModel | None = None, steps: int = STEPS):
    """The model's calls, the episode log, the policy's figures, the renders per camera of one run (the reset's
    included) and the steps in which every camera rendered."""
    model = model or RecordingModel()
    policy = ActionChunkingPolicy(model, env, chunk_length=H, schedule=schedule, observation_demand=demand)
    before = dict(env.renders)
    obs = start_episodes(env, SEED, desync=True)
    ledger = EpisodeLedger(env, retire=policy.retire)
    rendering_steps, last = 0, dict(env.renders)
    for _ in rollout(env, policy, obs, steps, ledger):
        rendering_steps += all(env.renders[c] > last[c] for c in CAMERAS)
        last = dict(env.renders)
    policy.close()
    renders = {c: env.renders[c] - before[c] for c in CAMERAS}
    return model.calls, ledger.records(), policy.stats, renders, rendering_steps


@pytest.mark.slow  # an env of its own, opened before the module's (one env at a time in a process)
def test_every_step_renders_with_a_frame_stack():
    """A frame stack must see every frame: its group renders every step, whatever the demand, and the start-up
    line says so."""
    stacked = {f"observations__images__{c}__params": {"sensor_cfg": SceneEntityCfg(c), "data_type": "rgb",
                                                       "normalize": False, "frame_stack": 2} for c in CAMERAS}
    with open_env(TASK, 2, **ATTRS, **stacked) as env:
        _count_renders(env)
        assert env.observation_manager.describe() == "images every step ('scene_camera' stacks frames)"
        calls, _, _, _, rendering_steps = _run(env, "global_clock", demand=True, steps=2 * H)
    assert len(calls) == 2 and rendering_steps == 2 * H


@pytest.mark.slow  # four runs of 64 steps, two rendering every step
@pytest.mark.parametrize("schedule", ["global_clock", "any"])
def test_calls_see_the_same_images_with_and_without_demand(env, schedule):
    """Every call's rows (both cameras, the state) and the episode log are bit-identical; with the demand each
    camera renders once per call (the reset's render serves the first), without it at every step."""
    calls_off, log_off, stats_off, renders_off, _ = _run(env, schedule, demand=False)
    calls_on, log_on, stats_on, renders_on, _ = _run(env, schedule, demand=True)
    assert len(calls_on) == len(calls_off) == stats_on["inference_calls"] >= STEPS // H
    for k, (on, off) in enumerate(zip(calls_on, calls_off)):
        for key in off:
            assert torch.equal(on[key], off[key]), f"call {k}: '{key}' differs with the demand on"
    assert log_on == log_off and len(log_off) >= 4, "the same episodes, lengths, successes and calls"
    assert {k: stats_on[k] for k in COUNTS} == {k: stats_off[k] for k in COUNTS}
    if schedule == "global_clock":
        assert stats_on["suspended_env_steps"] > 0, "envs reset mid-chunk waited suspended for the tick"
    assert renders_off == dict.fromkeys(CAMERAS, STEPS + 1)
    for camera in CAMERAS:  # the reset's render serves the first call; the last step's may serve the next one
        assert len(calls_on) <= renders_on[camera] <= len(calls_on) + 1, "one render per call"


def test_every_step_renders_for_a_model_that_observes_every_step(env):
    """A model with an ``observe_step`` hook (an observation history) sees every step: every step renders."""
    calls, _, _, _, rendering_steps = _run(env, "global_clock", demand=True,
                                           model=RecordingModel(observe_every_step=True), steps=2 * H)
    assert len(calls) == 2 and rendering_steps == 2 * H


def test_every_step_renders_while_a_recorder_is_attached(env, tmp_path):
    """A recorder records every step's images: with a recorder attached every step renders."""
    env.start_recording(dataset_recorder_cfg(str(tmp_path / "demand.hdf5"), ""))
    calls, _, _, _, rendering_steps = _run(env, "global_clock", demand=True, steps=2 * H)
    assert len(calls) == 2 and rendering_steps == 2 * H


def test_the_start_up_line_names_the_groups_rendered_on_demand(env):
    assert env.observation_manager.lazy_groups == ("images",) and not env.observation_manager.every_step
    assert env.observation_manager.describe().startswith("images only at the steps a chunking policy demands")
