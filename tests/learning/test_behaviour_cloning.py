"""Behaviour cloning of a chunk policy from a dataset written by the real recorder: windows, training, checkpoint
loading, the loaded policy driving ActionChunkingPolicy on the env, and bad inputs."""

import math
import os
import subprocess
import sys

import h5py
import pytest
import torch

from isaaclab_suspend.datasets import DatasetError
from isaaclab_suspend.recording import DatasetRecorderManagerCfg
from isaaclab_suspend.learning import (
    BCTrainerCfg,
    ChunkDataset,
    ChunkPolicyCfg,
    ChunkPolicyNet,
    chunk_loss,
    evaluate_loss,
    load_chunk_policy,
    save_chunk_policy,
    train_bc,
)
from isaaclab_suspend.chunking import ActionChunkingPolicy, RtcScheduleCfg
from isaaclab_suspend.tasks.embedded import make_default_model
from isaaclab_suspend.tasks.env_factory import open_env

pytestmark = pytest.mark.slow  # behaviour-cloning training runs and their scripts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TASK = "Isaac-PushCube-Suspendable"
N = 4
H = 8
DEMOS = 6


@pytest.fixture(scope="module")
def dataset_path(tmp_path_factory):
    """At least DEMOS push-cube episodes of the embedded expert under ``hold`` (junk included), desynchronised."""
    out_dir = tmp_path_factory.mktemp("bc")
    recorders = DatasetRecorderManagerCfg(dataset_export_dir_path=str(out_dir), dataset_filename="demos")
    with open_env(TASK, N, seed=3, recorders=recorders) as env:
        policy = ActionChunkingPolicy(make_default_model(TASK, H), env, chunk_length=H, schedule="hold")
        obs, _ = env.reset(seed=3)
        env.episode_length_buf[:] = torch.tensor([0, 100, 200, 250])
        manager = env.recorder_manager
        while manager.exported_successful_episode_count + manager.exported_failed_episode_count < DEMOS:
            obs, _, terminated, truncated, _ = env.step(policy.act(obs))
            policy.observe(terminated | truncated)
    return str(out_dir / "demos.hdf5")


@pytest.fixture(scope="module")
def dataset(dataset_path):
    return ChunkDataset(dataset_path, H)


@pytest.fixture(scope="module")
def trained(dataset):
    return train_bc(dataset, ChunkPolicyCfg(chunk_length=H, hidden_dims=[64, 64]),
                    BCTrainerCfg(epochs=15, batch_size=64, lr=3e-3, seed=0), progress=False)


def test_windows_do_not_cross_episode_ends(dataset_path, dataset):
    with h5py.File(dataset_path, "r") as f:
        demos = [(f[f"data/{name}/obs"][()], f[f"data/{name}/actions"][()]) for name in dataset.demo_names]
    assert len(demos) >= DEMOS and dataset.num_samples == sum(len(a) for _, a in demos)
    start = 0
    for obs, actions in demos:
        length = len(actions)
        index = torch.arange(start, start + length)
        windows, valid = dataset.targets(index)
        assert torch.equal(dataset.obs[index], torch.as_tensor(obs))
        for t in range(length):
            num_valid = min(H, length - t)
            assert valid[t].tolist() == [True] * num_valid + [False] * (H - num_valid)
            assert torch.equal(windows[t, :num_valid], torch.as_tensor(actions[t : t + num_valid]))
            assert torch.equal(windows[t, num_valid:], torch.as_tensor(actions[-1:]).expand(H - num_valid, -1))
        start += length


def test_split_is_by_episode(dataset):
    train, val = dataset.split(0.3, seed=1)
    assert train.numel() + val.numel() == dataset.num_samples and val.numel() > 0
    assert not set(dataset.episode_index[train].tolist()) & set(dataset.episode_index[val].tolist())


