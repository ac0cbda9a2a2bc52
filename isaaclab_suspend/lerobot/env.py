"""One suspendable Isaac Lab env with B envs behind the vector-env interface of LeRobot's ``lerobot-eval``.

``lerobot-eval`` runs a batch of B episodes per rollout: it resets the vector env with a seed per env, calls the
policy on all B observations every step, steps all B envs and stops once every env has ended its first episode;
it then scores each env's first episode (success, rewards) and writes videos of the first ten. Behind this
interface the B envs are one :class:`~isaaclab_suspend.envs.SuspendableManagerBasedRLEnv` (one process, one
batched physics step), and an env whose episode ended is suspended at once: frozen exactly until the next rollout,
neither stepped on nor replayed, its reward 0 and no further done while the others finish.

The observations and actions are mapped by the sidecar of the export the policy was trained on
(:class:`~.layout.ExportSidecar`), as for ``eval.py --checkpoint``: ``agent_pos`` (LeRobot's
``observation.state``) is the ``policy`` group padded as exported, ``pixels/<cam>`` the uint8 frames of the
``images`` group, ``environment_state`` the exported ``policy`` terms (LeRobot's
``observation.environment_state``), and the policy's ``action`` rows lose their pad before they reach the env.

Seeds: a rollout resets the Isaac Lab env with the first of its B seeds (``start_seed + batch index x B``), which
keys its per-env random streams (on, as in ``eval.py``): each env's episode is drawn from (seed, env, episode). A
rollout is therefore ``eval.py --seed <that seed> --num_envs B --episodes_per_env 1 --schedule global_clock`` with
H = the policy's ``n_action_steps``: the same episodes.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Sequence

import gymnasium as gym
import numpy as np
import pxr.UsdUtils  # noqa: F401  (Isaac Lab's SimulationContext imports it late; in lerobot-eval that import fails)
import torch

from ..envs import SuspendableManagerBasedRLEnv
from ..chunking.chunking_policy import DEFAULT_ACTION_BOUND, check_action_values
from ..solver_notices import say_linesearch_notice_once, without_linesearch_notice
from ..tasks.cameras import add_viewer_camera
from ..tasks.env_factory import make_env_cfg, open_env
from .layout import ENV_STATE_FEATURE, STATE_FEATURE, STATE_GROUP, ExportSidecar

VIDEO_CAMERA = "lerobot_video_camera"
"""Scene entity of the camera added for LeRobot's videos to a task without an ``images`` group."""
MAX_VIDEO_SIZE = 1024
"""Largest side of the added video camera [px]: its frames are rendered in every env (B x 1024 x 1024 x 3 bytes)."""


