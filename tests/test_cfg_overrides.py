"""What a flag or a file may hand the env's cfg (isaaclab_suspend.cfg_overrides): a dataset's stored overrides are
data (numbers and booleans the task's cfg has, in range), a user's are checked for sense, seeds are numpy's. Every
refusal is exit status 2 and one line, no traceback, before any env is built (``launch_simulation`` fails the test
if it is reached), so these cases take a second each; a recording's own overrides still replay exactly."""

import dataclasses
import json
import re
import shutil
from types import SimpleNamespace

import h5py
import pytest
from helpers import load_script, record_chunk_demos

import isaaclab_suspend.tasks.env_factory
from isaaclab_suspend.cfg_overrides import Bound, CfgOverridesCfg, check_overrides

TASK = "Isaac-Cartpole-Suspendable"
RECORDED = ["env.episode_length_s=0.2", "env.sim.render_interval=2", "presets=newton_mjwarp"]
"""Overrides the test recording is made with, stored in its ``env_args`` as record.py stores them."""


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    """Cartpole demos of 12 steps (0.2 s episodes) from 2 envs, recorded with :data:`RECORDED`."""
    path = record_chunk_demos(tmp_path_factory.mktemp("cfg_overrides"), TASK, [0, 4], 20, tuple(RECORDED))
    with h5py.File(path, "r") as f:
        assert json.loads(f["data"].attrs["env_args"])["cfg_overrides"] == RECORDED
    return path


@pytest.fixture
def no_env(monkeypatch):
    """Fail the test if an env is about to be built."""
    def launch(*args, **kwargs):
        raise AssertionError("an env was built")

    monkeypatch.setattr(isaaclab_suspend.tasks.env_factory, "launch_simulation", launch)


def _one_error_line(capsys, status, message, usage=False):
    """The one error line (after argparse's usage where ``usage``), with exit status 2 and no traceback."""
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    lines = lines[-1:] if usage and lines[0].startswith("usage:") else lines
    assert status == 2 and "Traceback" not in out + err, (status, out[-2000:], err[-2000:])
    assert len(lines) == 1 and "error:" in lines[0] and message in lines[0], err
    return lines[0]


FILE_OVERRIDES = {
    "a path": ("env.scene.robot.spawn.usd_path=/etc/passwd", "sets a text: a dataset's cfg overrides may only set"),
    "a term's func": ("env.observations.policy.joint_pos_rel.func=this:s", "sets 'func', which names code"),
    "a class": ("env.scene.robot.class_type=os:system", "sets 'class_type', which names code"),
    "a huge history": ("env.observations.policy.history_length=300000000",
                       "observations.policy.history_length must be an integer in [0, 1000], got 300000000"),
    "decimation 0": ("env.decimation=0", "decimation must be an integer in [1, 10000], got 0"),
    "no envs": ("env.scene.num_envs=0", "scene.num_envs must be an integer >= 1, got 0"),
    "an unknown key": ("env.nope=1", "the task's cfg has no field nope"),
    "a text for a number": ("env.decimation=true", "decimation is int (2), got 'true'"),
    "an interpolation": ("env.decimation=${oc.env:HOME}", "interpolations (${...}) are not supported"),
    "Hydra's + form": ("+env.extra=1", "Hydra's +KEY= and ~KEY= forms are not supported"),
    "an agent key": ("agent.seed=1", "the key must be env.<field of the task's cfg>"),
    "NaN": ("env.sim.dt=nan", "sim.dt must be a finite number"),
    "a negative step": ("env.sim.dt=-0.01", "sim.dt must be a finite number in (0, 1], got -0.01"),
    "an unknown preset": ("presets=nope", "Unknown preset(s): nope"),
}


@pytest.mark.parametrize("case", sorted(FILE_OVERRIDES))
def test_replay_refuses_a_files_override_before_the_env_is_built(case, dataset, no_env, tmp_path, capsys):
    override, message = FILE_OVERRIDES[case]
    path = str(tmp_path / "crafted.hdf5")
    shutil.copy(dataset, path)
    with h5py.File(path, "a") as f:
        args = json.loads(f["data"].attrs["env_args"])
        f["data"].attrs["env_args"] = json.dumps({**args, "cfg_overrides": [*RECORDED, override]})
    line = _one_error_line(capsys, load_script("replay").main([path]), message)
    assert line.startswith(f"replay.py: error: '{path}': {TASK}: "), line


