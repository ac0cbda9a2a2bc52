"""Replay the demos of a dataset in parallel envs, state-exactly, and measure each demo's state error."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from prettytable import PrettyTable

from isaaclab.managers import EventTermCfg

from ..names import MAX_REPLAY_ENVS
from ..tensor_tree import flatten_tree, unflatten_tree
from ..tasks.env_factory import make_env_cfg
from .reader import DatasetError, DatasetReader, Demo, StatePath, available_memory_bytes

if TYPE_CHECKING:
    from isaaclab.scene import InteractiveScene

    from ..envs import SuspendableManagerBasedRLEnv


def make_replay_env_cfg(task: str, num_envs: int, device: str = "cpu", per_env_random: bool = True,
                        overrides: Sequence[str] = (), deterministic: str = "auto", verbose: bool = False):
    """The cfg of ``task`` for replay: no terminations, no rewards, no recorders and no interval events; per-env random streams
    (:attr:`~isaaclab_suspend.suspension.SuspendCfg.per_env_random`) where the task has a suspend cfg, unless not
    ``per_env_random``; ``overrides`` are the Hydra overrides the recording's cfg was made with
    (:attr:`~isaaclab_suspend.datasets.DatasetReader.cfg_overrides`), checked as data: each may only set a number or
    a boolean the task's cfg has, within range (:mod:`isaaclab_suspend.cfg_overrides`; a ``ValueError`` otherwise).
    ``deterministic``: Isaac Lab's reproducible physics, by default on a CUDA device, where a contact task's
    physics differs from run to run without it
    (:func:`~isaaclab_suspend.tasks.env_factory.deterministic_physics`). Parsed quietly unless ``verbose``.

    The replay decides when episodes end (when their actions run out), and interval events would draw new
    random pushes; the recorded ones are re-applied from the dataset's pre-step states instead. Rewards go too:
    the replay compares states, and a reward of a termination term (Isaac Lab's ``is_terminated_term``) cannot be
    built without the terms.
    """
    cfg = make_env_cfg(task, num_envs, device, overrides, overrides_are_data=True, deterministic=deterministic,
                       verbose=verbose)
    if hasattr(cfg, "suspend"):
        cfg.suspend.per_env_random = per_env_random
    cfg.terminations = {}
    cfg.rewards = {}
    cfg.recorders = {}
    for name, term in vars(cfg.events).items():
        if isinstance(term, EventTermCfg) and term.mode == "interval":
            setattr(cfg.events, name, None)
    return cfg


ENV_BYTES = 256 * 1024
"""Memory one replay env is assumed to take beyond the demos' buffers [bytes]: push-cube on the CPU measured
about 56 KiB (749 MiB with 16 envs, 776 MiB with 512), taken with headroom."""


def check_replay_task(reader: DatasetReader, task: str | None) -> None:
    """Check that ``task`` (``None``: the one the file names) is the recorded one and is registered.

    Raises:
        DatasetError: If the file names no task and none is given, or the task is another or unknown.
    """
    import gymnasium as gym

    if not task:
        raise DatasetError(f"'{reader.path}' does not name its task: pass --task.")
    reader.check_task(task)
    if task not in gym.registry:
        known = sorted(k for k in gym.registry if k.endswith("-Suspendable"))
        raise DatasetError(f"'{reader.path}': task '{task}' is not registered (registered: {known}); replay.py"
                           " replays the tasks this package registers.")


def replay_warnings(replayer: DatasetReplayer, reader: DatasetReader, num_envs: int) -> list[str]:
    """What keeps a replay of ``num_envs`` envs from being exact: demos run about another env origin than
    recorded, interval events the recording ran but could not store the effect of."""
    warnings = []
    if replayer.num_at_other_origins:
        warnings.append(f"{replayer.num_at_other_origins} demos run about another env origin than recorded (no env"
                        f" of the {num_envs} has theirs): float32 positions round differently there, which"
                        " contact-rich tasks amplify. Replay with --num_envs equal to the recording's for exactness.")
    if reader.interval_events and any(d.pre_step_states is None for d in replayer.demos.values()):
        warnings.append(f"The recording ran interval events {reader.interval_events} but stored no pre-step states:"
                        " their effect cannot be re-applied and the replay drifts from the first one on.")
    return warnings


def replay_table(results: Sequence[ReplayResult], check_images: bool = False) -> PrettyTable:
    """One row per replayed demo: samples, largest state error and where, env, origin, events (and pixels)."""
    table = PrettyTable(["demo", "samples", "max state error", "worst state", "env", "at recorded origin", "events"])
    for r in results:
        origin = "unknown" if r.at_recorded_origin is None else ("yes" if r.at_recorded_origin else "no")
        table.add_row([r.demo, r.num_samples, f"{r.max_state_error:.3g}", r.worst_state or "-", r.env_id, origin,
                       r.events_applied])
    if check_images:
        table.add_column("max pixel error", [r.max_image_error for r in results])
    table.align["demo"] = table.align["worst state"] = "l"
    return table


def check_replay_fits(num_envs: int, demos: Mapping[str, Demo], source: str) -> None:
    """Raise before the env is built if ``num_envs`` is over :data:`MAX_REPLAY_ENVS` or the replay would not fit
    in the memory the machine has available (the envs and their padded demo buffers).

    Args:
        num_envs: Replay envs.
        demos: The demos to replay.
        source: Where ``num_envs`` came from, for the message (e.g. ``--num_envs``).

    Raises:
        DatasetError: If it does not fit.
    """
    if num_envs > MAX_REPLAY_ENVS:
        raise DatasetError(f"{source} asks for {num_envs} replay envs; at most {MAX_REPLAY_ENVS}: pass --num_envs.")
    first = next(iter(demos.values()), None)
    if first is None:
        return
    max_len = max(d.num_samples for d in demos.values())
    per_step = first.actions.shape[1] * 4 + sum(v[0].numel() * v.element_size() for v in first.states.values())
    needed, available = num_envs * (max_len * per_step + ENV_BYTES), available_memory_bytes()
    if needed > available:
        raise DatasetError(
            f"{source}: {num_envs} replay envs of demos up to {max_len} steps need about {needed / 2**20:.0f} MiB;"
            f" this machine has {available / 2**20:.0f} MiB available: pass a smaller --num_envs."
        )


_WRITERS: dict[str, tuple[str, str]] = {
    "root_pose": ("write_root_pose_to_sim_index", "root_pose"),
    "root_velocity": ("write_root_velocity_to_sim_index", "root_velocity"),
    "joint_position": ("write_joint_position_to_sim_index", "position"),
    "joint_velocity": ("write_joint_velocity_to_sim_index", "velocity"),
}
"""State writer and its argument for each tensor of an articulation's or rigid object's state (the format of
:meth:`InteractiveScene.get_state`)."""


def write_scene_state(
    scene: InteractiveScene, state: dict, env_ids: torch.Tensor, paths: Collection[StatePath] | None = None
) -> None:
    """Write a scene state (relative to the env origins) into envs ``env_ids`` with the assets' state writers.

    Unlike :meth:`InteractiveScene.reset_to` it writes only the state, not the joint targets: writing the values
    just read with these writers leaves the next physics step unchanged, so the replay is state-exact. Rows on
    another device than the scene's (a dataset is read on the CPU) are copied to it first: Warp's state writers
    take a tensor on the scene's device only (a CPU tensor on a CUDA scene breaks the CUDA context).

    Args:
        scene: The scene.
        state: Rows for ``env_ids`` in the format of :meth:`InteractiveScene.get_state`. Shape: (len(env_ids), ...).
        env_ids: The env ids. Shape: (B,).
        paths: The state tensors to write, e.g. ``{("rigid_object", "cube", "root_velocity")}`` (None: all). A
            pose read back after a physics step is the solver's normalised one: writing it when it did not
            change would round the state the next step starts from.

    Raises:
        DatasetError: If an asset of the scene is missing from the state.
        NotImplementedError: If the scene has deformable or cable objects or surface grippers.
    """
    kinds = ("_deformable_objects", "_cable_objects", "_surface_grippers")
    unsupported = [name for kind in kinds for name in getattr(scene, kind, {})]
    if unsupported:
        raise NotImplementedError(
            f"Exact replay writes articulations and rigid objects only; the scene also has {unsupported}."
        )
    for kind, assets in (("articulation", scene.articulations), ("rigid_object", scene.rigid_objects)):
        for name, asset in assets.items():
            rows = state.get(kind, {}).get(name)
            if rows is None:
                raise DatasetError(f"The recorded state has no '{kind}/{name}' (the scene has one).")
            for key, value in rows.items():
                if paths is not None and (kind, name, key) not in paths:
                    continue
                value = value.to(scene.device)
                if key == "root_pose":
                    value = value.clone()
                    value[:, :3] += scene.env_origins[env_ids]
                writer, argument = _WRITERS[key]
                getattr(asset, writer)(**{argument: value}, env_ids=env_ids)


@dataclass
class ReplayResult:
    """The outcome of replaying one demo."""

    demo: str
    """Demo name."""
    num_samples: int
    """Steps replayed."""
    max_state_error: float
    """Largest absolute difference between a replayed and a recorded state value, over all steps and states."""
    worst_state: str
    """State where the largest difference occurred (``rigid_object/cube/root_pose``, ...; '' if none)."""
    env_id: int
    """Replay env that ran it."""
    at_recorded_origin: bool | None
    """Whether it ran at the env origin it was recorded at (None: the dataset does not say)."""
    events_applied: int
    """Steps at which a recorded interval-event state was written before stepping."""
    max_image_error: int | None = None
    """Largest pixel difference between re-rendered and recorded images (None: images not checked)."""


class DatasetReplayer:
    """Replays demos in all envs of ``env`` at once; each env takes the next demo when its demo ends.

    Every demo starts from its exact initial state: the env's own reset of that env (managers, buffers,
    reset events), then the recorded state written with :func:`write_scene_state`. It then steps its
    recorded actions, and after each step the scene state is compared with the recorded one; the largest
    difference is kept per demo. Demos end at different steps: an env whose demo ended and that has no demo
    left is suspended (frozen, it steps nothing), never fed made-up actions. At steps where the dataset shows
    that something other than the actions changed the state (an interval event, see :meth:`Demo.events`),
    the recorded pre-step values of the state tensors that changed are written first. Demos that carry their
    recording env's origin go to the env with that origin where there is one: physics runs in world
    coordinates, and there the replay is bit-exact on a deterministic solver.

    The loop keeps the state errors on the device; the host reads them only at steps where a demo ends,
    which it knows from the demo lengths.

    Args:
        env: A suspendable env made from :func:`make_replay_env_cfg` (no terminations, no interval events).
        reader: The dataset.
        demo_names: Demos to replay (all if None).
        demos: The demos already loaded with :meth:`DatasetReader.load` (e.g. to check them before building the
            env), by name; the others of ``demo_names`` are loaded here.

    Raises:
        ValueError: If the env has terminations.
        DatasetError: If a demo cannot be loaded or does not fit the env (action dim, scene assets, state shapes).
    """

    def __init__(
        self,
        env: SuspendableManagerBasedRLEnv,
        reader: DatasetReader,
        demo_names: Sequence[str] | None = None,
        demos: Mapping[str, Demo] | None = None,
    ):
        if len(env.termination_manager.active_terms) > 0:
            raise ValueError("Replay needs an env without terminations: build its cfg with make_replay_env_cfg().")
        self.env = env
        """The replay env."""
        self.reader = reader
        """The dataset."""
        self.demos: dict[str, Demo] = {}
        """The demos to replay, loaded and checked, in dataset order."""
        self._paths: list[StatePath] = list(dict(flatten_tree(env.scene.get_state(is_relative=True))))
        """Paths of the scene state tensors, in the order of the error columns."""
        self._events_of: dict[str, list[tuple[int, list[StatePath]]]] = {}
        # demos queue at the env they were recorded at; those recorded elsewhere (or unknown) go to any env
        origins = {tuple(o): i for i, o in enumerate(env.scene.env_origins.tolist())}
        self._queues: list[deque[str]] = [deque() for _ in range(env.num_envs)]
        self._shared: deque[str] = deque()
        self._at_origin: dict[str, bool | None] = {}
        for name in reader.demo_names if demo_names is None else demo_names:
            demo = self.demos[name] = demos[name] if demos and name in demos else reader.load(name, "cpu")
            self._check(demo)
            self._events_of[name] = demo.events()
            env_id = None if demo.env_origin is None else origins.get(demo.env_origin)
            self._at_origin[name] = None if demo.env_origin is None else env_id is not None
            (self._shared if env_id is None else self._queues[env_id]).append(name)
        n, device = env.num_envs, env.device
        max_len = max((d.num_samples for d in self.demos.values()), default=0)
        first = next(iter(self.demos.values()), None)
        self._actions = torch.zeros(n, max_len, env.action_manager.total_action_dim, device=device)
        """Actions of each env's demo, padded. Shape: (num_envs, max_len, action_dim)."""
        self._states = {
            p: torch.zeros((n, max_len, *first.states[p].shape[1:]), dtype=first.states[p].dtype, device=device)
            for p in (self._paths if first is not None else [])
        }
        """Recorded states of each env's demo, padded, by path. Shape of each: (num_envs, max_len, ...)."""
        self._error = torch.zeros(n, len(self._paths), device=device)
        """Largest error of each env's demo so far, per state path. Shape: (num_envs, num_paths)."""
        self._cursor = torch.zeros(n, dtype=torch.long, device=device)
        """Step of each env's demo. Shape: (num_envs,)."""
        self._active = torch.zeros(n, dtype=torch.bool, device=device)
        """Envs replaying a demo. Shape: (num_envs,)."""
        self._slot: list[str | None] = [None] * n
        """Demo of each env (host), None once it has none left."""
        self._slot_start = [0] * n
        """Replay step at which each env's demo started (host)."""
        self._events: dict[int, list[tuple[int, list[StatePath]]]] = {}
        """Replay step -> (env, state paths) to write before that step."""
        self._ran = False

    @property
    def num_at_other_origins(self) -> int:
        """Demos that run about another env origin than they were recorded at (float32 rounding then differs)."""
        return sum(1 for at_origin in self._at_origin.values() if at_origin is False)

    def run(self, on_done: Callable[[ReplayResult], None] | None = None) -> list[ReplayResult]:
        """Replay every demo; returns the results in demo order and calls ``on_done`` as each demo ends.

        Raises:
            RuntimeError: If called twice (the demo queues are consumed: make a new replayer).
        """
        if self._ran:
            raise RuntimeError("A DatasetReplayer replays its demos once: make a new one to replay them again.")
        self._ran = True
        if not self.demos:
            return []
        env, n = self.env, self.env.num_envs
        env.reset()
        self._start(list(range(n)), step=0)
        rows = torch.arange(n, device=env.device)
        results: dict[str, ReplayResult] = {}
        step = 0
        while any(name is not None for name in self._slot):
            for i, paths in self._events.pop(step, []):
                t = step - self._slot_start[i]
                pre = {p: v[t : t + 1] for p, v in self.demos[self._slot[i]].pre_step_states.items()}
                write_scene_state(env.scene, unflatten_tree(pre), torch.tensor([i], device=env.device), paths)
            obs = env.step(self._actions[rows, self._cursor])[0]
            state = dict(flatten_tree(env.scene.get_state(is_relative=True)))
            for k, path in enumerate(self._paths):
                diff = (state[path] - self._states[path][rows, self._cursor]).abs().flatten(1).amax(dim=1)
                torch.maximum(self._error[:, k], torch.where(self._active, diff, 0.0), out=self._error[:, k])
            self._cursor += self._active
            step += 1
            self._after_step(obs, step)
            ended = [
                i for i, name in enumerate(self._slot)
                if name is not None and step - self._slot_start[i] == self.demos[name].num_samples
            ]
            if ended:
                for i, errors in zip(ended, self._error[ended].cpu()):
                    result = results[self._slot[i]] = self._result(i, errors)
                    if on_done is not None:
                        on_done(result)
                self._start(ended, step)
        return [results[name] for name in self.demos]

    """
    Internals.
    """

    def _after_step(self, obs: dict, step: int) -> None:
        """Called after each replay step with the step's observations and the number of steps done."""

    def _start(self, env_ids: list[int], step: int) -> None:
        """Start the next demo in each env of ``env_ids`` at replay step ``step``; suspend those left without one."""
        loaded, idle = [], []
        for i in env_ids:
            queue = self._queues[i] or self._shared
            name = self._slot[i] = queue.popleft() if queue else None
            if name is None:
                idle.append(i)
                continue
            demo = self.demos[name]
            self._actions[i, : demo.num_samples] = demo.actions
            for path, buffer in self._states.items():
                buffer[i, : demo.num_samples] = demo.states[path]
            self._slot_start[i] = step
            for t, paths in self._events_of[name]:
                self._events.setdefault(step + t, []).append((i, paths))
            loaded.append(i)
        ids = torch.tensor(env_ids, device=self.env.device)
        self._cursor[ids] = 0
        self._error[ids] = 0.0
        self._active[ids] = torch.tensor([self._slot[i] is not None for i in env_ids], device=self.env.device)
        if loaded:
            loaded_ids = torch.tensor(loaded, device=self.env.device)
            # the env's own reset of these envs, as in its step (managers, buffers, reset events; resumes them) ...
            self.env._reset_idx(loaded_ids)
            # ... then the recorded initial state, written exactly
            initial = _concat_rows([self.demos[self._slot[i]].initial_state for i in loaded])
            write_scene_state(self.env.scene, initial, loaded_ids)
        if idle:
            self.env.suspend_envs(idle)

    def _result(self, env_id: int, errors: torch.Tensor) -> ReplayResult:
        name = self._slot[env_id]
        k = int(errors.argmax())
        return ReplayResult(
            demo=name,
            num_samples=self.demos[name].num_samples,
            max_state_error=float(errors[k]),
            worst_state="/".join(self._paths[k]) if errors[k] > 0 else "",
            env_id=env_id,
            at_recorded_origin=self._at_origin[name],
            events_applied=len(self._events_of[name]),
        )

    def _check(self, demo: Demo) -> None:
        """Raise if the demo's actions or states do not fit the env."""
        where = f"'{self.reader.path}', demo '{demo.name}'"
        action_dim = self.env.action_manager.total_action_dim
        if demo.actions.shape[1] != action_dim:
            raise DatasetError(f"{where}: actions have dim {demo.actions.shape[1]}, the env takes {action_dim}.")
        scene = {path: value.shape[1:] for path, value in flatten_tree(self.env.scene.get_state(is_relative=True))}
        initial = dict(flatten_tree(demo.initial_state))
        for key, tree, complete in (("states", demo.states, True), ("initial_state", initial, True),
                                    ("pre_step_states", demo.pre_step_states or {}, False)):
            for path in (scene if complete else tree).keys() | tree.keys():
                recorded = tree.get(path)
                if path not in scene or recorded is None or recorded.shape[1:] != scene[path]:
                    should = f"should have {tuple(scene[path])} values per sample" if path in scene else "is not"
                    got = "nothing" if recorded is None else f"shape {tuple(recorded.shape)}"
                    raise DatasetError(
                        f"{where}: '{key}/{'/'.join(path)}' {should} in the env's scene, got {got}: was it recorded"
                        " on another scene?"
                    )


def _concat_rows(states: list[dict]) -> dict:
    """Concatenate scene states of leading dim 1 into one state with a row per state."""
    if isinstance(states[0], dict):
        return {k: _concat_rows([s[k] for s in states]) for k in states[0]}
    return torch.cat(states)
