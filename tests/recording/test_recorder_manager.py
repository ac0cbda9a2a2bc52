"""Masked recording: what the file holds under a random suspend / resume schedule, export modes, no host syncs."""

import errno
import os
import threading

import h5py
import numpy as np
import pytest
import torch

from isaaclab.envs.mdp.recorders.recorders_cfg import ActionStateRecorderManagerCfg
from isaaclab.managers import DatasetExportMode
from isaaclab.utils.datasets import HDF5DatasetFileHandler

from isaaclab_suspend.recording import DatasetRecorderManagerCfg
from isaaclab_suspend.recording import (
    CompressionCfg,
    EpisodeBatch,
    EpisodeBuffers,
    EpisodeWriter,
    EpisodeWriterCfg,
    SuspendableRecorderManager,
)
from isaaclab_suspend.recording import sharded_writer
from isaaclab_suspend.recording.sharded_writer import open_episode_writer
from isaaclab_suspend.recording.staging_ring import StagingRing
from isaaclab_suspend.chunking import ActionChunkingPolicy
from isaaclab_suspend.tasks.embedded import make_default_model
from isaaclab_suspend.tasks.env_factory import open_env

from helpers import dataset_contents, load_script

TASK = "Isaac-PushCube-Suspendable"
NUM_ENVS = 8


def _leaves(tree, prefix=""):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _leaves(value, f"{prefix}{key}/")
        else:
            yield f"{prefix}{key}", value


def _state(env, i: int) -> dict[str, torch.Tensor]:
    """The scene state of env ``i``, by path."""
    return {k: v[i] for k, v in _leaves(env.scene.get_state(is_relative=True))}


def _h5_leaves(group: h5py.Group) -> dict[str, h5py.Dataset]:
    out = {}
    group.visititems(lambda name, obj: out.__setitem__(name, obj) if isinstance(obj, h5py.Dataset) else None)
    return out


def test_file_holds_active_steps_only(tmp_path):
    """Random suspensions, also right after resets (an env waiting for a tick): every guarantee of the file."""
    recorders = DatasetRecorderManagerCfg(
        dataset_export_dir_path=str(tmp_path), dataset_filename="masked", buffer_length=8
    )
    gen = torch.Generator().manual_seed(3)
    expected = []  # concluded episodes in export order: actions, initial state, success
    with open_env(TASK, NUM_ENVS, episode_length_s=1.0, recorders=recorders) as env:
        assert isinstance(env.recorder_manager, SuspendableRecorderManager)
        env.reset()
        open_eps = [{"actions": [], "initial": _state(env, i), "waited": False} for i in range(NUM_ENVS)]
        active_steps = 0
        for step in range(240):
            suspended = env.suspended_mask
            to_suspend = (torch.rand(NUM_ENVS, generator=gen) < 0.1) & ~suspended
            to_resume = (torch.rand(NUM_ENVS, generator=gen) < 0.25) & suspended
            env.suspend_envs(to_suspend)
            env.resume_envs(to_resume)
            active = env.active_mask
            for i in to_resume.nonzero().flatten().tolist():
                if open_eps[i]["waited"] and not open_eps[i]["actions"]:
                    # the episode started while the env waited: it must start from the state it resumed from
                    open_eps[i]["resumed_from"] = _state(env, i)
            action = 2.0 * torch.rand(NUM_ENVS, 1, generator=gen) - 1.0
            _, _, term, trunc, _ = env.step(action)
            active_steps += int(active.sum())
            done = term | trunc
            success = env.termination_manager.get_term("success")
            for i in active.nonzero().flatten().tolist():
                open_eps[i]["actions"].append(action[i])
            for i in done.nonzero().flatten().tolist():
                expected.append({**open_eps[i], "success": bool(success[i])})
                open_eps[i] = {"actions": [], "initial": _state(env, i), "waited": False}
                if step % 2 == 0:  # half of the new episodes wait suspended for a few steps before they start
                    env.suspend_envs([i])
                    open_eps[i]["waited"] = True
            # an open episode's samples are those of its active steps so far
            probe = int(torch.randint(NUM_ENVS, (1,), generator=gen))
            recorded = env.recorder_manager.get_episode(probe).data.get("actions", [])
            assert len(recorded) == len(open_eps[probe]["actions"])
        open_steps = sum(len(e["actions"]) for e in open_eps)
        assert env.recorder_manager.buffers.capacities["actions"] >= 60, "the per-step buffers grow from 8 as needed"

    with h5py.File(tmp_path / "masked.hdf5", "r") as f:
        data = f["data"]
        demos = sorted(data, key=lambda name: int(name.split("_")[1]))
        assert len(demos) == len(expected) > 2 * NUM_ENVS
        total = 0
        waited = 0
        for name, exp in zip(demos, expected):
            demo = data[name]
            n = demo.attrs["num_samples"]
            assert n > 0, f"{name} has length 0"
            for key in ("actions", "obs", "processed_actions"):
                assert demo[key].shape[0] == n, f"{name}/{key}"
            for group in ("states", "pre_step_states"):
                for key, value in _h5_leaves(demo[group]).items():
                    assert value.shape[0] == n, f"{name}/{group}/{key}"
            # exactly the actions of the active steps: nothing recorded while suspended
            assert torch.equal(torch.from_numpy(demo["actions"][:]), torch.stack(exp["actions"])), name
            assert bool(demo.attrs["success"]) == exp["success"], name
            for key, value in _h5_leaves(demo["initial_state"]).items():
                assert torch.equal(torch.from_numpy(value[0]), exp["initial"][key]), f"{name}: initial {key}"
                if "resumed_from" in exp:
                    assert torch.equal(torch.from_numpy(value[0]), exp["resumed_from"][key]), f"{name}: resumed {key}"
            waited += "resumed_from" in exp
            total += n
        assert waited >= 3, "the schedule must start episodes while their env waits"
        assert data.attrs["total"] == total
        assert total + open_steps == active_steps, "samples are the active env-steps, the open episodes are dropped"


