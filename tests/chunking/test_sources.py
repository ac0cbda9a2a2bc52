"""A chunk-model source and a wire are added by registration alone: one cfg class each, one table row for the wire,
and ``eval.py --model NAME`` / ``--remote SCHEME://HOST:PORT`` run them with no other file touched."""

import pytest
import torch

from isaaclab.utils import configclass

from isaaclab_suspend.chunking.sources import OPENERS, SOURCES, ChunkModelCfg, ChunkModelOpener, register_source
from isaaclab_suspend.serving import WIRES, ChunkModelClientCfg, Wire, register_wire
from isaaclab_suspend.serving.base import ChunkModelClient

from helpers import load_script

RUN = ["--num_envs", "2", "--steps", "12", "--report", "", "--timeline", "", "--quiet"]


class _ConstantModel:
    """H actions of ``value`` for every env asked; counts its calls."""

    def __init__(self, chunk_length: int, value: float):
        self.chunk_length, self.value, self.calls = chunk_length, value, 0

    def __call__(self, obs_rows, env_ids: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return torch.full((len(env_ids), self.chunk_length, 1), self.value)


class DummyOpener(ChunkModelOpener):
    """One constant model for every env, planning the cfg's H (4 by default)."""

    made: list[_ConstantModel] = []

    def make(self, env, chunk_length: int) -> _ConstantModel:
        model = _ConstantModel(chunk_length, self.cfg.value)
        DummyOpener.made.append(model)
        return model

    def describe(self) -> str:
        return f"dummy model at {self.cfg.value}"


@configclass
class DummyModelCfg(ChunkModelCfg):
    class_type: type = DummyOpener
    value: float = 0.0


class DummyClient(ChunkModelClient):
    """A client of a wire that needs no server: it answers zeros itself, with what a server's hello would say."""

    def __init__(self, cfg):
        self.cfg, self.metadata, self.chunk_length, self.calls = cfg, {"task": None}, 5, 0

    def __call__(self, obs_rows, env_ids: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return torch.zeros(len(env_ids), self.chunk_length, 1)


@configclass
class DummyClientCfg(ChunkModelClientCfg):
    class_type: type = DummyClient


@pytest.fixture
def registered():
    """The dummy source and wire registered for one test, then removed (the registries are process-wide)."""
    register_source("dummy", DummyOpener)(DummyModelCfg)
    register_wire(Wire("dummywire", "dummy://", DummyClientCfg, None))
    yield
    for cfg_type in (DummyModelCfg, DummyClientCfg):
        del SOURCES[cfg_type.source_name], OPENERS[cfg_type]
    del WIRES["dummywire"]


def test_a_registered_source_and_wire_run_in_eval(registered, capsys):
    DummyOpener.made.clear()
    assert load_script("eval").main(["--model", "dummy", "--model.value", "0.25", "--model.chunk_length", "4", *RUN]) == 0
    out = capsys.readouterr().out
    assert "dummy model at 0.25" in out and "H = 4" in out
    assert DummyOpener.made and DummyOpener.made[0].value == 0.25 and DummyOpener.made[0].calls > 0

    assert load_script("eval").main(["--remote", "dummy://127.0.0.1:9", *RUN]) == 0  # the wire's client, H its own
    out = capsys.readouterr().out
    assert "remote policy dummy://127.0.0.1:9" in out and "H = 5" in out


def test_registration_refuses_a_taken_name_or_scheme(registered):
    with pytest.raises(ValueError, match="'dummy' is registered already"):
        register_source("dummy", DummyOpener)(type("OtherCfg", (DummyModelCfg,), {}))
    with pytest.raises(ValueError, match="the scheme 'dummy://' is the 'dummywire' wire's"):
        register_wire(Wire("otherwire", "dummy://", DummyClientCfg, None))
