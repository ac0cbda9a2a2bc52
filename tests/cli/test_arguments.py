"""Every script refuses a bad argument before it builds an env: exit status 2 and one line saying what was wrong.

The table runs each script's ``parse_args`` in this process (cheap: argparse stops before any env exists); two
cases run as a user runs them, to check the whole output is the usage and one error line, without a traceback. A
run-time failure (a dead server, an unknown task) is one stderr line and no usage. Every script takes ``--quiet``.
"""

import argparse
import importlib.util
import os
import socket
import subprocess
import sys

import pytest

from isaaclab_suspend import cli
from isaaclab_suspend.cli import arguments as cli_arguments
from isaaclab_suspend.learning import ChunkPolicyCfg, ChunkPolicyNet, save_chunk_policy

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _script(name: str):
    path = os.path.join(ROOT, "scripts", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"cli_table_{name.replace('/', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def paths(tmp_path_factory) -> dict:
    """A plain file (a folder cannot be made under it) and a chunk policy checkpoint planning 4 actions."""
    root = tmp_path_factory.mktemp("cli")
    (root / "file").write_text("not a folder")
    checkpoint = str(root / "h4.pt")
    save_chunk_policy(checkpoint, ChunkPolicyNet(ChunkPolicyCfg(chunk_length=4, hidden_dims=[8]), 4, 1),
                      "Isaac-Cartpole-Suspendable")
    (root / "existing.hdf5").write_bytes(b"")
    return {"under_file": str(root / "file" / "out"), "checkpoint": checkpoint, "missing": str(root / "none.pt"),
            "existing": str(root / "existing.hdf5")}


CASES = [
    # (script, argv, message in stderr); {name} is filled from the ``paths`` fixture
    ("eval", ["--chunk", "0"], "argument --chunk: 0 is out of range: must be >= 1"),
    ("eval", ["--chunk", "-3"], "argument --chunk: -3 is out of range"),
    ("eval", ["--chunk", "x"], "argument --chunk: 'x' is not an integer"),
    ("eval", ["--num_envs", "0"], "argument --num_envs: 0 is out of range"),
    ("eval", ["--num_envs", "-1"], "argument --num_envs: -1 is out of range"),
    ("eval", ["--steps", "0"], "argument --steps: 0 is out of range"),
    ("eval", ["--steps", "-5"], "argument --steps: -5 is out of range"),
    ("eval", ["--seed", "-1"], "argument --seed: -1 is out of range: must be in [0, 4294967295]"),
    ("eval", ["--latency", "garbage"], "Cannot parse latency 'garbage'"),
    ("eval", ["--latency", "-0.2"], "Latencies must be finite and >= 0"),
    ("eval", ["--refill_threshold", "-1"],
     "argument --refill_threshold: -1 is out of range: must be a finite number in [0, 1]"),
    ("eval", ["--refill_threshold", "nan"], "argument --refill_threshold: nan is out of range"),
    ("eval", ["--timeline_envs", "-1"], "argument --timeline_envs: -1 is out of range"),
    ("eval", ["--timeline", "{under_file}/t.png"], "is a file, not a folder"),
    ("eval", ["--record", "{under_file}/r.hdf5"], "is a file, not a folder"),
    ("eval", ["--record", "{existing}"], "exists: pass --overwrite to replace it"),
    ("eval", ["--compare", "any,nope"], "unknown schedules ['nope']"),
    ("eval", ["--schedule", "nope"], "argument --schedule: invalid choice: 'nope'"),
    ("eval", ["--task", "Isaac-Nope"], "Unknown task 'Isaac-Nope'"),
    ("eval", ["--remote", "localhost"], "A tcp server's address must be 'host:port'"),
    ("eval", ["--checkpoint", "{missing}"], "does not exist"),
    ("eval", ["--checkpoint", "{checkpoint}", "--model.chunk_length", "8"], "plans 4 actions per chunk"),
    ("eval", ["--policy", "remote"], "--policy remote needs --remote ADDRESS"),
    ("eval", ["--remote", "openpi://gpu-box"], "openpi server's address must be 'openpi://host:port'"),
    ("eval", ["--model.keys", "observation/state=policy"],
     "not a field of the embedded source (EmbeddedModelCfg); its fields are chunk_length, planner_overrides,"
     " action_scale; it is a field of the gr00t and openpi sources"),
    ("eval", ["--models", "embedded,nope"], "--model nope: no such chunk-model source"),
    ("eval", ["--models", "embedded,embedded:action_scale"], "expected NAME or NAME:FIELD=VALUE"),
    ("eval", ["--models", "embedded,embedded:action_scale=-1"], "action_scale -1.0: expected a positive finite"),
    ("eval", ["--models", "embedded,embedded", "--model", "embedded"], "leave --model out"),
    ("eval", ["--models", "embedded,random"], "arm B: --model random has no chunk model to compare"),
    ("eval", ["--remote", "127.0.0.1:1", "--model.prompt", "p"], "--model.prompt: not a field of the tcp source"),
    ("eval", ["--openpi_keys", "policy"], "argument --openpi_keys: 'policy' is not KEY=PATH"),
    ("eval", ["--gr00t_keys", "state.x=policy"], "--model.keys: not a field of the embedded source"),
    ("eval", ["--remote", "openpi://127.0.0.1:1", "--model.form", "nested"], "--model.form: not a field of the openpi source"),
    ("eval", ["--remote", "127.0.0.1:1", "--model.rtc_options", "true"], "--model.rtc_options: not a field of the tcp source"),
    ("eval", ["--remote", "gr00t://gpu-box"], "gr00t server's address must be 'gr00t://host:port'"),
    ("eval", ["--shard", "2/2"], "argument --shard: --shard takes i/K with 0 <= i < K"),
    ("eval", ["--results", "{under_file}/r.json"], "is a file, not a folder"),
    ("record", ["--max_steps", "0"], "argument --max_steps: 0 is out of range"),
    ("record", ["--episodes", "0"], "argument --episodes: 0 is out of range"),
    ("record", ["--writers", "0"], "argument --writers: 0 is out of range"),
    ("record", ["--output", "{under_file}/d.hdf5"], "is a file, not a folder"),
    ("record", ["--output", "d.txt"], "--output must end with .hdf5"),
    ("record", ["--episodes", "2", "--shard", "3/4"], "--episodes 2 leaves shard 3/4 no episode"),
    ("record", ["--policy", "bc"], "--policy bc needs --checkpoint"),
    ("record", ["--model", "random", "--checkpoint", "{checkpoint}"], "--model random takes no model fields, --checkpoint or --remote"),
    ("record", ["--policy", "checkpoint", "--chunk", "4"], "plans 1 actions per chunk"),
    ("record", ["--model", "random", "--model.planner_overrides", "grasp_noise=0.01"], "--model random takes no model fields"),
    ("eval", ["--planner_cfg", "nope=1"], "planner override 'nope=1': CartpoleLQRCfg has no field 'nope'"),
    ("eval", ["--planner_cfg", "chunk_length"], "'chunk_length' is not a cfg override KEY=VALUE"),
    ("eval", ["--planner_cfg", "chunk_length=8"], "the planner's H is --model.chunk_length, not a planner override"),
    ("eval", ["--planner_cfg", "action_scale=nan"], "'action_scale' is float"),
    ("record", ["--policy", "checkpoint", "--checkpoint", "{missing}"], "Checkpoint file not found"),
    ("train", ["--log_root", "{under_file}"], "is a file, not a folder"),
    ("train", ["--num_envs", "0"], "argument --num_envs: 0 is out of range"),
    ("train", ["--max_iterations", "0"], "argument --max_iterations: 0 is out of range"),
    ("play", ["--steps", "0"], "argument --steps: 0 is out of range"),
    ("train_chunk_policy", ["--dataset", "d.hdf5", "--chunk", "0"], "argument --chunk: 0 is out of range"),
    ("train_chunk_policy", ["--dataset", "d.hdf5", "--val_fraction", "1"], "--val_fraction must lie in [0, 1)"),
    ("train_chunk_policy", ["--dataset", "d.hdf5", "--output", "{under_file}/p.pt"], "is a file, not a folder"),
    ("train_chunk_policy", ["--dataset", "d.hdf5", "--output", "{checkpoint}"], "exists: pass --overwrite to replace it"),
    ("train_chunk_policy", ["--dataset", "d.hdf5", "--camera", "c", "--arch", "transformer"], "MLP chunk head only"),
    ("train_chunk_policy", ["--dataset", "d.hdf5", "--device", "gpu"],
     "argument --device: 'gpu' is not a device this package runs on: give cpu, cuda or cuda:N"),
    ("eval", ["--device", "cuda:7"], "argument --device: 'cuda:7': this machine has"),
    ("record", ["--device", "cpu:7"], "argument --device: 'cpu:7' is not a device this package runs on"),
    ("eval", ["episode_length_s"], "'episode_length_s' is not a cfg override KEY=VALUE"),
    ("merge_shards", ["--datasets", "a.hdf5", "b.hdf5", "--output", "b"], "--output 'b.hdf5' is one of the --datasets"),
    ("merge_shards", ["--results", "a.json", "--runs", "d"], "--results and --runs both give the shards' figures"),
    ("demo_suspend", ["--num_envs", "0"], "argument --num_envs: 0 is out of range"),
    ("view_dataset", ["d.hdf5", "--output", "frames"], "--output 'frames' must end with .gif"),
    ("view_dataset", ["d.hdf5", "--png_steps", "0"], "argument --png_steps: 0 is out of range"),
    ("benchmarks/bench_schedules", ["--chunks", "8", "0"], "argument --chunks: 0 is out of range"),
    ("benchmarks/bench_junk_bc", ["--task", "Isaac-Cartpole"], "--task 'Isaac-Cartpole' has no embedded chunk model"),
]


@pytest.mark.parametrize("script, argv, message", CASES, ids=[f"{c[0]} {' '.join(c[1])}" for c in CASES])
def test_bad_argument_exits_2_with_one_line(script, argv, message, paths, capsys):
    argv = [arg.format(**paths) for arg in argv]
    with pytest.raises(SystemExit) as exit_info:
        _script(script).parse_args(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert message.format(**paths) in err, err
    assert sum("error:" in line for line in err.splitlines()) == 1, err


@pytest.mark.parametrize("script, argv, message", [
    ("eval.py", ["--chunk", "0"], "eval.py: error: argument --chunk: 0 is out of range: must be >= 1"),
    ("train.py", ["--log_root", "{under_file}"], "train.py: error: --log_root"),
])
def test_bad_argument_as_run_by_a_user(script, argv, message, paths):
    run = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", script), *[a.format(**paths) for a in argv]],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and run.stdout == "", run.stdout[-1000:]
    assert "Traceback" not in run.stderr and run.stderr.strip().splitlines()[-1].startswith(message), run.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow  # each case a full eval.py process
@pytest.mark.parametrize("argv, message", [
    (["--remote", "127.0.0.1:{port}"], "eval.py: error: No policy server at 127.0.0.1:{port}"),
    (["--task", "Isaac-Cartpol-Suspendable"],
     "eval.py: error: Unknown task 'Isaac-Cartpol-Suspendable'. Did you mean 'Isaac-Cartpole-Suspendable'?"),
    (["--num_envs", "2", "env.events.nope.params.std=1"], "eval.py: error: Isaac-Cartpole-Suspendable: the cfg overrides"
     " env.events.nope.params.std=1 do not apply (AttributeError: 'EventCfg' object has no attribute 'nope')"),
    (["--num_envs", "2", "env.episode_length_s=abc"], "eval.py: error: Isaac-Cartpole-Suspendable: the cfg override"
     " env.episode_length_s=abc: episode_length_s is a number (int, 5), got 'abc'."),
], ids=["dead server", "unknown task", "override of no cfg field", "override of the wrong type"])
def test_run_time_failure_is_one_stderr_line_and_exit_2(argv, message):
    port = _free_port()
    run = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "eval.py"),
                          *[a.format(port=port) for a in argv]], cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and lines[0].startswith(message.format(port=port)), run.stderr


