"""``--gr00t_keys`` and ``--openpi_keys`` that name no tensor of the env's observation (an unknown group, or a
term of a concatenated group) end eval.py with one line and exit status 2 before the first model call, not
with a traceback from inside it."""

import pytest

from helpers import load_script

from isaaclab_suspend import cli
from isaaclab_suspend.tasks.embedded import make_default_model
from isaaclab_suspend.serving import (
    Gr00tPolicyServer,
    Gr00tPolicyServerCfg,
    OpenpiPolicyServer,
    OpenpiPolicyServerCfg,
)

pytestmark = pytest.mark.slow  # eval.py against served models, in processes

TASK = "Isaac-Cartpole-Suspendable"
H = 8


def _eval(argv: list[str]) -> int:
    """eval.py's ``__main__`` in this process."""
    module = load_script("eval")
    return cli.run(module.evaluate, module.parse_args(argv))


@pytest.mark.parametrize("protocol", ["gr00t", "openpi"])
def test_keys_naming_no_observation_tensor_are_one_line(protocol, capsys):
    model = make_default_model(TASK, H)
    if protocol == "gr00t":
        server = Gr00tPolicyServer(model, Gr00tPolicyServerCfg(port=0, chunk_length=H, task=TASK,
                                                               keys={"state.cartpole": "policy"}))
        key, extra = "state.cartpole", []
    else:
        server = OpenpiPolicyServer(model, OpenpiPolicyServerCfg(port=0, chunk_length=H, action_dim=1, task=TASK,
                                                                 keys={"observation/state": "policy"}))
        key, extra = "observation/state", ["--model.chunk_length", str(H)]
    with server:
        base = ["--remote", f"{protocol}://127.0.0.1:{server.address[1]}", *extra, "--num_envs", "2", "--steps", "4",
                "--timeline", "", "--quiet"]
        for path in ("policy/joint_pos_rel", "nope"):
            status = _eval([*base, "--model.keys", f"{key}={path}"])
            err = capsys.readouterr().err
            assert status == 2 and "Traceback" not in err, err
            (line,) = err.strip().splitlines()[-1:]
            assert (f": error: --model.keys maps '{key}' to '{path}', not an observation of the env: pass one"
                    " of ['policy']") in line, line
        assert _eval([*base, "--model.keys", f"{key}=policy"]) == 0  # the tensor the env has: it runs
