"""Recording under failure: exceptions, Ctrl-C and SIGKILL mid-run and inside the write, unwritable or full disks."""

import errno
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import gymnasium as gym
import h5py
import pytest
import torch

from isaaclab.app.sim_launcher import launch_simulation
from isaaclab.managers import DatasetExportMode
from isaaclab.utils.datasets import HDF5DatasetFileHandler

from isaaclab_suspend.datasets import DatasetReader, DatasetReplayer, make_replay_env_cfg
from isaaclab_suspend.recording import DatasetRecorderManagerCfg
from isaaclab_suspend.recording import EpisodeWriterCfg
from isaaclab_suspend.tasks.env_factory import open_env

from helpers import DEADLINE_S, ROOT, dataset_contents

pytestmark = pytest.mark.slow  # writer processes killed, paused and refused mid-recording

TASK = "Isaac-Cartpole-Suspendable"
NUM_ENVS = 4


def _recorders(tmp_path, **kwargs) -> DatasetRecorderManagerCfg:
    return DatasetRecorderManagerCfg(dataset_export_dir_path=str(tmp_path), dataset_filename="run", **kwargs)


def _check_file(path) -> tuple[int, int]:
    """Load every demo with Isaac Lab's handler, check ``total`` against them; returns the numbers of demos
    marked succeeded and failed."""
    handler = HDF5DatasetFileHandler()
    handler.open(str(path))
    try:
        lengths = [len(handler.load_episode(name, "cpu").data["actions"]) for name in handler.get_episode_names()]
    finally:
        handler.close()
    assert all(n > 0 for n in lengths)
    with h5py.File(path, "r") as f:
        assert f["data"].attrs["total"] == sum(lengths)
        assert [f["data"][name].attrs["num_samples"] for name in f["data"]] == lengths
        succeeded = sum(bool(f["data"][name].attrs["success"]) for name in f["data"])
    return succeeded, len(lengths) - succeeded


def _exported(manager) -> tuple[int, int]:
    """The episodes the recorder counts as exported: (succeeded, failed)."""
    return manager.exported_successful_episode_count, manager.exported_failed_episode_count


def _replay_passes(path) -> None:
    """Replay every demo of ``path`` in NUM_ENVS envs (the recorded origins): each matches its recording exactly."""
    cfg = make_replay_env_cfg(TASK, NUM_ENVS)
    with launch_simulation(cfg, {}):
        env = gym.make(TASK, cfg=cfg).unwrapped
        try:
            with DatasetReader(str(path)) as reader:
                results = DatasetReplayer(env, reader).run()
        finally:
            env.close()
    assert results and all(r.max_state_error == 0.0 for r in results), [r.max_state_error for r in results]


def _step(env, gen, push: torch.Tensor | float = 0.0) -> torch.Tensor:
    """One random-action step, ``push`` added to each env's action (a steady push drives the cart off its track);
    returns how many episodes it ended, as (succeeded, failed): Cartpole's success is reaching the time-out (its
    ``success`` term is a time-out term), a failure an early termination. Shape: (2,)."""
    _, _, term, trunc, _ = env.step(push + 2.0 * torch.rand(NUM_ENVS, 1, generator=gen) - 1.0)
    return torch.stack((trunc.sum(), (term & ~trunc).sum()))


def _ends() -> torch.Tensor:
    """Counts of ended episodes for :func:`_step` to add to: (succeeded, failed). Shape: (2,)."""
    return torch.zeros(2, dtype=torch.long)


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_interrupted_run_writes_every_exported_episode(tmp_path, error):
    """An exception or Ctrl-C between steps: every ended episode is in a valid file that replays exactly."""
    gen = torch.Generator().manual_seed(0)
    ended = _ends()
    with pytest.raises(error):
        with open_env(TASK, NUM_ENVS, episode_length_s=0.5, recorders=_recorders(tmp_path)) as env:
            manager = env.recorder_manager
            env.reset()
            for step in range(200):
                ended += _step(env, gen)
                if ended.sum() >= 6 and step % 7 == 3:  # in the middle of episodes
                    raise error("stop")
    assert _check_file(tmp_path / "run.hdf5") == tuple(ended.tolist()) == _exported(manager)
    _replay_passes(tmp_path / "run.hdf5")