SCRIPTS = ["audit_suspension", "demo_suspend", "eval", "export_lerobot", "merge_shards", "play", "record", "replay",
           "serve_policy", "train", "train_chunk_policy", "view_dataset"]
LIGHT_BENCHMARKS = ["benchmarks/bench_baselines", "benchmarks/bench_fair_eval", "benchmarks/bench_junk_bc",
                    "benchmarks/bench_lerobot_bc"]
"""Benchmarks that, like the scripts, parse their arguments before they import torch or Isaac Lab."""


def test_every_script_takes_quiet_and_every_task_script_takes_import(monkeypatch, capsys):
    for name in SCRIPTS:
        monkeypatch.setattr(sys, "argv", [f"{name}.py", "--help"])
        script = _script(name)
        with pytest.raises(SystemExit) as exit_info:
            script.parse_args() if hasattr(script, "parse_args") else script.main()
        usage = capsys.readouterr().out
        assert exit_info.value.code == 0 and "--quiet" in usage, (name, usage)
        if "--task TASK" in usage and name != "export_lerobot":  # export_lerobot's --task is the frames' text
            assert "--import MODULE" in usage, (name, usage)


def test_help_shows_every_default(monkeypatch, capsys):
    """Every option of eval.py that has a default states it in ``--help`` (a switch is off; an unset one says what
    that means in its own text)."""
    built = []
    monkeypatch.setattr(cli, "script_parser", lambda doc: built.append(cli_arguments.script_parser(doc)) or built[-1])
    with pytest.raises(SystemExit):
        _script("eval").parse_args(["--help"])
    usage = " ".join(capsys.readouterr().out.split())
    for action in built[0]._actions:
        if action.option_strings and action.nargs != 0 and action.default not in (None, [], argparse.SUPPRESS):
            help_text = " ".join(built[0].formatter_class("eval")._get_help_string(action).split())
            assert "default" in help_text and help_text % vars(action) in usage, action.option_strings
    assert "(default: 16)" in usage and "(default: global_clock)" in usage and "(default: 0.0)" in usage