def test_export_modes_follow_the_success_term(tmp_path):
    """All / succeeded only / succeeded and failed in two files, with the success from the ``success`` term."""
    counts = {}
    for mode in (
        DatasetExportMode.EXPORT_ALL,
        DatasetExportMode.EXPORT_SUCCEEDED_ONLY,
        DatasetExportMode.EXPORT_SUCCEEDED_FAILED_IN_SEPARATE_FILES,
    ):
        recorders = ActionStateRecorderManagerCfg(
            dataset_export_dir_path=str(tmp_path), dataset_filename=mode.name, dataset_export_mode=mode
        )
        with open_env(TASK, NUM_ENVS, episode_length_s=2.0, recorders=recorders) as env:
            policy = ActionChunkingPolicy(make_default_model(TASK, 8), env, chunk_length=8, schedule="global_clock")
            obs, _ = env.reset()
            successes = failures = 0
            for _ in range(200):
                obs, _, term, trunc, _ = env.step(policy.act(obs))
                policy.observe(term | trunc)
                succeeded = env.termination_manager.get_term("success") & (term | trunc)
                successes += int(succeeded.sum())
                failures += int(((term | trunc) & ~succeeded).sum())
        counts[mode] = (successes, failures)
        assert successes > 0 and failures > 0, "the rollout must both succeed and fail"

        def flags(path):
            handler = HDF5DatasetFileHandler()
            handler.open(str(path))
            out = [bool(handler.load_episode(name, "cpu").success) for name in handler.get_episode_names()]
            handler.close()
            return out

        main = flags(tmp_path / f"{mode.name}.hdf5")
        if mode == DatasetExportMode.EXPORT_ALL:
            assert sorted(main) == sorted([True] * successes + [False] * failures)
        elif mode == DatasetExportMode.EXPORT_SUCCEEDED_ONLY:
            assert main == [True] * successes
        else:
            assert main == [True] * successes
            assert flags(tmp_path / f"{mode.name}_failed.hdf5") == [False] * failures
    # the same seed and policy give the same episodes whatever the mode
    assert len(set(counts.values())) == 1