@pytest.mark.parametrize("point", ["demo", "datasets", "flush"])
def test_ctrl_c_inside_the_write(tmp_path, point):
    """Ctrl-C while the writer is at ``point`` of its third write: every episode handed over is written."""
    gen = torch.Generator().manual_seed(1)
    paused = tmp_path / "run.hdf5.paused"  # the writer process creates it at the point and waits for its removal
    ended, interrupted = _ends(), False
    with pytest.raises(KeyboardInterrupt):
        with open_env(TASK, NUM_ENVS, episode_length_s=0.3, recorders=_recorders(tmp_path)) as env:
            manager = env.recorder_manager
            manager.writer.inject_fault(point, 3, "pause")
            env.reset()
            for _ in range(300):
                if paused.exists():
                    interrupted = True
                    paused.unlink()  # the write goes on while the step thread is interrupted
                    raise KeyboardInterrupt  # as the default SIGINT handler does
                ended += _step(env, gen)
    assert interrupted, "the interrupt must come while the writer is inside a write"
    assert manager.writer.pending == 0
    assert _check_file(tmp_path / "run.hdf5") == _exported(manager) == tuple(ended.tolist())


@pytest.mark.parametrize("point", ["demo", "datasets", "flush"])
def test_failing_write_raises_on_the_step_thread_and_keeps_earlier_episodes(tmp_path, point):
    """A disk that fills up at ``point`` of a write: a clear error on the step thread; the file holds whole demos."""
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(OSError, match="demos safe: [0-9]+ in .*run.hdf5 \\(the file closed whole\\)") as info:
        with open_env(TASK, NUM_ENVS, episode_length_s=0.3, recorders=_recorders(tmp_path)) as env:
            manager = env.recorder_manager
            manager.writer.inject_fault(point, 4, "enospc")
            env.reset()
            for _ in range(300):
                _step(env, gen)
    assert str(tmp_path / "run.hdf5") in str(info.value) and info.value.errno == errno.ENOSPC
    assert info.value.__context__ is None, "raised once: closing the env must not raise it again over the first"
    assert _check_file(tmp_path / "run.hdf5") == _exported(manager) and sum(_exported(manager)) >= 3


KILLED_RUN = """
import sys, time, torch
from isaaclab_suspend.recording import DatasetRecorderManagerCfg
from isaaclab_suspend.recording import EpisodeWriterCfg
from isaaclab_suspend.tasks.env_factory import open_env

point, out = sys.argv[1], sys.argv[2]
recorders = DatasetRecorderManagerCfg(dataset_export_dir_path=out, dataset_filename="run",
                                      writer=EpisodeWriterCfg(queue_size={queue_size}))
gen = torch.Generator().manual_seed(2)
deadline, armed = time.monotonic() + {deadline}, False
with open_env("{task}", {num_envs}, episode_length_s=0.3, recorders=recorders) as env:
    manager = env.recorder_manager
    env.reset()
    while time.monotonic() < deadline:
        env.step(2.0 * torch.rand({num_envs}, 1, generator=gen) - 1.0)
        written = manager.exported_successful_episode_count + manager.exported_failed_episode_count
        print("written", written, "unflushed", manager.unflushed_count, flush=True)
        if written > 0 and not armed:  # a flush reported: the kill comes after it, however slow the writer is
            manager.writer.inject_fault(point, 2, "sigkill")  # kills this process and the writer
            armed = True
sys.exit("no kill before the deadline")
"""