def test_training_lowers_the_loss(dataset, trained):
    net, history = trained
    train_idx, val_idx = dataset.split(BCTrainerCfg().val_fraction, seed=0)
    torch.manual_seed(0)
    untrained = ChunkPolicyNet(ChunkPolicyCfg(chunk_length=H, hidden_dims=[64, 64]), dataset.obs_dim, dataset.action_dim)
    untrained.set_normalization(dataset.obs[train_idx], dataset.actions[train_idx])
    before, after = evaluate_loss(untrained, dataset, train_idx), evaluate_loss(net, dataset, train_idx)
    assert after < 0.75 * before, (before, after)
    assert history.train_loss[-1] < history.train_loss[0] and len(history.val_loss) == 15
    assert math.isfinite(history.val_loss[-1]) and history.num_val == val_idx.numel() > 0


def test_loss_ignores_the_padding_past_an_episode_end(dataset, trained):
    """Garbage in the padded window steps changes neither the loss nor its gradients; in a valid step it does."""
    net, _ = trained
    index = torch.arange(dataset.num_samples)
    actions, valid = dataset.targets(index)
    assert (~valid).any() and valid.any()
    obs = dataset.obs[index]

    def loss_and_grads(targets):
        net.zero_grad()
        loss = chunk_loss(net, obs, targets, valid)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in net.parameters()]

    loss, grads = loss_and_grads(actions)
    garbage = torch.where(valid.unsqueeze(-1), actions, torch.full_like(actions, 1e6))
    padded_loss, padded_grads = loss_and_grads(garbage)
    assert torch.equal(padded_loss, loss) and all(torch.equal(a, b) for a, b in zip(grads, padded_grads))
    in_valid = actions.clone()
    b, h = valid.nonzero()[0].tolist()
    in_valid[b, h] = 1e6
    assert loss_and_grads(in_valid)[0] > loss
    net.zero_grad()


def test_loaded_checkpoint_drives_the_chunking_policy(tmp_path, dataset, trained):
    net, _ = trained
    path = str(tmp_path / "bc.pt")
    save_chunk_policy(path, net, dataset.task, {"note": "test"})
    with open_env(TASK, N, seed=5) as env:
        model = load_chunk_policy(path, env.device, env=env)
        assert model.chunk_length == H and model.info == {"note": "test"}
        policy = ActionChunkingPolicy(model, env, chunk_length=H, schedule="global_clock")
        obs, _ = env.reset(seed=5)
        env.episode_length_buf[:] = torch.tensor([0, 280, 290, 295])  # time-outs mid-chunk: envs wait suspended
        executed = 0
        for t in range(3 * H):
            if t % H == 0:  # a tick: every env takes the net's chunk planned from this observation
                with torch.no_grad():
                    chunk = net(obs["policy"])
            actions = policy.act(obs)
            status = policy.last_step
            assert torch.equal(status.executing, ~status.suspended)
            for i in status.executing.nonzero().flatten().tolist():
                assert torch.allclose(actions[i], chunk[i, t % H], atol=1e-6), (t, i)
                executed += 1
            obs, _, terminated, truncated, _ = env.step(actions)
            policy.observe(terminated | truncated)
        assert policy.stats["inference_calls"] == 3
        assert policy.stats["suspended_env_steps"] > 0 and executed == policy.stats["active_env_steps"]

        # a checkpoint of another task, or with other dims, is refused with what differs
        save_chunk_policy(path, net, "Isaac-Cartpole-Suspendable")
        with pytest.raises(ValueError, match="trained on task 'Isaac-Cartpole-Suspendable'"):
            load_chunk_policy(path, env=env)
        save_chunk_policy(path, ChunkPolicyNet(ChunkPolicyCfg(chunk_length=H), 7, 2), TASK)
        with pytest.raises(ValueError, match=r"observations of shape \(7,\).*outputs 2 action dims"):
            load_chunk_policy(path, env=env)
    with pytest.raises(ValueError, match=r"shape \(B, 7\)"):
        load_chunk_policy(path)({"policy": torch.zeros(2, 5)}, torch.arange(2))