class LeRobotVectorEnv(gym.vector.VectorEnv):
    """B envs of one suspendable Isaac Lab env as the gym vector env ``lerobot-eval`` steps.

    Args:
        task: A registered gym id of a suspendable task.
        num_envs: B, LeRobot's ``eval.batch_size``.
        sidecar: The export the policy was trained on (what ``agent_pos``, ``pixels`` and ``action`` are).
        device: Isaac Lab's simulation device.
        video_camera: The ``images`` camera LeRobot's videos show ('' : the first; a task without cameras gets
            one posed as its ``viewer`` cfg, of ``video_size`` pixels).
        video_size: Height and width of the added video camera [px], 1 to :data:`MAX_VIDEO_SIZE`.
        check: Raises ValueError if the env does not fit the policy (called once it is built; it is then closed).
        action_bound: Largest absolute action :meth:`step` takes (None: any finite one), as
            :class:`~isaaclab_suspend.chunking.ActionChunkingPolicyCfg` bounds a chunk.
        refuse: Makes the exception :meth:`step` raises of the ValueError of actions it refuses (``lerobot-eval``'s
            plugin: one line and exit status 2); None: the ValueError itself.

    Raises:
        ValueError: If the task is unknown, is not suspendable, lacks the video camera, or ``video_size`` is out of
            range.
    """

    def __init__(self, task: str, num_envs: int, sidecar: ExportSidecar, device: str = "cpu",
                 video_camera: str = "", video_size: int = 128,
                 check: Callable[[SuspendableManagerBasedRLEnv], None] | None = None,
                 action_bound: float | None = DEFAULT_ACTION_BOUND,
                 refuse: Callable[[ValueError], BaseException] | None = None):
        self.sidecar = sidecar
        if type(video_size) is not int or not 1 <= video_size <= MAX_VIDEO_SIZE:
            raise ValueError(f"--env.video_size must be an integer from 1 to {MAX_VIDEO_SIZE} [px], got"
                             f" {video_size!r:.40}.")
        self.action_bound = action_bound
        """Largest absolute action :meth:`step` takes (None: any finite one)."""
        self._refuse = refuse
        cfg = make_env_cfg(task, num_envs, device)
        cfg.suspend.per_env_random = True  # eval.py's default: each env's episodes drawn from (seed, env, episode)
        cameras = _image_terms(cfg)
        if video_camera and video_camera not in cameras:
            raise ValueError(f"--env.video_camera '{video_camera}' is not a camera of {task}'s images group"
                             f" ({cameras or 'it has none'}).")
        self.video_camera = video_camera or (cameras[0] if cameras else "")
        """The ``images`` term LeRobot's videos show ('': the added :data:`VIDEO_CAMERA`)."""
        if not self.video_camera:
            add_viewer_camera(cfg, VIDEO_CAMERA, "LeRobotVideoCamera", video_size)
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(without_linesearch_notice())  # said once at close: lerobot-eval's console
        with _logging_kept():  # Isaac Lab's launch sets the root logger to WARNING: LeRobot logs its metrics at INFO
            self.env: SuspendableManagerBasedRLEnv = self._stack.enter_context(open_env(task, cfg=cfg))
        """The Isaac Lab env."""
        try:
            if not isinstance(self.env, SuspendableManagerBasedRLEnv) or self.env.suspension_manager is None:
                raise ValueError(f"'{task}' is not a suspendable task with suspension enabled: choose a -Suspendable"
                                 " task.")
            if check is not None:
                check(self.env)
        except ValueError:
            self.close()
            raise
        self.num_envs = num_envs
        self.task = task
        """The gym id (LeRobot reads ``task`` and ``task_description`` from every env)."""
        self.task_description = sidecar.task
        """The text the policy was trained with."""
        self._max_episode_steps = int(self.env.max_episode_length)
        """Steps of a full episode: LeRobot's bound on a rollout."""
        self._has_success = "success" in self.env.termination_manager.active_terms
        step_dt = self.env.step_dt
        self.metadata = {"render_fps": round(1.0 / step_dt), "autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
        self._set_spaces()
        self._obs: dict | None = None

    def _set_spaces(self) -> None:
        """Gym spaces of one env and of the batch: ``agent_pos``, ``pixels/<cam>``, ``action`` (padded widths)."""
        obs = self.env.observation_manager
        single = {"agent_pos": gym.spaces.Box(-np.inf, np.inf, (self.sidecar.state.padded_to,), np.float32)}
        if self.sidecar.environment_state is not None:
            single["environment_state"] = gym.spaces.Box(
                -np.inf, np.inf, (self.sidecar.environment_state.padded_to,), np.float32)
        if self.sidecar.cameras:
            terms = obs.active_terms["images"]
            single["pixels"] = gym.spaces.Dict({
                cam: gym.spaces.Box(0, 255, tuple(obs.group_obs_term_dim["images"][terms.index(cam)]), np.uint8)
                for cam in self.sidecar.cameras})
        self.single_observation_space = gym.spaces.Dict(single)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, self.num_envs)
        self.single_action_space = gym.spaces.Box(-np.inf, np.inf, (self.sidecar.action.padded_to,), np.float32)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)

    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Start a rollout: every env resets (suspended ones resume) with the first of ``seed``."""
        if isinstance(seed, Sequence):
            seed = seed[0] if len(seed) else None
        obs, _ = self.env.reset(seed=seed)
        self._obs = obs
        return self._lerobot_obs(obs), {}

    def step(self, actions: np.ndarray) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Step the B envs with LeRobot's ``action`` rows (B, padded width); the envs whose episode ends are
        suspended. ``info["is_success"]`` (B,) says which ended in success on this step.

        Raises:
            ValueError: If the rows are not of the action space's shape, or hold a NaN, an inf or a value beyond
                :attr:`action_bound` (checked on the host, where LeRobot hands them; or what ``refuse`` makes of it).
        """
        actions = torch.as_tensor(np.asarray(actions), dtype=torch.float32)
        try:
            if tuple(actions.shape) != self.action_space.shape:
                raise ValueError(f"Actions of shape {tuple(actions.shape)}, the envs take {self.action_space.shape}.")
            check_action_values(actions, self.action_bound, torch.arange(self.num_envs),
                                "the policy does not act in this env (check its checkpoint and the export it was"
                                " trained on)")
        except ValueError as err:
            if self._refuse is None:
                raise
            raise self._refuse(err) from None
        actions = actions.to(self.env.device)
        obs, reward, terminated, truncated, _ = self.env.step(self.sidecar.env_action(actions))
        ended = terminated | truncated
        success = ended & self.env.termination_manager.get_term("success") if self._has_success else ended & False
        self.env.suspend_envs(ended)  # reset by Isaac Lab already: frozen at the start of an episode it never runs
        self._obs = obs
        return (self._lerobot_obs(obs), _host(reward), _host(terminated), _host(truncated),
                {"is_success": _host(success)})

    def render(self) -> tuple[np.ndarray, ...]:
        """Each env's current frame of the video camera, uint8 (H, W, 3)."""
        if self.video_camera:
            frames = self._obs["images"][self.video_camera]
        else:
            frames = self.env.scene[VIDEO_CAMERA].data.output["rgb"][..., :3]
        return tuple(_host(frames))

    def call(self, name: str, *args, **kwargs) -> tuple:
        """``name`` of every env (called with the arguments if it is a method), as gym's vector envs answer."""
        if name == "render":
            return self.render()
        value = getattr(self, name)
        if callable(value):
            value = value(*args, **kwargs)
        return tuple(value for _ in range(self.num_envs))

    def get_attr(self, name: str) -> tuple:
        """The attribute ``name`` of every env."""
        return tuple(getattr(self, name) for _ in range(self.num_envs))

    @classmethod
    def from_checkpoint(cls, task: str, num_envs: int, policy_path: str, **kwargs) -> LeRobotVectorEnv:
        """The vector env for the LeRobot ``pretrained_model`` at ``policy_path``: mapped by the sidecar of its
        export, the checkpoint refused or accepted as ``eval.py --checkpoint`` does (the same
        :func:`~.policy.check_checkpoint`: files, config, sizes, sidecar against the policy's features),
        checked to fit the policy as ``eval.py --checkpoint`` checks (task, widths, cameras, frame size).

        Raises:
            ValueError: If the checkpoint or its sidecar is refused, or the env does not fit the policy.
        """
        import lerobot.policies  # noqa: F401  (registers the policy config types)

        from .policy import check_checkpoint, check_env_fits, is_lerobot_checkpoint

        if not is_lerobot_checkpoint(policy_path):
            raise ValueError(f"--policy.path '{policy_path}' is not a LeRobot pretrained_model directory (it needs"
                             " config.json and model.safetensors).")
        config, sidecar = check_checkpoint(os.path.abspath(policy_path))
        return cls(task, num_envs, sidecar, check=lambda env: check_env_fits(policy_path, sidecar, config, env),
                   **kwargs)

    def lerobot_features(self) -> tuple[dict, dict]:
        """LeRobot's ``features`` and ``features_map`` of the env cfg: ``action``, ``agent_pos`` and ``pixels/<cam>``
        with their shapes, and the policy feature each maps to."""
        from lerobot.configs import FeatureType, PolicyFeature

        features = {"action": PolicyFeature(FeatureType.ACTION, self.single_action_space.shape),
                    "agent_pos": PolicyFeature(FeatureType.STATE, self.single_observation_space["agent_pos"].shape)}
        names = {"action": "action", "agent_pos": "observation.state"}
        if "environment_state" in self.single_observation_space.spaces:
            shape = self.single_observation_space["environment_state"].shape
            features["environment_state"] = PolicyFeature(FeatureType.ENV, shape)
            names["environment_state"] = ENV_STATE_FEATURE
        for cam in self.sidecar.cameras:
            shape = self.single_observation_space["pixels"][cam].shape
            features[f"pixels/{cam}"] = PolicyFeature(FeatureType.VISUAL, shape)
            names[f"pixels/{cam}"] = f"observation.images.{cam}"
        return features, names

    def close_extras(self, **kwargs) -> None:
        """Close the Isaac Lab env (gym's ``close`` calls this once)."""
        say_linesearch_notice_once()
        self._stack.close()

    def _lerobot_obs(self, obs: dict) -> dict:
        """LeRobot's raw observation: ``agent_pos`` (B, padded state), ``environment_state`` (B, padded width) if
        exported and ``pixels`` {cam: (B, H, W, 3) uint8}, host copies (the env's buffers are overwritten by the next
        step)."""
        vectors = self.sidecar.lerobot_observation(obs[STATE_GROUP])
        out = {"agent_pos": _host(vectors[STATE_FEATURE])}
        if ENV_STATE_FEATURE in vectors:
            out["environment_state"] = _host(vectors[ENV_STATE_FEATURE])
        if self.sidecar.cameras:
            out["pixels"] = {cam: _host(obs["images"][cam]) for cam in self.sidecar.cameras}
        return out


@contextlib.contextmanager
def _logging_kept():
    """The root logger's level and its handlers' levels as they were before the block."""
    root = logging.getLogger()
    levels = root.level, [(handler, handler.level) for handler in root.handlers]
    try:
        yield
    finally:
        root.setLevel(levels[0])
        for handler, level in levels[1]:
            handler.setLevel(level)


def _host(tensor: torch.Tensor) -> np.ndarray:
    """A host copy of ``tensor`` as numpy (a copy on the CPU too: the caller may keep it)."""
    return tensor.detach().to("cpu", copy=True).numpy()


def _image_terms(cfg) -> list[str]:
    """Terms of the cfg's ``images`` observation group."""
    group = getattr(cfg.observations, "images", None)
    if group is None:
        return []
    from isaaclab.managers import ObservationTermCfg

    return [name for name, value in group.__dict__.items() if isinstance(value, ObservationTermCfg)]
