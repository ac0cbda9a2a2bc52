"""Recording under failure: exceptions and Ctrl-C mid-run, unwritable or full disks, failing exports."""

import errno

import h5py
import pytest
import torch

from isaaclab.utils.datasets import HDF5DatasetFileHandler

from isaaclab_suspend.datasets import DatasetRecorderManagerCfg
from isaaclab_suspend.utils import open_env

TASK = "Isaac-Cartpole-Suspendable"
NUM_ENVS = 4


def _recorders(tmp_path, **kwargs) -> DatasetRecorderManagerCfg:
    return DatasetRecorderManagerCfg(dataset_export_dir_path=str(tmp_path), dataset_filename="run", **kwargs)


def _read_all(path) -> list[int]:
    """Load every demo with Isaac Lab's handler; returns their lengths."""
    handler = HDF5DatasetFileHandler()
    handler.open(str(path))
    try:
        return [len(handler.load_episode(name, "cpu").data["actions"]) for name in handler.get_episode_names()]
    finally:
        handler.close()


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_interrupted_run_leaves_exported_episodes_readable(tmp_path, error):
    """An exception or Ctrl-C mid-run: the exported episodes are in a valid file, the open ones are dropped."""
    gen = torch.Generator().manual_seed(0)
    exported = 0
    with pytest.raises(error):
        with open_env(TASK, NUM_ENVS, episode_length_s=0.5, recorders=_recorders(tmp_path)) as env:
            env.reset()
            for step in range(200):
                _, _, term, trunc, _ = env.step(2.0 * torch.rand(NUM_ENVS, 1, generator=gen) - 1.0)
                exported += int((term | trunc).sum())
                if exported >= 6 and step % 7 == 3:  # in the middle of episodes
                    raise error("stop")
    lengths = _read_all(tmp_path / "run.hdf5")
    assert len(lengths) == exported and all(n > 0 for n in lengths)
    with h5py.File(tmp_path / "run.hdf5", "r") as f:
        assert f["data"].attrs["total"] == sum(lengths)


def test_unwritable_path_fails_before_the_run(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.raises(OSError, match=f"Cannot create the dataset directory '{blocker}/sub'"):
        with open_env(TASK, NUM_ENVS, recorders=DatasetRecorderManagerCfg(dataset_export_dir_path=f"{blocker}/sub")):
            pass


def test_full_disk_fails_before_the_run(tmp_path):
    with pytest.raises(OSError, match=f"MiB free in '{tmp_path}'") as info:
        with open_env(TASK, NUM_ENVS, recorders=_recorders(tmp_path, min_free_space_mb=1e12)):
            pass
    assert info.value.errno == errno.ENOSPC


def test_failing_export_names_the_file_and_keeps_earlier_episodes(tmp_path, monkeypatch):
    """A disk that fills up mid-run: a clear error, and the episodes exported before stay readable."""
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(OSError, match="The episodes exported before are in the file") as info:
        with open_env(TASK, NUM_ENVS, episode_length_s=0.5, recorders=_recorders(tmp_path)) as env:
            env.reset()
            handler = env.recorder_manager._dataset_file_handler
            for _ in range(200):
                env.step(2.0 * torch.rand(NUM_ENVS, 1, generator=gen) - 1.0)
                if handler.demo_count >= 3:
                    break

            def disk_full(*args, **kwargs):
                raise OSError(errno.ENOSPC, "No space left on device")

            monkeypatch.setattr(handler, "write_episode", disk_full)
            for _ in range(200):
                env.step(2.0 * torch.rand(NUM_ENVS, 1, generator=gen) - 1.0)
    assert str(tmp_path / "run.hdf5") in str(info.value)
    assert len(_read_all(tmp_path / "run.hdf5")) >= 3


def test_export_in_close_is_refused(tmp_path):
    with pytest.raises(ValueError, match="export_in_close"):
        with open_env(TASK, NUM_ENVS, recorders=_recorders(tmp_path, export_in_close=True)):
            pass