def test_prefix_conditioned_training_round_trip(tmp_path, dataset):
    """Trained with random prefixes of the demonstrated future actions (training-time RTC), saved with the flag,
    loaded as a model that accepts a prefix: its chunk starts with the prefix and continues it, and it runs under
    the rtc schedule on the env, passed the queued actions; a plain policy refuses a prefix."""
    cfg = ChunkPolicyCfg(chunk_length=H, hidden_dims=[64, 64], prefix_conditioning=True)
    net, history = train_bc(dataset, cfg, BCTrainerCfg(epochs=8, batch_size=64, lr=3e-3, seed=0), progress=False)
    assert history.train_loss[-1] < 0.9 * history.train_loss[0] and net.max_prefix == H // 2
    path = str(tmp_path / "rtc.pt")
    save_chunk_policy(path, net, dataset.task)
    model = load_chunk_policy(path)
    assert model.accepts_prefix and model.net.cfg.prefix_conditioning
    index = torch.arange(5)
    actions, _ = dataset.targets(index)
    obs, prefix, delay = {"policy": dataset.obs[index]}, actions[:, : H // 2], torch.tensor([4, 0, 2, 4, 1])
    chunk = model(obs, index, prefix=prefix, delay=delay)
    for row, d in enumerate(delay.tolist()):
        assert torch.equal(chunk[row, :d], prefix[row, :d])
    assert torch.equal(chunk[1], model(obs, index)[1])  # delay 0: as without a prefix
    other = model(obs, index, prefix=prefix + 1.0, delay=delay)
    assert not torch.allclose(other[0, 4:], chunk[0, 4:])  # the continuation depends on the prefix
    with pytest.raises(ValueError, match="at most H // 2 = 4"):
        model(obs, index, prefix=actions, delay=delay)
    transformer = ChunkPolicyNet(ChunkPolicyCfg(chunk_length=H, arch="transformer", prefix_conditioning=True), 5, 1)
    assert torch.equal(transformer(obs["policy"], prefix, delay)[0, :4], prefix[0])
    ckpt = torch.load(path, weights_only=True)  # a checkpoint written before the flag existed: no prefix
    plain_path = str(tmp_path / "plain.pt")
    save_chunk_policy(plain_path, ChunkPolicyNet(ChunkPolicyCfg(chunk_length=H), 5, 1), dataset.task)
    old = torch.load(plain_path, weights_only=True)
    del old["cfg"]["prefix_conditioning"]
    torch.save(old, plain_path)
    plain = load_chunk_policy(plain_path)
    assert not plain.accepts_prefix and ckpt["cfg"]["prefix_conditioning"] is True
    with pytest.raises(ValueError, match="trained without prefix conditioning"):
        plain(obs, index, prefix=prefix, delay=delay)

    given = []

    def spy(obs_rows, env_ids, prefix=None, delay=None):
        given.append(None if prefix is None else prefix.clone())
        return model(obs_rows, env_ids, prefix=prefix, delay=delay)

    spy.accepts_prefix = True
    with open_env(TASK, N, seed=5) as env:
        policy = ActionChunkingPolicy(spy, env, chunk_length=H, schedule=RtcScheduleCfg(delay_steps=2))
        obs, _ = env.reset(seed=5)
        executed = []
        for _ in range(3 * H):
            executed.append(policy.act(obs))
            obs, _, terminated, truncated, _ = env.step(executed[-1])
            policy.observe(terminated | truncated)
        policy.close()
    assert policy.stats["inference_calls"] == 4 and given[0] is None  # step 0, then ticks at 8, 14, 20
    for launch, prefix in zip((6, 12, 18), given[1:]):
        assert torch.equal(prefix.squeeze(-1), torch.stack(executed[launch:launch + 2], dim=1).squeeze(-1))


def test_bad_inputs(tmp_path, dataset_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ChunkDataset(str(tmp_path / "missing.hdf5"), H)
    corrupt = tmp_path / "corrupt.hdf5"
    corrupt.write_bytes(b"not an hdf5 file")
    with pytest.raises(DatasetError, match="not a readable Isaac Lab dataset"):
        ChunkDataset(str(corrupt), H)
    no_actions = tmp_path / "no_actions.hdf5"
    with h5py.File(dataset_path, "r") as src, h5py.File(no_actions, "w") as dst:
        src.copy("data", dst)
        del dst["data/demo_0/actions"]
    with pytest.raises(DatasetError, match="demo 'demo_0' has no 'actions'"):
        ChunkDataset(str(no_actions), H)
    with pytest.raises(ValueError, match="chunk lengths|windows have 8 actions"):
        train_bc(ChunkDataset(dataset_path, H), ChunkPolicyCfg(chunk_length=4), BCTrainerCfg(epochs=1), progress=False)
    with pytest.raises(FileNotFoundError):
        load_chunk_policy(str(tmp_path / "missing.pt"))
    with pytest.raises(ValueError, match="not a readable chunk policy checkpoint"):
        load_chunk_policy(str(corrupt))
    torch.save({"weights": 1}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a chunk policy checkpoint"):
        load_chunk_policy(str(tmp_path / "other.pt"))


def test_train_script_end_to_end(tmp_path, dataset_path):
    script = os.path.join(ROOT, "scripts", "train_chunk_policy.py")
    output = tmp_path / "policy.pt"
    run = subprocess.run([sys.executable, script, "--dataset", dataset_path, "--chunk", str(H), "--epochs", "2",
                          "--prefix_conditioning", "--output", str(output)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "epoch   2/2: train loss" in run.stdout + run.stderr and output.is_file()
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(tmp_path / "policy_tb"))
    assert load_chunk_policy(str(output)).info["epochs"] == 2 and load_chunk_policy(str(output)).accepts_prefix
    missing = subprocess.run([sys.executable, script, "--dataset", str(tmp_path / "none.hdf5")], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def _load_script(name: str, path: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_chunk_policy_expert_options_refuse_another_h(tmp_path, capsys):
    """record.py --policy bc and bench_junk_bc.py --expert_checkpoint take the checkpoint's H; another --chunk, or
    another task, exits with status 2 and says why, before any env is made."""
    path = str(tmp_path / "expert_h8.pt")
    save_chunk_policy(path, ChunkPolicyNet(ChunkPolicyCfg(chunk_length=H, hidden_dims=[8]), 5, 1), TASK)
    bench = _load_script("bench_junk_bc", os.path.join(ROOT, "scripts", "benchmarks", "bench_junk_bc.py"))
    args = bench.parse_args(["--expert_checkpoint", path, "--chunk", str(H)])
    assert args.expert.chunk_length == H and args.expert.path == path
    for argv, message in ((["--expert_checkpoint", path], f"plans {H} actions per chunk, --chunk is 16"),
                          (["--expert_checkpoint", path, "--chunk", str(H), "--task", "Isaac-Cartpole-Suspendable"],
                           f"trained on '{TASK}'"),
                          (["--expert_checkpoint", str(tmp_path / "none.pt")], "does not exist")):
        with pytest.raises(SystemExit) as exit_info:
            bench.parse_args(argv)
        assert exit_info.value.code == 2 and message in capsys.readouterr().err

    record = _load_script("record_script", os.path.join(ROOT, "scripts", "record.py"))
    output = ["--output", str(tmp_path / "demos.hdf5"), "--task", TASK]
    assert record.parse_args(["--policy", "bc", "--checkpoint", path, *output]).chunk == H
    for argv, message in ((["--policy", "bc", "--checkpoint", path, "--chunk", "16"], f"plans {H} actions per chunk"),
                          (["--policy", "bc"], "--policy bc needs --checkpoint")):
        with pytest.raises(SystemExit) as exit_info:
            record.parse_args([*argv, *output])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err
