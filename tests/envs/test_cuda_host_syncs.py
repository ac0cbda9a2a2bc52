"""On a GPU (``--device cuda:N``), under CUDA's sync debug mode set to raise: the guard raises on a host read and
the recorder's step hooks never synchronise with the device (the CPU twins spy on the calls that would:
``recording/test_recorder_manager.py::test_step_hooks_never_read_the_device`` and ``::test_step_hooks_never_sync_from_the_first_step``;
the chunking loop's quiet steps: ``chunking/test_chunking_policy.py::test_no_host_sync_between_ticks``, marked ``cuda``
too). On any device: the suite's rows of ``env.step`` syncs, ours against the stock step."""

import pytest
import torch

from isaaclab.envs import ManagerBasedRLEnv

from isaaclab_suspend.benchmarks.gpu_suite import _step_syncs
from isaaclab_suspend.benchmarks.host_syncs import count_syncs, forbid_syncs
from isaaclab_suspend.recording import DatasetRecorderManagerCfg
from isaaclab_suspend.tasks.env_factory import open_env

pytestmark = pytest.mark.cuda


@pytest.fixture
def cuda(device) -> str:
    if not device.startswith("cuda"):
        pytest.skip("CUDA's sync debug mode: runs with --device cuda:N (scripts/benchmarks/gpu_suite.py)")
    return device


def test_sync_debug_mode_raises_on_a_host_read(cuda):
    with pytest.raises(RuntimeError), forbid_syncs(cuda):
        bool(torch.ones(1, device=cuda).sum() > 0)


def test_recorder_step_hooks_never_sync_on_cuda(cuda, tmp_path, monkeypatch):
    recorders = DatasetRecorderManagerCfg(dataset_export_dir_path=str(tmp_path), dataset_filename="syncs")
    with open_env("Isaac-PushCube-Suspendable", 4, device=cuda, recorders=recorders) as env:
        env.reset()
        manager = env.recorder_manager
        calls = []
        for hook in ("record_pre_step", "record_post_step", "record_post_physics_decimation_step"):
            original = getattr(manager, hook)

            def guarded(*args, _original=original, _hook=hook, **kwargs):
                calls.append(_hook)
                with forbid_syncs(cuda):
                    return _original(*args, **kwargs)

            monkeypatch.setattr(manager, hook, guarded)
        env.suspend_envs([1, 2])
        for _ in range(20):
            env.step(torch.zeros(4, 1, device=cuda))
        env.resume_envs([1])
        for _ in range(20):
            env.step(torch.zeros(4, 1, device=cuda))
        monkeypatch.undo()
        assert {"record_pre_step", "record_post_step"} <= set(calls)


def test_our_step_syncs_no_more_than_the_stock_step(device):
    """The GPU suite's rows on push-cube (stock ``env.step``, then ours with none suspended, 48 steps each, as the
    suite counts them): ours makes no sync the stock step does not, however late push-cube's interval push
    (every 1-2 s, from step 60 on) first fires. Counted by CUDA's sync debug mode on a GPU, on the CPU by the spy
    on the calls that would sync there (host reads, host data copied to the device)."""
    with open_env("Isaac-PushCube-Suspendable", 4, device, suspendable=True, episode_length_s=1e6) as env:
        env.reset()
        zeros = torch.zeros(env.num_envs, env.action_manager.total_action_dim, device=env.device)
        stock = _step_syncs(env, ManagerBasedRLEnv.step, zeros, None, 48)
        ours = _step_syncs(env, type(env).step, zeros, None, 48)
        with count_syncs(env.device) as check:
            bool(zeros.sum() > 0)
        assert check.total == 1, "the count must see a host read"
    assert stock["reset_steps"] == ours["reset_steps"] == 0 and stock["syncs_per_step"] > 0
    assert set(ours["sites"]) <= set(stock["sites"]), (ours["sites"], stock["sites"])
    assert ours["syncs_per_step"] <= stock["syncs_per_step"], (ours, stock)
