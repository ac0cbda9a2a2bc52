"""LeRobot env plugin: ``lerobot-eval --env.type=isaaclab_suspend --env.task=<a -Suspendable task>``.

LeRobot imports this package (its distribution name starts with ``lerobot_env_``), which registers the env type.
The B envs of ``--eval.batch_size`` are one Isaac Lab env in the ``lerobot-eval`` process, each suspended once its
episode ends (:class:`isaaclab_suspend.lerobot.env.LeRobotVectorEnv`). Isaac Lab is imported only when
the env is made.

LeRobot imports it in ``lerobot-train`` too, before it reads its config: where torchcodec cannot load its FFmpeg
libraries, LeRobot logs the loader's error (a traceback per FFmpeg version tried) each time it picks a video
decoder, then decodes with PyAV. That is said once, in one line (:class:`OneLineVideoDecoderFallback`).
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass

from lerobot.configs import parser
from lerobot.envs.configs import EnvConfig

ENV_TYPE = "isaaclab_suspend"


class OneLineVideoDecoderFallback(logging.Filter):
    """Turns LeRobot's warning that torchcodec cannot be loaded into one line, said once per process."""

    SAID = "torchcodec cannot load its FFmpeg libraries here (harmless): LeRobot decodes videos with PyAV."

    def __init__(self):
        super().__init__()
        self.said = False

    def filter(self, record: logging.LogRecord) -> bool:
        if "'torchcodec' is installed but cannot be loaded" not in str(record.msg):
            return True
        if self.said:
            return False
        self.said, record.msg, record.args = True, self.SAID, ()
        return True


logging.getLogger("lerobot.utils.import_utils").addFilter(OneLineVideoDecoderFallback())


def refuse(err: BaseException) -> SystemExit:
    """Say ``err`` in one line on stderr; returns the ``SystemExit(2)`` to raise (``lerobot-eval`` closes the env
    on its way out)."""
    print(f"lerobot-eval: error: --env.type={ENV_TYPE}: {err}", file=sys.stderr)
    return SystemExit(2)


@EnvConfig.register_subclass(ENV_TYPE)
@dataclass
class IsaacLabSuspendEnv(EnvConfig):
    """A suspendable Isaac Lab task for ``lerobot-eval``; the policy's export says how observations and actions map."""

    task: str | None = None
    """A registered gym id of a suspendable task (``Isaac-PushCube-Camera-Suspendable``, ...)."""
    device: str = "cpu"
    """Isaac Lab's simulation device (one this machine has: ``cpu``, ``cuda``, ``cuda:1``)."""
    policy_path: str = ""
    """The ``pretrained_model`` whose export sidecar maps the features ('': ``--policy.path``)."""
    video_camera: str = ""
    """The ``images`` camera the videos show ('': the first; a task without cameras gets one at its viewer pose)."""
    video_size: int = 128
    """Frame size of the camera added for videos to a task without cameras [px], 1 to 1024."""

    @property
    def gym_kwargs(self) -> dict:
        return {}

    def create_envs(self, n_envs: int, use_async_envs: bool = False) -> dict:
        """``{type: {0: vector env}}``: one Isaac Lab env with ``n_envs`` envs (``use_async_envs`` does not apply:
        they step together in this process). A bad setting, task or policy (the checkpoint checks of ``eval.py
        --checkpoint``), or actions the env refuses while stepping (NaN, inf, beyond its bound), end the command
        with one line, exit status 2."""
        from isaaclab_suspend.devices import check_device
        from isaaclab_suspend.lerobot.env import LeRobotVectorEnv

        policy_path = self.policy_path or parser.get_path_arg("policy") or ""
        try:
            if not self.task:
                raise ValueError("give --env.task=<a -Suspendable task>")
            try:
                check_device(self.device)
            except ValueError as err:
                raise ValueError(f"--env.device {err}") from None
            env = LeRobotVectorEnv.from_checkpoint(self.task, n_envs, policy_path, device=self.device,
                                                   video_camera=self.video_camera, video_size=self.video_size,
                                                   refuse=refuse)
        except (ValueError, OSError) as err:
            raise refuse(err) from None
        self.features, self.features_map = env.lerobot_features()
        self.fps = env.metadata["render_fps"]
        return {ENV_TYPE: {0: env}}
