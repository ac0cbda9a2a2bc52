"""The one check of a device string (isaaclab_suspend.devices): ``cpu``, ``cuda`` and ``cuda:N`` this machine has
are taken as they are; every other form (torch's ``cpu:7``, which Warp refuses with a traceback, a leading zero,
capitals, another kind of device, a CUDA index past the machine's count) is one line saying what is accepted."""

import pytest
import torch

from isaaclab_suspend.devices import check_device

CUDA = torch.cuda.device_count() if torch.cuda.is_available() else 0


def test_the_devices_this_machine_has_are_taken_as_given():
    assert check_device("cpu") == "cpu"
    for device in ["cuda", *(f"cuda:{i}" for i in range(CUDA))] if CUDA else []:
        assert check_device(device) == device


@pytest.mark.parametrize("device", ["cpu:7", "cpu:0", "cuda:01", "CUDA", "Cpu", " cpu", "cuda:", "cuda:-1", "gpu",
                                    "mps", "meta", "cuda:0,1", "", None, 0])
def test_any_other_form_is_refused_in_one_line(device):
    with pytest.raises(ValueError) as refused:
        check_device(device)
    line = str(refused.value)
    assert "\n" not in line and line.endswith("give cpu, cuda or cuda:N"), line
    assert "is not a device this package runs on" in line


@pytest.mark.parametrize("index", [CUDA, CUDA + 1, 9999])
def test_a_cuda_device_past_the_machines_count_is_refused(index):
    """Indices at and past this machine's count (``cuda`` itself too, where the machine has none)."""
    for device in [f"cuda:{index}", *(["cuda"] if CUDA == 0 and index == CUDA else [])]:
        with pytest.raises(ValueError, match=f"'{device}': this machine has {CUDA} CUDA devices"):
            check_device(device)
