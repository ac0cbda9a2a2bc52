"""Unit test of per-env state discovery on plain objects (the real parts are covered in test_any_task_freeze)."""

import torch

from isaaclab.utils.buffers import CircularBuffer, DelayBuffer
from isaaclab.utils.images import CameraFrameStack

from isaaclab_suspend.suspension import discover

N = 5


class _Part:
    def __init__(self):
        self.rows = torch.zeros(N, 3)
        self.per_joint = torch.zeros(N * 2)  # two rows per env, env-major
        self.constant = torch.zeros(3)  # not per env
        self.odd = torch.zeros(2, N)  # an env-sized dim that is not leading: cannot be classified
        self.flat = torch.zeros(3, N * 4)
        self.flat_per_env = self.flat.view(3, N, 4)  # known only through the explicit table: stays unclassified
        self.nested = {"timers": [torch.zeros(N)]}
        self.history = CircularBuffer(max_len=3, batch_size=N, device="cpu")
        self.delay = DelayBuffer(history_length=2, batch_size=N, device="cpu")
        # a class-based image term's frame stack: a ring stacked along the channel dim keeps its envs on dim 0
        self.frames = CameraFrameStack(N, "cpu", frame_stack=3)


def test_discovers_layouts_and_names_what_it_cannot_classify():
    part = _Part()
    found, unknown = discover(part, "part", N)
    layouts = {f.name: (f.layout, f.dim, f.rows_per_env) for f in found}
    assert layouts["part.rows"] == ("rows", 0, 1)
    assert layouts["part.per_joint"] == ("packed", 0, 2)
    assert layouts["part.nested.timers.0"] == ("rows", 0, 1)
    assert layouts["part.history._buffer"] == ("dim1", 1, 1)  # allocated on the first append
    assert layouts["part.delay._buffer"] == ("ring", 1, 1)
    assert layouts["part.frames._buffer._buffer"] == ("rows", 0, 1)
    assert layouts["part.frames._buffer._num_pushes"] == ("rows", 0, 1)
    assert "part.constant" not in layouts
    assert set(unknown) == {"part.odd", "part.flat", "part.flat_per_env"}
    # getters re-resolve the path: an owner that rebinds its buffer is followed
    getter = next(f.getter for f in found if f.name == "part.rows")
    part.rows = torch.ones(N, 3)
    assert getter() is part.rows
    part.history.append(torch.ones(N, 2))
    assert next(f for f in found if f.name == "part.history._buffer").getter().shape == (3, N, 2)
    part.frames(torch.zeros(N, 4, 4, 3, dtype=torch.uint8))
    assert next(f for f in found if f.name == "part.frames._buffer._buffer").getter().shape == (N, 4, 4, 3, 3)


def test_a_sensors_reset_mask_is_scratch_not_state():
    """Isaac Lab's sensors refill ``_reset_mask`` from the env ids of every reset call: the last call's envs stay in
    it, so freezing or comparing it per env would report whichever envs reset last (a never-suspended env's row
    differs between two runs whose other envs reset at other steps)."""
    from isaaclab.sensors import SensorBase

    class _Sensor(SensorBase):
        def __del__(self):  # never initialised: no callbacks to clear
            pass

    _Sensor.__abstractmethods__ = frozenset()  # only its attributes are walked
    sensor = object.__new__(_Sensor)
    sensor._reset_mask_torch = torch.zeros(N, dtype=torch.bool)
    sensor._reset_mask = sensor._reset_mask_torch.view(N)
    sensor._timestamp = torch.zeros(N)
    found, unknown = discover(sensor, "sensor", N)
    assert {f.name for f in found} == {"sensor._timestamp"} and not unknown