def test_a_recordings_own_overrides_still_replay_exactly(dataset, capsys):
    """The numbers record.py stores (and a preset) are applied again: 0.2 s episodes of 12 steps replay exactly."""
    assert load_script("replay").main([dataset, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "demos replayed in 2 envs; largest state error 0 " in out, out


NOISY = ["--task", "Isaac-PushCube-Noisy-Suspendable"]
USER_OVERRIDES = {
    "negative episode length": (["env.episode_length_s=-1"], "episode_length_s must be a finite number > 0, got -1"),
    "huge episode length": (["env.episode_length_s=1e300"], "make episodes of 6e+301 steps"),
    "negative step": (["env.sim.dt=-0.01"], "sim.dt must be a finite number in (0, 1], got -0.01"),
    "zero step": (["env.sim.dt=0"], "sim.dt must be a finite number in (0, 1], got 0"),
    "negative decimation": (["env.decimation=-3"], "decimation must be an integer in [1, 10000], got -3"),
    "zero decimation": (["env.decimation=0"], "decimation must be an integer in [1, 10000], got 0"),
    "no envs": (["env.scene.num_envs=0"], "scene.num_envs must be an integer >= 1, got 0"),
    "negative noise": ([*NOISY, "env.observations.policy.cart_vel.noise.std=-1"],
                       "observations.policy.cart_vel.noise.std must be a finite number >= 0, got -1"),
    "a new key": (["env.nope=1"], "the task's cfg has no field nope"),
    # a boolean is true or false: off, no, 'false' and 1 are texts (truthy) or numbers
    "off for a boolean": (["env.sim.physics.deterministic=off"],
                          "sim.physics.deterministic is a boolean (False), which takes true or false, got 'off'"),
    "a quoted false": (["env.sim.physics.deterministic='false'"], "which takes true or false, got \"'false'\""),
    "no for a boolean": (["env.suspend.enabled=no"], "suspend.enabled is a boolean (True), which takes true or false"),
    "1 for a boolean": (["env.suspend.enabled=1"], "suspend.enabled is a boolean (True), which takes true or false"),
    # a number is a number; a term's cfg is never replaced by a list, a dict or a text
    "a list for a number": (["env.rewards.alive.weight=[1,2]"], "rewards.alive.weight is a number (float, 1.0), got"),
    "true for a number": (["env.rewards.alive.weight=true"], "rewards.alive.weight is a number (float, 1.0), got 'true'"),
    "a dict for a term": (["env.rewards.alive={weight:2}"],
                          "rewards.alive is a RewardTermCfg, which an override does not replace with '{weight:2}'"),
    "a list for a term": (["env.rewards.alive=[1,2]"], "rewards.alive is a RewardTermCfg, which an override does not"),
    "a text for a term": (["env.rewards.alive=off"], "set its fields (env.rewards.alive.FIELD=VALUE), or null"),
}


@pytest.mark.parametrize("case", sorted(USER_OVERRIDES))
def test_a_users_override_that_makes_no_sense_is_one_line(case, no_env, capsys):
    argv, message = USER_OVERRIDES[case]
    eval_script = load_script("eval")
    args = eval_script.parse_args(["--num_envs", "2", "--steps", "2", "--timeline", "", *argv])
    line = _one_error_line(capsys, eval_script.cli.run(eval_script.evaluate, args), message)
    assert f"error: {args.task}: the cfg override" in line, line


PARSE_ERRORS = [
    ("eval", ["+env.extra=1"], "Hydra's +KEY= and ~KEY= forms are not supported"),
    ("eval", ["~env.decimation=2"], "Hydra's +KEY= and ~KEY= forms are not supported"),
    ("record", ["env.sim.dt=inf"], "sim.dt must be a finite number"),
    ("eval", ["env.x=${oc.env:HOME}"], "interpolations (${...}) are not supported"),
    ("audit_suspension", ["--task", TASK, "++env.decimation=2"], "Hydra's +KEY= and ~KEY= forms are not supported"),
    ("eval", ["--model.planner_overrides", "action_limit=-1"], "CartpoleLQRCfg.action_limit is a magnitude (default 4.0)"),
    ("eval", ["--task", "IsaacContrib-Lift-Cube-SO101-IK-Abs-Suspendable", "--model.planner_overrides", "grasp_noise=-1"],
     "grasp_noise must be a finite number >= 0, got -1.0"),
    ("record", ["--task", "Isaac-PushCube-Suspendable", "--model.planner_overrides", "dt=0"],
     "dt must be a finite number in (0, 1]"),
    # seeds: numpy's range, at parse time, and the seed is --seed (an env.seed= override was silently replaced)
    ("eval", ["--seed", str(2**32)], f"argument --seed: {2**32} is out of range: must be in [0, 4294967295]"),
    ("record", ["--seed", str(2**64)], "argument --seed: 18446744073709551616 is out of range"),
    ("audit_suspension", ["--task", TASK, "--seed", str(2**32)], "argument --seed: 4294967296 is out of range"),
    ("eval", ["env.seed=3"], "'env.seed=3': set the seed with --seed"),
    ("audit_suspension", ["--task", TASK, "env.seed=3"], "'env.seed=3': set the seed with --seed"),
    ("eval", ["--seed", str(2**32 - 1), "--shard", "1/2"], "shard 1 would run with seed 4294967296 (seed + shard)"),
]


@pytest.mark.parametrize("script, argv, message", PARSE_ERRORS, ids=[" ".join(c[1]) for c in PARSE_ERRORS])
def test_refused_while_the_arguments_are_parsed(script, argv, message, no_env, capsys):
    module = load_script(script)
    with pytest.raises(SystemExit) as exit_info:
        module.parse_args(argv) if hasattr(module, "parse_args") else module.main(argv)
    _one_error_line(capsys, exit_info.value.code, message, usage=True)


def test_audit_runs_with_its_seed(monkeypatch, capsys):
    """audit_suspension.py --seed reaches both runs (it had none and ran with 42 whatever env.seed= said)."""
    import isaaclab_suspend.tasks.audit as audit

    seen = []
    audited = SimpleNamespace(passed=True)
    monkeypatch.setattr(audit, "audit_suspension", lambda cfg, actions: seen.append(cfg) or audited)
    assert load_script("audit_suspension").main(["--task", TASK, "--seed", str(2**32 - 1)]) == 0
    assert [cfg.seed for cfg in seen] == [2**32 - 1]


def test_bounds_are_settings():
    """The ranges are a cfg: a caller may narrow them (here: at most 2 physics steps per env step, 100-step
    episodes)."""
    narrow = CfgOverridesCfg(bounds={"decimation": Bound(1, 2, integer=True)}, max_episode_steps=100)
    base = SimpleNamespace(decimation=1, episode_length_s=1.0, sim=SimpleNamespace(dt=0.01))
    check_overrides(base, SimpleNamespace(**{**vars(base), "decimation": 2}), ["env.decimation=2"], narrow)
    with pytest.raises(ValueError, match=r"decimation must be an integer in \[1, 2\], got 3"):
        check_overrides(base, SimpleNamespace(**{**vars(base), "decimation": 3}), ["env.decimation=3"], narrow)
    with pytest.raises(ValueError, match="make episodes of 200 steps"):
        check_overrides(base, SimpleNamespace(**{**vars(base), "episode_length_s": 2.0}), ["env.episode_length_s=2"],
                        narrow)


@dataclasses.dataclass
class _Term:
    weight: float = 1.0


@dataclasses.dataclass
class _Cfg:
    enabled: bool = True
    steps: int = 3
    noisy: bool | None = None
    term: _Term | None = dataclasses.field(default_factory=_Term)


@pytest.mark.parametrize("override, value, refused", [
    ("env.enabled=FALSE", False, None), ("env.enabled=true", True, None),
    ("env.enabled=off", "off", "enabled is a boolean (True), which takes true or false, got 'off'"),
    ("env.noisy=true", True, None),
    ("env.noisy=no", "no", "noisy is a boolean (False), which takes true or false, got 'no'"),
    ("env.steps=4", 4, None), ("env.steps=true", True, "steps is a number (int, 3), got 'true'"),
    ("env.steps={a:1}", {"a": 1}, "steps is a number (int, 3), got '{a:1}'"),
    ("env.term=null", None, None), ("env.term.weight=2", _Term(2.0), None),
    ("env.term={weight:2}", {"weight": 2}, "term is a _Term, which an override does not replace with '{weight:2}'"),
    ("env.term=[1]", [1], "term is a _Term, which an override does not replace with '[1]'"),
])
def test_an_override_keeps_its_fields_kind(override, value, refused):
    """What Hydra made of an override (``value``) must be of the field's kind: a boolean (also one declared
    ``bool | None``) only from true or false, a number only a number, a cfg set by its fields or removed (null),
    never replaced."""
    key = override.partition("=")[0].split(".")[1]
    cfg = dataclasses.replace(_Cfg(), **{key: value})
    if refused is None:
        check_overrides(_Cfg(), cfg, [override])
    else:
        with pytest.raises(ValueError, match=re.escape(f"the cfg override {override}: {refused}")):
            check_overrides(_Cfg(), cfg, [override])
