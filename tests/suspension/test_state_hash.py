"""Episode start hashes (``suspension/state_hash.py``): an env's hash depends on its own rows only, and two
policies whose episodes run for different lengths start every (env, episode) from the same state.

The paired run: on the noisy push-cube (a nudge and a new target every 0.2-0.5 s, observation noise and delays,
all from the per-env random streams) two policies push the cube out of bounds at different speeds, so their
episodes end at different steps (about 28 and 37), and the ledger's ``start_hash`` of every scored
(env, episode) is the same in both runs. Before the streams were keyed by episode, the second episodes' starts
differed: the reset drew at a stream position moved by every step the env had lived through.
"""

import pytest
import torch

from isaaclab_suspend.runs.episode_ledger import EpisodeLedger
from isaaclab_suspend.runs.rollout import rollout
from isaaclab_suspend.suspension.state_hash import StateHash, hash_hex
from isaaclab_suspend.tasks.env_factory import open_env


def _hash(values: dict[str, tuple[torch.Tensor, torch.Tensor | None]], env_ids) -> list[int]:
    hasher = StateHash(3, "cpu")
    for name, (value, row_env) in values.items():
        hasher.add(name, lambda value=value: value, row_env)
    return hasher(torch.tensor(env_ids)).tolist()


def test_an_envs_hash_depends_on_its_own_rows_only():
    """Flat rows grouped by env (Newton's layout, with rows of no env), and rows indexed by env: the hash of an env
    is the same whoever else is hashed with it and whatever the other envs hold; one flipped bit of its own changes
    it, and so does the order of its rows."""
    flat = torch.arange(8, dtype=torch.float32)  # env 0: rows 0, 1; env 1: rows 2, 3, 4; env 2: row 5; 6, 7: none
    row_env = torch.tensor([0, 0, 1, 1, 1, 2, -1, 3])
    command = torch.tensor([[0.5], [0.25], [0.125]])
    values = {"joint_q": (flat, row_env), "command": (command, None)}
    every = _hash(values, [0, 1, 2])
    assert _hash(values, [2, 0]) == [every[2], every[0]]
    assert len(set(every)) == 3
    other = {"joint_q": (flat.clone().index_fill_(0, torch.tensor([2, 6, 7]), 9.0), row_env),
             "command": (command.clone().index_fill_(0, torch.tensor([1]), 9.0), None)}
    assert _hash(other, [0, 2]) == [every[0], every[2]]  # env 1's rows and the rows of no env changed
    flipped = flat.clone()
    flipped.view(torch.int32)[5] ^= 1  # env 2's one row, its lowest bit
    assert _hash({**values, "joint_q": (flipped, row_env)}, [0, 1, 2])[:2] == every[:2]
    assert _hash({**values, "joint_q": (flipped, row_env)}, [2]) != [every[2]]
    swapped = flat.clone()[torch.tensor([1, 0, 2, 3, 4, 5, 6, 7])]  # env 0's two rows in the other order
    assert _hash({**values, "joint_q": (swapped, row_env)}, [0]) != [every[0]]
    assert hash_hex(-1) == "ffffffffffff" and hash_hex(0x0123456789ABCDEF) == "0123456789ab"


class Push:
    """Each env pushes the cart forward with a constant effort ``effort``: the cube leaves the bounds, sooner the
    harder it pushes."""

    def __init__(self, env, effort: float):
        self.action = torch.full((env.num_envs, 1), effort, device=env.device)

    def act(self, obs: dict) -> torch.Tensor:
        return self.action

    def observe(self, dones: torch.Tensor) -> None:
        pass


def _scored(effort: float) -> tuple[dict[tuple[int, int], tuple[str, int]], dict[str, int]]:
    """(env, episode) -> (start hash, length) of the episodes scored in 80 steps, and the terms that drew."""
    with open_env("Isaac-PushCube-Noisy-Suspendable", 2, seed=7, suspend__per_env_random=True) as env:
        obs, _ = env.reset()
        env.random_streams.generator.drawn = {}
        ledger = EpisodeLedger(env, seed=7)
        for _ in rollout(env, Push(env, effort), obs, 80, ledger):
            pass
        records = ledger.records()
        return {(r["env_id"], r["episode"]): (r["start_hash"], r["length"]) for r in records}, \
            env.random_streams.generator.drawn


@pytest.mark.slow
def test_two_policies_start_every_episode_from_the_same_state():
    """Every scored (env, episode) of two policies has the same start hash, though their episodes end at different
    steps and the interval events and command resamplings drew in between; the hashes of different episodes
    differ."""
    hard, drawn = _scored(4.0)
    soft, _ = _scored(2.5)
    paired = sorted(hard.keys() & soft.keys())
    assert len(paired) >= 4 and any(episode >= 1 for _, episode in paired), (hard, soft)
    assert all(hard[key][1] != soft[key][1] for key in paired), (hard, soft)  # lengths differ
    assert drawn.get("event.nudge_cube", 0) > 0 and drawn.get("command.target", 0) > 0, drawn
    assert {key: hard[key][0] for key in paired} == {key: soft[key][0] for key in paired}
    assert len({hard[key][0] for key in paired}) == len(paired)
    assert all(len(h) == 12 and int(h, 16) >= 0 for h, _ in hard.values())
