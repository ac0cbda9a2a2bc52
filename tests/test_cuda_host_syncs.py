"""On a GPU, under CUDA's sync debug mode set to raise: the chunking policy's quiet steps and the recorder's step
hooks never synchronise with the device (the CPU tests spy on the tensor methods that would)."""

import pytest
import torch

from isaaclab.envs.mdp import joint_pos_out_of_manual_limit
from isaaclab.managers import SceneEntityCfg
from isaaclab.managers import TerminationTermCfg as DoneTerm

from isaaclab_suspend.recording import DatasetRecorderManagerCfg
from isaaclab_suspend.utils import open_env

from host_syncs import check_quiet_steps, cuda_forbids_syncs

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

N = 8
H = 8


def zero_model(obs_rows, env_ids):
    return torch.zeros(len(env_ids), H, 1, device=env_ids.device)


def test_sync_debug_mode_raises_on_a_host_read():
    with pytest.raises(RuntimeError), cuda_forbids_syncs():
        bool(torch.ones(1, device="cuda").sum() > 0)


def test_no_host_sync_between_ticks_on_cuda():
    pole_fallen = DoneTerm(
        func=joint_pos_out_of_manual_limit,
        params={"asset_cfg": SceneEntityCfg("robot", joint_names=["cart_to_pole"]), "bounds": (-1.0, 1.0)},
    )
    with open_env("Isaac-Cartpole-Suspendable", N, device="cuda:0", terminations__pole_fallen=pole_fallen) as env:
        for schedule in ("global_clock", "any", "async"):
            assert check_quiet_steps(env, zero_model, schedule, H, 60, cuda_forbids_syncs) >= 10, schedule


def test_recorder_step_hooks_never_sync_on_cuda(tmp_path, monkeypatch):
    recorders = DatasetRecorderManagerCfg(dataset_export_dir_path=str(tmp_path), dataset_filename="syncs")
    with open_env("Isaac-PushCube-Suspendable", 4, device="cuda:0", recorders=recorders) as env:
        env.reset()
        manager = env.recorder_manager
        calls = []
        for hook in ("record_pre_step", "record_post_step", "record_post_physics_decimation_step"):
            original = getattr(manager, hook)

            def guarded(*args, _original=original, _hook=hook, **kwargs):
                calls.append(_hook)
                with cuda_forbids_syncs():
                    return _original(*args, **kwargs)

            monkeypatch.setattr(manager, hook, guarded)
        env.suspend_envs([1, 2])
        for _ in range(20):
            env.step(torch.zeros(4, 1, device="cuda:0"))
        env.resume_envs([1])
        for _ in range(20):
            env.step(torch.zeros(4, 1, device="cuda:0"))
        monkeypatch.undo()
        assert {"record_pre_step", "record_post_step"} <= set(calls)
