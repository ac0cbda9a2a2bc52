"""scripts/record.py end to end: summary, refusing to overwrite, Ctrl-C and a killed process mid-run (those two
in a process of their own, the real entry point)."""

import os
import re
import signal
import subprocess
import sys
from types import SimpleNamespace

import h5py
import pytest
from h5py import h5o
from helpers import check_usage_errors, load_script

from isaaclab.utils.datasets import HDF5DatasetFileHandler

from isaaclab_suspend.tasks.env_factory import StopAfterStep

pytestmark = pytest.mark.slow  # record.py's processes signalled and their writer processes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "record.py")


def _command(output, *extra) -> list[str]:
    """record.py on Cartpole, 4 envs, episodes of 1 s (60 steps, not 300): a few episodes end within ~100 steps."""
    return [sys.executable, SCRIPT, "--task", "Isaac-Cartpole-Suspendable", "--num_envs", "4", "--output", str(output),
            *extra, "env.episode_length_s=1"]


def _demos(path) -> list[str]:
    """Names of the demos, each loaded once with Isaac Lab's handler (a corrupt file raises)."""
    handler = HDF5DatasetFileHandler()
    handler.open(str(path))
    try:
        names = list(handler.get_episode_names())
        for name in names:
            assert len(handler.load_episode(name, "cpu").data["actions"]) > 0
        return names
    finally:
        handler.close()


@pytest.mark.parametrize("writers", ["1", "2"])
def test_record_writes_the_episodes_and_a_summary(tmp_path, writers, capsys):
    """One writer process, or two whose part files are merged into the one file at the end (record.py's ``main``
    in the test process; the writers are processes of their own either way)."""
    output = tmp_path / "cartpole.hdf5"
    record = load_script("record")
    status = record.main(_command(output, "--policy", "random", "--episodes", "5", "--writers", writers)[2:])
    out = capsys.readouterr().out
    assert status == 0, out[-2000:]
    assert os.listdir(tmp_path) == ["cartpole.hdf5"]
    row = re.search(rf"\| {re.escape(str(output))} +\| +(\d+) +\| +(\d+) +\| +(\d+) +\|", out)
    assert row, out[-2000:]
    episodes, _, samples = map(int, row.groups())
    assert episodes >= 5 and len(_demos(output)) == episodes
    with h5py.File(output, "r") as f:
        assert f["data"].attrs["total"] == samples
    check_usage_errors(record, {tuple(_command(output, "--episodes", "1")[2:]): "pass --overwrite to replace it"},
                       capsys)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_stopped_run_leaves_a_valid_file(tmp_path, sig):
    """Ctrl-C (SIGINT) or a hard kill once 3 episodes are written: the file holds them and reads cleanly."""
    output = tmp_path / "stopped.hdf5"
    proc = subprocess.Popen(_command(output, "--policy", "random", "--episodes", "1000"), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    progress = ""
    try:
        while True:
            char = proc.stderr.read(1)
            assert char, f"record.py ended early: {progress[-2000:]}"
            progress = (progress + char)[-400:]
            written = re.findall(r"\| *(\d+)/1000 \[", progress)
            if written and int(written[-1]) >= 3:
                proc.send_signal(sig)
                break
        try:
            stdout, stderr = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            pytest.fail(f"record.py did not exit within 120 s of {sig.name}: {stdout[-1000:]} {stderr[-1000:]}")
    finally:
        proc.kill()
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "Interrupted" in stdout
    else:
        assert proc.returncode == -signal.SIGKILL
    assert len(_demos(output)) >= 3


def test_sigterm_while_the_parts_merge_names_them_and_the_merge_command(tmp_path, monkeypatch, capsys):
    """SIGTERM while ``--writers 2`` merges its part files (sent by the merge itself as it copies a demo, so that it
    lands there every time): exit status 130 and one line saying that the dataset file was not written and naming the
    part files and the merge command, which then merges them."""
    from isaaclab_suspend.recording import part_files

    def terminated(*args):  # the merge's copy of a demo from the second part into the first
        os.kill(os.getpid(), signal.SIGTERM)
        h5o.copy(*args)

    monkeypatch.setattr(part_files, "h5o", SimpleNamespace(copy=terminated))
    output = tmp_path / "out.hdf5"
    command = _command(output, "--policy", "random", "--episodes", "5", "--writers", "2")[2:]
    status = load_script("record").main(command)
    out = capsys.readouterr().out
    parts = [str(tmp_path / f"out-writer{i}of2.hdf5") for i in range(2)]
    merge = f"scripts/merge_shards.py --datasets {' '.join(parts)} --output {output}"
    [line] = [line for line in out.splitlines() if line.startswith("Interrupted")]
    assert status == 130 and line == (f"Interrupted before the part files were merged: {[str(output)]} not written;"
                                      f" the episodes written are in the part files {parts} ({merge} merges them)."), out
    assert sorted(os.listdir(tmp_path)) == sorted(map(os.path.basename, parts))
    assert load_script("merge_shards").main(merge.split()[1:]) == 0
    assert len(_demos(output)) >= 5


def test_first_ctrl_c_requests_a_stop_and_the_second_interrupts():
    previous = signal.getsignal(signal.SIGINT)
    with StopAfterStep() as stop:
        assert not stop.requested
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.requested
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is previous