@pytest.mark.parametrize("point", ["datasets", "flush"])
def test_sigkill_inside_the_write(tmp_path, point):
    """SIGKILL of the run and its writer at ``point`` of the second write after its first reported flush: a
    readable file, the flushed kept, the unflushed lost."""
    queue_size = 6
    code = textwrap.dedent(KILLED_RUN).format(queue_size=queue_size, task=TASK, num_envs=NUM_ENVS,
                                              deadline=DEADLINE_S)
    proc = subprocess.run([sys.executable, "-c", code, point, str(tmp_path)], capture_output=True, text=True,
                          timeout=600, start_new_session=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    reports = [line.split() for line in proc.stdout.splitlines() if line.startswith("written ")]
    written, unflushed = int(reports[-1][1]), int(reports[-1][3])
    demos = sum(_check_file(tmp_path / "run.hdf5"))
    assert 0 < written <= demos <= written + unflushed + NUM_ENVS  # flushed kept; the last step may export more
    assert max(int(r[3]) for r in reports) <= max(queue_size, NUM_ENVS), "what a kill loses stays bounded"
    _replay_passes(tmp_path / "run.hdf5")


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


@pytest.mark.parametrize("field, setting", [
    ("spare_slots", {"spare_slots": 2.0}),
    ("spare_slots", {"spare_slots": -1}),
    ("handover_interval_s", {"handover_interval_s": None}),
    ("staging_bytes", {"writer": EpisodeWriterCfg(staging_bytes=1e6)}),
    ("queue_size", {"writer": EpisodeWriterCfg(queue_size=0)}),
    ("num_writers", {"writer": EpisodeWriterCfg(num_writers=0)}),
])
def test_bad_recorder_settings_get_a_clear_error(tmp_path, field, setting):
    """A recorder setting of the wrong type or below its minimum is named when the env is created, not met as a
    numpy or OS error deep in the buffers or the shared memory."""
    with pytest.raises(ValueError, match=rf"Cfg\.{field} must be an? (integer|number) of at least"):
        with open_env(TASK, NUM_ENVS, recorders=_recorders(tmp_path, **setting)):
            pass


def test_export_in_close_is_refused(tmp_path):
    with pytest.raises(ValueError, match="export_in_close"):
        with open_env(TASK, NUM_ENVS, recorders=_recorders(tmp_path, export_in_close=True)):
            pass


QUEUE_SIZE = 6



def _until(condition, deadline_s: float = DEADLINE_S) -> bool:
    """Whether ``condition()`` came true (polled) within ``deadline_s``: for what another thread or process does."""
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def _watch_waits(writers) -> list[int]:
    """Count the step thread's waits for a writer's answer (``_receive(wait=True)``: a full queue or shared
    memory) while they last: returns the counter, one per writer."""
    waiting = [0] * len(writers)

    def watched(index, receive):
        def call(wait):
            waiting[index] += wait
            try:
                return receive(wait)
            finally:
                waiting[index] -= wait
        return call

    for index, writer in enumerate(writers):
        writer._receive = watched(index, writer._receive)
    return waiting


def _resume_when_a_step_waits(markers, waiting: list[int], waited: list[bool]) -> None:
    """Once every paused writer made its marker and the step thread waits for a writer's answer, let the writers go
    on; ``waited`` gets whether that happened within DEADLINE_S (a writer gives up its pause after 10 s itself)."""
    waited.append(_until(lambda: all(marker.exists() for marker in markers) and any(waiting)))
    for marker in markers:
        marker.unlink(missing_ok=True)


def test_full_queue_makes_the_step_wait(tmp_path):
    """A writer that stalls: the step waits for it, nothing is dropped, the queue never exceeds its bound."""
    gen = torch.Generator().manual_seed(3)
    unflushed, waited = [], []
    ended = _ends()
    with open_env(TASK, NUM_ENVS, episode_length_s=0.2,
                  recorders=_recorders(tmp_path, writer=EpisodeWriterCfg(queue_size=QUEUE_SIZE))) as env:
        manager = env.recorder_manager
        manager.writer.inject_fault("demo", 2, "pause")
        paths = {"retire": 0, "take": 0}  # both export paths must run: episodes that wait, and those that cannot

        def counted(name, method):
            def call(*args, **kwargs):
                paths[name] += 1
                return method(*args, **kwargs)
            return call

        manager.buffers.retire = counted("retire", manager.buffers.retire)
        manager.buffers.take = counted("take", manager.buffers.take)
        # the writer resumes once it paused and a step waits for it (the step is held until then)
        resume = threading.Thread(target=_resume_when_a_step_waits, daemon=True,
                                  args=([tmp_path / "run.hdf5.paused"], _watch_waits([manager.writer]), waited))
        resume.start()
        env.reset()
        for _ in range(80):
            ended += _step(env, gen)
            unflushed.append(manager.unflushed_count)
        resume.join(DEADLINE_S)
    assert waited == [True], "a step must have waited for the paused writer"
    assert paths["retire"] > 0 and paths["take"] > 0, paths
    assert 0 < max(unflushed) <= QUEUE_SIZE  # above NUM_ENVS, so that the bound is the queue's, not one export's
    assert _check_file(tmp_path / "run.hdf5") == tuple(ended.tolist()) == _exported(manager)


def test_two_writer_processes_write_the_files_one_writes_and_make_the_step_wait_when_full(tmp_path):
    """``num_writers=2`` records the run one writer process records, succeeded and failed episodes in separate
    files: at close each file is the one writer's (every demo once, under its name, with the same data, attributes
    and ``env_args``) and no part file is left. Both writers pause with a small queue, until a step waits for them
    (back-pressure): nothing is dropped, at most a queue per writer is pending."""
    contents = {}
    for n in (1, 2):
        gen = torch.Generator().manual_seed(0)
        folder = tmp_path / str(n)
        writer = EpisodeWriterCfg(num_writers=n, queue_size=QUEUE_SIZE)
        recorders = _recorders(folder, writer=writer,
                               dataset_export_mode=DatasetExportMode.EXPORT_SUCCEEDED_FAILED_IN_SEPARATE_FILES)
        ended, unflushed, waited = _ends(), [], []
        with open_env(TASK, NUM_ENVS, episode_length_s=0.4, recorders=recorders) as env:
            manager = env.recorder_manager
            resume = None
            if n == 2:
                for part in manager.writer.writers:
                    part.inject_fault("demo", 2, "pause")
                markers = [folder / f"run-writer{i}of2.hdf5.paused" for i in range(2)]
                resume = threading.Thread(target=_resume_when_a_step_waits, daemon=True,
                                          args=(markers, _watch_waits(manager.writer.writers), waited))
                resume.start()
            env.reset()
            for _ in range(240):
                ended += _step(env, gen, push=torch.tensor([[3.0], [-3.0], [0.0], [0.0]]))  # successes and failures
                unflushed.append(manager.unflushed_count)
            if resume is not None:
                resume.join(DEADLINE_S)
                assert waited == [True], "a step must have waited for the paused writers"
                assert all(part.batches > 0 for part in manager.writer.writers)
                assert 0 < max(unflushed) <= 2 * QUEUE_SIZE
        assert sorted(os.listdir(folder)) == ["run.hdf5", "run_failed.hdf5"]
        succeeded, failed = _check_file(folder / "run.hdf5")[0], _check_file(folder / "run_failed.hdf5")[1]
        assert (succeeded, failed) == tuple(ended.tolist()) == _exported(manager)
        assert succeeded > 0 and failed > 0
        contents[n] = [dataset_contents(folder / name) for name in ("run.hdf5", "run_failed.hdf5")]
    assert contents[2] == contents[1]


def test_small_shared_memory_grows_wraps_and_loses_nothing(tmp_path):
    """Exports through a shared memory that starts smaller than one export and wraps many times: every ended
    episode is written, and each replays exactly."""
    gen = torch.Generator().manual_seed(4)
    ended = _ends()
    writer = EpisodeWriterCfg(staging_bytes=4096, flush_interval_s=0.0)
    with open_env(TASK, NUM_ENVS, episode_length_s=0.3, recorders=_recorders(tmp_path, writer=writer)) as env:
        manager = env.recorder_manager
        env.reset()
        for _ in range(120):
            ended += _step(env, gen)
        grown = manager.writer._ring.size
    assert 4096 < grown < 2**20
    assert _check_file(tmp_path / "run.hdf5") == tuple(ended.tolist()) == _exported(manager)
    assert ended.sum() > 10
    _replay_passes(tmp_path / "run.hdf5")


def test_record_output_in_a_folder_that_cannot_be_made_is_one_line(tmp_path, capsys):
    """Even root cannot make a folder in /proc: record.py says so while parsing, with one line and no traceback
    (the env's launcher would print one around the recorder's error)."""
    from helpers import load_script

    with pytest.raises(SystemExit) as exit_info:
        load_script("record").parse_args(["--policy", "random", "--output", "/proc/no_such_folder/run.hdf5"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err, err
    (line,) = [line for line in err.splitlines() if "error" in line]
    assert "--output '/proc/no_such_folder/run.hdf5'" in line, line


def test_policy_that_does_not_fit_leaves_no_file_and_keeps_an_old_one(tmp_path, capsys):
    """A checkpoint that reads fine but does not fit the env (push-cube's expert on Cartpole) fails with one line
    (naming the task the file was trained on) and exit status 2 before the dataset file exists: record.py leaves
    no empty file behind and, with --overwrite, keeps the dataset already there; eval.py --record likewise."""
    from helpers import load_script

    old = tmp_path / "old.hdf5"
    with h5py.File(old, "w") as f:
        f.create_group("data").attrs["total"] = 7
    before = old.read_bytes()
    expert = ["--policy", "checkpoint", "--checkpoint", "isaaclab_suspend/rl/checkpoints/push_cube_rsl_rl.pt",
              "--task", TASK, "--num_envs", "2", "--quiet"]
    runs = {"record": (["--episodes", "2", "--output", str(tmp_path / "new.hdf5")],
                       ["--episodes", "2", "--output", str(old), "--overwrite"]),
            "eval": (["--steps", "4", "--timeline", "", "--record", str(tmp_path / "new.hdf5")],
                     ["--steps", "4", "--timeline", "", "--record", str(old), "--overwrite"])}
    for script, cases in runs.items():
        for args in cases:
            module = load_script(script)
            status = module.main([*expert, *args]) if script == "record" else cli_run(module, [*expert, *args])
            err = capsys.readouterr().err
            assert status == 2 and "Traceback" not in err, err
            (line,) = [line for line in err.splitlines() if line.strip()][-1:]  # one line, torch's list joined
            assert ("does not fit Isaac-Cartpole-Suspendable with this env's observations and actions (the file"
                    " names the task 'Isaac-PushCube-Suspendable'): Error(s) in loading state_dict") in line, err
            assert "kept in" not in err, err
            assert not (tmp_path / "new.hdf5").exists()
            assert old.read_bytes() == before


def cli_run(module, argv: list[str]) -> int:
    """eval.py's ``__main__``: its body under :func:`isaaclab_suspend.cli.run`."""
    from isaaclab_suspend import cli

    return cli.run(module.evaluate, module.parse_args(argv))


def test_writer_process_killed_alone_is_one_error_naming_the_demos_in_the_file(tmp_path):
    """SIGKILL of the writer process alone (the recording goes on): the next step raises one OSError saying how it
    ended and how many demos the file holds, read back; the file is readable and holds them (was a RuntimeError:
    a traceback and exit status 1)."""
    gen = torch.Generator().manual_seed(3)
    with pytest.raises(ChildProcessError, match=r"the writer process ended \(killed by signal 9\); demos safe: (\d+)"
                                                rf" in {tmp_path / 'run.hdf5'}") as info:
        with open_env(TASK, NUM_ENVS, episode_length_s=0.3, recorders=_recorders(tmp_path)) as env:
            manager = env.recorder_manager
            env.reset()
            for _ in range(300):
                _step(env, gen)
                if sum(_exported(manager)) >= 4 and manager.writer._process.poll() is None:
                    manager.writer._process.send_signal(signal.SIGKILL)
    assert "\n" not in str(info.value)
    stated = int(re.search(r"demos safe: (\d+)", str(info.value))[1])
    assert sum(_check_file(tmp_path / "run.hdf5")) == stated >= 4


FILL_AND_RECORD = r"""
set -e
mount -t tmpfs -o size=70m tmpfs "$1"
"$2" "$3" --model random --num_envs 16 --episodes 1000 --output "$1/run.hdf5" --quiet 2>"$1/../stderr" &
pid=$!
while [ "$(stat -c %s "$1/run.hdf5" 2>/dev/null || echo 0)" -lt 100000 ]; do sleep 0.1; done
fallocate -l $(( $(stat -f -c '%a * %S' "$1") - 300000 )) "$1/filler"
status=0; wait $pid || status=$?
cp "$1/run.hdf5" "$1/../run.hdf5"
exit $status
"""


def test_disk_filling_mid_recording_is_one_line_and_keeps_whole_demos(tmp_path):
    """A disk that really fills up mid-recording: record.py writes to a 70 MiB tmpfs, mounted in a user and mount
    namespace of its own (``unshare -rm``: no privilege needed, nothing outside sees it), and once its file holds
    100 kB a filler takes all but 300 kB of it. record.py exits 2 with one line naming the file, the free space
    and how many demos are safe; the file holds those demos, whole (was: a segfaulting writer, exit 1 with a
    traceback and up to 190 lines of h5py "Exception ignored")."""
    mount = tmp_path / "disk"
    mount.mkdir()
    try:
        run = subprocess.run(["unshare", "-rm", "sh", "-c", FILL_AND_RECORD, "sh", str(mount), sys.executable,
                              os.path.join(ROOT, "scripts", "record.py")], cwd=ROOT, capture_output=True, text=True,
                             timeout=600)
    except FileNotFoundError:
        run = None
    if run is None or "mount" in run.stderr and run.returncode != 2:
        pytest.fail(f"this machine cannot mount a tmpfs in a user namespace (unshare -rm): {run and run.stderr}")
    err = (tmp_path / "stderr").read_text()
    lines = [line for line in err.splitlines() if line.strip() and "Warp CUDA warning" not in line]
    assert run.returncode == 2 and len(lines) == 1, err[-3000:]
    assert "Traceback" not in err and "Exception ignored" not in err
    match = re.search(rf"Could not write episodes to .*: no space left on its disk \((\d+\.\d+) MiB free\); demos"
                      rf" safe: (\d+) in {mount / 'run.hdf5'} \(the file closed whole\)", lines[0])
    assert match and float(match[1]) < 1.0, lines[0]
    assert sum(_check_file(tmp_path / "run.hdf5")) == int(match[2]) > 0