def test_export_refuses_bad_env_ids_and_keeps_recording(tmp_path):
    """Repeated, negative or out-of-range env ids get a clear error (not a second demo of one episode, nor another
    env's episode under a wrapped id); the recorder goes on."""
    recorders = ActionStateRecorderManagerCfg(dataset_export_dir_path=str(tmp_path), dataset_filename="ids")
    with open_env(TASK, 2, recorders=recorders) as env:
        env.reset()
        env.step(torch.zeros(2, 1))
        for bad in ([0, 0], [2], [-1]):
            with pytest.raises(ValueError, match=r"export_episodes takes unique env ids in \[0, 2\), got"):
                env.recorder_manager.export_episodes(bad)
        env.recorder_manager.export_episodes([1])
    with h5py.File(tmp_path / "ids.hdf5") as f:
        assert list(f["data"]) == ["demo_0"] and f["data/demo_0"].attrs["num_samples"] == 1


def test_an_unbounded_episode_length_starts_small_buffers(tmp_path):
    """``episode_length_s=1e6`` (a benchmark's, a teleoperation session's) must not size the buffers by it: that
    asked for gigabytes per recorded tensor and the process was killed; they start at 4096 samples and grow."""
    recorders = ActionStateRecorderManagerCfg(dataset_export_dir_path=str(tmp_path), dataset_filename="long")
    with open_env(TASK, 1, episode_length_s=1e6, recorders=recorders) as env:
        assert env.max_episode_length > 10**6 and env.recorder_manager.buffers.capacity == 4096
        env.reset()
        for _ in range(3):
            env.step(torch.zeros(1, 1))
        env.recorder_manager.export_episodes([0])
    with h5py.File(tmp_path / "long.hdf5") as f:
        assert f["data/demo_0"].attrs["num_samples"] == 3


class SyncSpy:
    """Records, on the main thread while it is armed, the tensor methods that copy a value to the host and, with
    ``factories``, the tensor factories fed host data (numpy arrays, lists, Python numbers) for a device (the
    env's, named by the code): on a GPU such a factory copies pageable host memory to the device, which CUDA's sync debug mode reports as a sync (the
    episode-end hand-over makes one such copy on purpose; the step hooks make none)."""

    NAMES = ("item", "tolist", "nonzero", "numpy", "cpu", "__bool__", "__int__", "__float__", "__index__")
    FACTORIES = ("as_tensor", "tensor")

    def __init__(self, monkeypatch, factories: bool = False):
        self.armed = False
        self.calls: list[str] = []
        for name in self.NAMES:
            monkeypatch.setattr(torch.Tensor, name, self._spy(name, getattr(torch.Tensor, name)))
        for name in self.FACTORIES if factories else ():
            monkeypatch.setattr(torch, name, self._spy_factory(name, getattr(torch, name)))

    def _spy_factory(self, name, original):
        def spy(data, *args, **kwargs):
            if (self.armed and not isinstance(data, torch.Tensor) and kwargs.get("device") is not None
                    and threading.current_thread() is threading.main_thread()):
                self.calls.append(f"torch.{name}(host data)")
            return original(data, *args, **kwargs)

        return spy

    def _spy(self, name, original):
        def spy(tensor, *args, **kwargs):
            if self.armed and threading.current_thread() is threading.main_thread():  # not the writer thread
                self.calls.append(name)
            return original(tensor, *args, **kwargs)

        return spy

    def armed_during(self, fn, armed=True):
        def wrapped(*args, **kwargs):
            before, self.armed = self.armed, armed
            try:
                return fn(*args, **kwargs)
            finally:
                self.armed = before

        return wrapped


def test_step_hooks_never_read_the_device(tmp_path, monkeypatch):
    """The recorder's step hooks run without a host sync while the buffers have room (the GPU hot path), from
    the first step on: a key's first record makes its rows on the device, with no copy of host data. The
    hand-over of ended episodes they may run is left out (the writer's check is not): on the CPU it reads numpy
    views of the buffers (no sync there); its GPU path is checked by
    test_retired_episodes_stay_in_their_slots_until_taken."""
    recorders = DatasetRecorderManagerCfg(dataset_export_dir_path=str(tmp_path), dataset_filename="syncs")
    with open_env(TASK, 4, recorders=recorders) as env:
        env.reset()
        manager = env.recorder_manager
        spy = SyncSpy(monkeypatch, factories=True)
        spy.armed_during(lambda: bool(torch.ones(1).sum() > 0))()
        spy.armed_during(lambda: torch.as_tensor([1, 2], device=env.device))()
        assert spy.calls == ["__bool__", "torch.as_tensor(host data)"], "the spy must see a host read and copy"
        spy.calls.clear()
        calls_before = len(manager.get_episode(0).data.get("actions", []))
        monkeypatch.setattr(manager.hand_over, "flush", spy.armed_during(manager.hand_over.flush, armed=False))
        for hook in ("record_pre_step", "record_post_step", "record_post_physics_decimation_step"):
            monkeypatch.setattr(manager, hook, spy.armed_during(getattr(manager, hook)))
        env.suspend_envs([1, 2])
        for _ in range(20):
            env.step(torch.zeros(4, 1))
        env.resume_envs([1])
        for _ in range(20):
            env.step(torch.zeros(4, 1))
        monkeypatch.undo()
        assert len(manager.get_episode(0).data["actions"]) == calls_before + 40, "the spied hooks recorded"
    assert spy.calls == [], f"host syncs in the recorder step hooks: {sorted(set(spy.calls))}"