HEAVY = ("torch", "warp", "newton", "isaaclab", "lerobot", "h5py")
"""Modules that take seconds to import: a script imports them after parsing, so ``--help`` and a malformed argument
answer at once (they took about 8 s while they were imported first)."""
_AS_RUN = """
import os, runpy, sys
path, heavy = sys.argv[1], set(sys.argv[2:])
sys.path.insert(0, os.path.dirname(path))  # as python does for a script: its folder first
for argv in (["--help"], ["--no_such_argument"]):  # as a user runs it: the script's __main__ block
    sys.argv = [path, *argv]
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exit_:
        print("exit", exit_.code)
print("heavy", sorted({name.split(".")[0] for name in sys.modules} & heavy))
"""


@pytest.mark.parametrize("script", [*SCRIPTS, *LIGHT_BENCHMARKS])
def test_help_and_a_malformed_argument_import_nothing_heavy(script):
    run = subprocess.run([sys.executable, "-c", _AS_RUN, os.path.join(ROOT, "scripts", f"{script}.py"), *HEAVY],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.stdout.splitlines()[-3:] == ["exit 0", "exit 2", "heavy []"], run.stdout[-2000:] + run.stderr[-2000:]
    assert "error:" in run.stderr and "Traceback" not in run.stderr, run.stderr[-2000:]


def test_the_names_scripts_list_are_those_of_their_registries():
    from isaaclab_suspend import names
    from isaaclab_suspend.runs import EXPORT_MODES
    from isaaclab_suspend.chunking import AGGREGATORS, SCHEDULES
    from isaaclab_suspend.chunking.sources import SOURCES
    from isaaclab_suspend.serving import WIRES

    for listed, registry in ((names.SCHEDULE_NAMES, SCHEDULES), (names.AGGREGATOR_NAMES, AGGREGATORS),
                             (names.EXPORT_MODE_NAMES, EXPORT_MODES), (names.MODEL_NAMES, SOURCES),
                             (names.WIRE_NAMES, WIRES)):
        assert listed == tuple(sorted(registry)), (listed, sorted(registry))


def test_no_name_of_the_cli_package_is_one_of_its_submodules():
    """A submodule, once imported, would shadow the lazily imported name (``cli.rollout`` the module, not the loop)."""
    import pkgutil

    from isaaclab_suspend import cli

    assert not set(cli.__all__) & {module.name for module in pkgutil.iter_modules(cli.__path__)}


def test_the_flags_of_0_3_still_parse_with_a_deprecation_line(capsys):
    """Each 0.3 model flag still names what it named, and says once what replaces it."""
    args = _script("eval").parse_args(["--policy", "chunk", "--chunk", "8", "--planner_cfg", "action_scale=50"])
    err = capsys.readouterr().err
    assert (args.source.name, args.chunk, args.source.cfg.planner_overrides) == ("embedded", 8, ["action_scale=50"])
    for old, new in (("--policy chunk", "--model embedded"), ("--chunk", "--model.chunk_length"),
                     ("--planner_cfg", "--model.planner_overrides")):
        assert f"warning: {old} is deprecated and goes in 0.5.0: use {new}" in err, err
    args = _script("serve_policy").parse_args(["--protocol", "project", "--expert", "--port", "0"])
    err = capsys.readouterr().err
    assert (args.wire, args.source.name, args.chunk) == ("tcp", "rl_actor", 1)
    assert "--protocol project is deprecated and goes in 0.5.0: use --wire tcp" in err, err
    assert "--expert is deprecated and goes in 0.5.0: use --model rl_actor" in err, err


def test_a_client_field_out_of_range_is_one_line_before_connecting(capsys):
    """``--model.FIELD`` reaches a wire's client cfg: a value out of range is refused before anything connects."""
    for flag, value, message in (("--model.timeout_s", "-1", "TcpChunkModelCfg.timeout_s must be a positive number"),
                                 ("--model.connect_timeout_s", "nan", "connect_timeout_s must be a positive number"),
                                 ("--model.port", "70000", "TcpChunkModelCfg.port must be in 1-65535"),
                                 ("--model.max_chunk_length", "0", "max_chunk_length must be a positive integer")):
        with pytest.raises(SystemExit) as exit_info:
            _script("eval").parse_args(["--model", "tcp", flag, value])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and message in err and "Traceback" not in err, err