@pytest.mark.parametrize("counts_on_host", [True, False])
def test_take_copies_only_the_samples_of_the_episodes(counts_on_host):
    """An export copies each episode up to the samples it may hold, with the right samples: on the CPU up to the
    exact counts, read from the host; on a GPU (its path run here on CPU tensors) up to the samples appended
    since its env was last emptied by host ids (not up to the longest open episode of any env); a clear by
    device ids only keeps that bound loose, never wrong."""
    buffers = EpisodeBuffers(num_envs=3, capacity=64, device="cpu")
    buffers._on_cpu = counts_on_host
    for t in range(30):
        buffers.append("actions", torch.full((3, 2), float(t)), env_mask=None)
    buffers.clear(torch.tensor([0]), [0])
    buffers.clear(torch.tensor([1]))  # device ids only: env 1's bound stays 30
    for t in range(30, 35):
        buffers.append("actions", torch.full((3, 2), float(t)), env_mask=torch.tensor([True, True, False]))

    rows = buffers.take(torch.tensor([0]), [0])
    assert rows.leaves["actions"].shape == (1, 5, 2) and rows.counts.tolist() == [[5]]
    assert rows.leaves["actions"][0, :, 0].tolist() == [30.0, 31.0, 32.0, 33.0, 34.0]
    rows = buffers.take(torch.tensor([1, 2]), [1, 2])
    assert rows.leaves["actions"].shape == (2, 30 if counts_on_host else 35, 2)
    assert rows.counts.tolist() == [[5, 30]]
    assert rows.leaves["actions"][0, :5, 0].tolist() == [30.0, 31.0, 32.0, 33.0, 34.0]
    assert rows.leaves["actions"][1, :30, 0].tolist() == [float(t) for t in range(30)]


@pytest.mark.parametrize("counts_on_host", [True, False])
def test_retired_episodes_stay_in_their_slots_until_taken(monkeypatch, counts_on_host):
    """Retired episodes keep their samples while their envs record new ones in spare slots, through a growth of
    the buffers and a key first recorded after them; they are taken together, in order, with what each retire
    was given, and their slots are reused only once released. On a GPU (its path run here on CPU tensors)
    retiring and taking read nothing from the device."""
    buffers = EpisodeBuffers(num_envs=3, capacity=4, device="cpu", spare_slots=2)
    buffers._on_cpu = counts_on_host
    spy = SyncSpy(monkeypatch)
    spy.armed_during(lambda: bool(torch.ones(1).sum() > 0))()
    assert spy.calls == ["__bool__"], "the spy must see a host read"
    spy.calls.clear()
    retire = buffers.retire if counts_on_host else spy.armed_during(buffers.retire)
    take_retired = buffers.take_retired if counts_on_host else spy.armed_during(buffers.take_retired)
    for t in range(3):
        buffers.append("actions", torch.full((3, 2), float(t)), env_mask=None)
    retire(torch.tensor([0]), [0], "first")
    for t in range(3, 6):  # env 1 and 2 reach 6 samples: the buffers grow from 4 to 8
        buffers.append("actions", torch.full((3, 2), float(t)), env_mask=torch.tensor([True, True, True]))
    assert buffers.capacities["actions"] == 8
    with pytest.raises(RuntimeError, match="2 episodes to retire and 1 free spare slots"):
        retire(torch.tensor([1, 2]), [1, 2], "too many")
    retire(torch.tensor([2]), [2], "second")
    buffers.append("obs", torch.ones(3, 1), env_mask=None)  # a key the retired episodes never recorded
    assert buffers.retired_count == 2 and buffers.free_slots == 0

    rows, infos = take_retired()
    assert infos == ["first", "second"] and rows.keys == ["actions", "obs"]
    assert rows.counts.tolist() == [[3, 6], [0, 0]]
    assert rows.leaves["actions"][0, :3, 0].tolist() == [0.0, 1.0, 2.0]
    assert rows.leaves["actions"][1, :6, 0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert spy.calls == [], f"host reads on the GPU path: {spy.calls}"
    assert buffers.retired_count == 2, "taken, not released yet"
    buffers.release_retired()
    assert buffers.retired_count == 0 and buffers.free_slots == 2
    assert buffers.episode(0)["actions"][:, 0].tolist() == [3.0, 4.0, 5.0]
    assert buffers.episode(1)["actions"][:, 0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    retire(torch.tensor([0, 1]), [0, 1], "third")  # into the released slots
    slots = buffers._slots.tolist()
    assert len(set(slots)) == 3, f"each env in a slot of its own, not one still in use: {slots}"
    for t in range(2):
        buffers.append("actions", torch.full((3, 2), 10.0 + t), env_mask=None)
    rows, infos = buffers.take_retired()
    assert infos == ["third"] and rows.counts.tolist() == [[3, 6], [1, 1]]
    assert rows.leaves["actions"][1, :6, 0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert rows.leaves["actions"][0, :3, 0].tolist() == [3.0, 4.0, 5.0], "never overwritten by the envs going on"
    assert buffers.episode(0)["actions"][:, 0].tolist() == [10.0, 11.0]


def test_staging_ring_reserves_in_order_wraps_and_grows_only_when_empty():
    """Regions are reserved after the newest one, wrap to the start when the end has no room, never overlap a
    region in use, and the ring grows only while empty."""
    ring = StagingRing(1024)
    try:
        a, b, c = ring.reserve(400), ring.reserve(400), ring.reserve(400)
        assert (a, b, c) == (0, 448, None)  # aligned to 64 bytes; no room for a third
        ring.release(1)
        assert ring.reserve(300) == 0  # wraps: [0, 320) is free again, [448, 896) is still in use
        assert ring.reserve(200) is None  # [320, 448) is too small
        with pytest.raises(RuntimeError, match="only while it is empty"):
            ring.grow(4096)
        ring.release(2)
        assert ring.empty and ring.reserve(4096) is None
        ring.grow(4096)
        assert ring.size == 4096 and ring.reserve(4096) == 0
        with pytest.raises(RuntimeError, match="released 2 regions"):
            ring.release(2)
    finally:
        ring.close()


def test_staging_ring_fits_regions_exactly_up_to_the_oldest_and_the_end():
    """A region fits exactly in the room before the oldest region in use, and in the room left at the end."""
    ring = StagingRing(1024)
    try:
        assert (ring.reserve(400), ring.reserve(400)) == (0, 448)
        ring.release(1)
        assert ring.reserve(300) == 0  # wraps: in use [448, 896) and [0, 320)
        assert ring.reserve(128) == 320  # exactly up to the oldest region
        assert ring.reserve(1) is None  # full
        ring.release(1)  # in use [0, 320) and [320, 448)
        assert ring.reserve(576) == 448  # exactly up to the end
        assert ring.reserve(1) is None
    finally:
        ring.close()


def test_writer_copies_batches_not_gathered_into_its_memory(tmp_path):
    """The hand-over of a GPU (episodes copied into the shared memory by the writer, not gathered there), run on
    the CPU with a memory smaller than one batch: it grows, and every demo is written exactly."""
    buffers = EpisodeBuffers(num_envs=3, capacity=8, device="cpu")
    for t in range(5):
        buffers.append("actions", torch.arange(6.0).reshape(3, 2) + 10 * t, env_mask=torch.tensor([True, True, t < 2]))
        buffers.append("obs/policy", torch.full((3, 4), float(t)), env_mask=None)
    rows = buffers.take(torch.tensor([0, 2]), [0, 2])
    assert rows.offsets is None
    path = tmp_path / "copied.hdf5"
    writer = EpisodeWriter(EpisodeWriterCfg(staging_bytes=64), [str(path)], DatasetExportMode.EXPORT_ALL)
    writer.put(EpisodeBatch(rows, torch.tensor([True, False]), [0, 2]))
    writer.close()
    with h5py.File(path, "r") as f:
        demos = f["data"]
        assert demos["demo_0"]["actions"][:].tolist() == [[10.0 * t, 10.0 * t + 1] for t in range(5)]
        assert demos["demo_1"]["actions"][:].tolist() == [[4.0 + 10 * t, 5.0 + 10 * t] for t in range(2)]
        assert demos["demo_1"]["obs/policy"].shape == (5, 4) and demos["demo_1"].attrs["success"] == False  # noqa: E712
        assert demos.attrs["total"] == 7


def test_a_region_never_handed_over_is_freed_by_the_next_allocation(tmp_path):
    """An interrupt between an export's allocation and its hand-over leaves a region no message frees: the next
    allocation frees it, so an export that needs the whole memory gets it instead of waiting forever."""
    writer = EpisodeWriter(EpisodeWriterCfg(staging_bytes=4096), [str(tmp_path / "r.hdf5")],
                           DatasetExportMode.EXPORT_ALL)
    try:
        writer.allocate(1000)  # interrupted before put()
        result = []
        waiter = threading.Thread(target=lambda: result.append(writer.allocate(4096)), daemon=True)
        waiter.start()
        waiter.join(timeout=10.0)
        assert result and result[0][1] == 0, "the whole memory must be free again"
    finally:
        writer._allocated = False  # the waiting allocation (if any) stays unfinished; close what was handed over
        writer.close()


def _synthetic_batches() -> list[EpisodeBatch]:
    """14 batches of 1 to 9 Cartpole-shaped episodes (``bench_writer.py``'s) of 3 to 7 samples, about half of them
    succeeded: the same ones at every call."""
    bench = load_script("benchmarks/bench_writer")
    rng = np.random.default_rng(0)
    batches = [bench.batch(1 + i % 9, 3 + i % 5, rng) for i in range(14)]
    for batch in batches:
        batch.success = rng.random(len(batch.env_ids)) < 0.5
    return batches


@pytest.mark.parametrize("mode", [DatasetExportMode.EXPORT_ALL,
                                  DatasetExportMode.EXPORT_SUCCEEDED_ONLY,
                                  DatasetExportMode.EXPORT_SUCCEEDED_FAILED_IN_SEPARATE_FILES])
def test_writer_processes_share_a_recording_and_merge_into_the_file_one_writes(tmp_path, mode):
    """Three writer processes take the batches (the least loaded first) into part files, merged at close into the
    file(s) one writer process writes: every demo once, under its name, with the same data, compression and
    attributes, the same ``env_args`` and ``total``; no part file is left."""
    files = ["run.hdf5", "run_failed.hdf5"][: 2 if mode == DatasetExportMode.EXPORT_SUCCEEDED_FAILED_IN_SEPARATE_FILES
                                             else 1]
    contents = {}
    for n in (1, 3):
        folder = tmp_path / str(n)
        folder.mkdir()
        cfg = EpisodeWriterCfg(num_writers=n, compression_by_key={"obs": CompressionCfg(filter="lzf")})
        writer = open_episode_writer(cfg, [str(folder / name) for name in files], mode, "Isaac-Cartpole-Suspendable")
        writer.seed = 42
        writer.add_env_args({"step_dt": 0.02})
        for batch in _synthetic_batches():
            writer.put(batch)
            writer.check()
        if n > 1:
            assert all(part.batches > 0 for part in writer.writers), [part.batches for part in writer.writers]
        writer.close()
        assert sorted(os.listdir(folder)) == sorted(files)
        contents[n] = [dataset_contents(folder / name) for name in files]
    assert contents[3] == contents[1]
    succeeded = sum(int(batch.success.sum()) for batch in _synthetic_batches())
    assert 0 < succeeded < 60
    expected = {DatasetExportMode.EXPORT_ALL: [60], DatasetExportMode.EXPORT_SUCCEEDED_ONLY: [succeeded],
                DatasetExportMode.EXPORT_SUCCEEDED_FAILED_IN_SEPARATE_FILES: [succeeded, 60 - succeeded]}[mode]
    assert [len(file["demos"]) for file in contents[1]] == expected
    for file in contents[1]:
        assert sorted(file["demos"]) == sorted(f"demo_{i}" for i in range(len(file["demos"])))


def test_a_failed_writer_keeps_the_parts_and_names_the_command_that_merges_them(tmp_path):
    """A writer process that fails (a full disk) stops the recording with its error, which names the part files
    left, valid, and the ``scripts/merge_shards.py`` command that merges them; that command does."""
    path = str(tmp_path / "run.hdf5")
    parts = [str(tmp_path / f"run-writer{i}of2.hdf5") for i in range(2)]
    writer = open_episode_writer(EpisodeWriterCfg(num_writers=2), [path], DatasetExportMode.EXPORT_ALL,
                                 "Isaac-Cartpole-Suspendable")
    writer.writers[1].inject_fault("demo", 4, "enospc")
    command = f"scripts/merge_shards.py --datasets {' '.join(parts)} --output {path}"
    with pytest.raises(OSError, match=rf"The episodes written are in the part files .* \({command} merges them\)"
                       ) as info:
        try:
            for batch in _synthetic_batches():
                writer.put(batch)
        finally:
            writer.close()
    assert info.value.errno == errno.ENOSPC and str(parts) in str(info.value)
    assert sorted(os.listdir(tmp_path)) == sorted(map(os.path.basename, parts))
    written = writer.written_count(True) + writer.written_count(False)
    assert load_script("merge_shards").main(command.split()[1:]) == 0
    assert len(dataset_contents(path)["demos"]) == written >= 3


def test_a_merge_that_cannot_run_keeps_the_parts_and_a_new_recording_does_not_overwrite_them(tmp_path):
    """A merge that fails (here the dataset path is a folder) leaves the part files and says how to merge them; a
    later recording to that path refuses to start rather than overwrite them."""
    path = tmp_path / "taken.hdf5"
    path.mkdir()
    cfg = EpisodeWriterCfg(num_writers=2)
    writer = open_episode_writer(cfg, [str(path)], DatasetExportMode.EXPORT_ALL)
    for batch in _synthetic_batches()[:4]:
        writer.put(batch)
    with pytest.raises(OSError, match=rf"Could not merge the part files into '{path}'.*scripts/merge_shards.py"):
        writer.close()
    parts = sorted(name for name in os.listdir(tmp_path) if name != "taken.hdf5")
    assert parts == ["taken-writer0of2.hdf5", "taken-writer1of2.hdf5"]
    assert sum(len(dataset_contents(tmp_path / part)["demos"]) for part in parts) == 1 + 2 + 3 + 4
    with pytest.raises(FileExistsError, match=r"Part files of an earlier recording are in the way: .*taken-writer0of2"):
        open_episode_writer(cfg, [str(path)], DatasetExportMode.EXPORT_ALL)
    with pytest.raises(ValueError, match=r"EpisodeWriterCfg\.num_writers must be an integer of at least 1, got 0"):
        open_episode_writer(EpisodeWriterCfg(num_writers=0), [str(tmp_path / "other.hdf5")],
                            DatasetExportMode.EXPORT_ALL)


def test_an_interrupted_merge_keeps_the_parts_and_says_where_they_are(tmp_path, monkeypatch):
    """Ctrl-C (or SIGTERM) while the parts merge: the interrupt goes on, its message naming the dataset not
    written, the part files left and the command that merges them (``cli.run`` prints it)."""
    path = tmp_path / "run.hdf5"
    writer = open_episode_writer(EpisodeWriterCfg(num_writers=2), [str(path)], DatasetExportMode.EXPORT_ALL)
    for batch in _synthetic_batches()[:2]:
        writer.put(batch)

    def interrupted(parts, output):
        raise KeyboardInterrupt

    monkeypatch.setattr(sharded_writer, "merge_parts", interrupted)
    with pytest.raises(KeyboardInterrupt) as info:
        writer.close()
    parts = [str(tmp_path / f"run-writer{i}of2.hdf5") for i in range(2)]
    assert str(info.value) == (f"Interrupted before the part files were merged: {[str(path)]} not written; the"
                               f" episodes written are in the part files {parts} (scripts/merge_shards.py"
                               f" --datasets {' '.join(parts)} --output {path} merges them).")
    assert sorted(os.listdir(tmp_path)) == sorted(map(os.path.basename, parts))
