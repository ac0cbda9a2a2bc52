"""The names and limits a user types (schedules, aggregators, export modes, RL libraries, codecs, robots, server
protocols, the token's environment variable), in a module that imports nothing.

Scripts build their parsers from these, so ``--help`` and a malformed argument answer before torch, Warp or Isaac
Lab are imported. Constants are defined here and imported by the modules that use them; the names of a registry
(a dict of classes or functions) are kept beside it and checked against it (``tests/cli/test_arguments.py``).
"""

SCHEDULE_NAMES = ("any", "async", "auto", "global_clock", "hold", "partial_batch", "rtc")
"""The chunk schedules' names, sorted (:data:`~isaaclab_suspend.chunking.SCHEDULES`)."""
AGGREGATOR_NAMES = ("blend", "replace", "soft_mask", "temporal_ensemble")
"""The aggregators' names, sorted (:data:`~isaaclab_suspend.chunking.AGGREGATORS`)."""
EXPORT_MODE_NAMES = ("all", "separate", "succeeded")
"""``record.py --export`` choices, sorted (:data:`~isaaclab_suspend.runs.EXPORT_MODES`)."""
MODEL_NAMES = ("chunk_policy", "embedded", "gr00t", "lerobot", "openpi", "rl_actor", "tcp")
"""The project's chunk-model sources, sorted (``--model``; :data:`~isaaclab_suspend.chunking.sources.SOURCES` holds
these and any registered after)."""
WIRE_NAMES = ("gr00t", "openpi", "tcp")
"""The wires, sorted (``serve_policy.py --wire``; :data:`~isaaclab_suspend.serving.wires.WIRES`)."""
RL_LIBRARIES = ("rsl_rl", "skrl")
"""RL libraries that :func:`isaaclab_suspend.rl.train` supports."""
VCODECS = ("libsvtav1", "h264")
"""Video codecs of ``export_lerobot.py --vcodec`` (LeRobot's default AV1 and h264; both lossy)."""
SO101_ROBOT = "so101_follower"
"""``export_lerobot.py --robot`` value for the SO-101 (LeRobot's robot config type)."""
MAX_REPLAY_ENVS = 16384
"""Most envs a replay builds."""
MAX_SEED = 2**32 - 1
"""Largest seed: Isaac Lab seeds numpy with the env's seed, which takes seeds below 2**32."""
TOKEN_ENV = "ISAACLAB_SUSPEND_POLICY_TOKEN"
"""Environment variable a :class:`~isaaclab_suspend.serving.TcpChunkModel` (and ``serve_policy.py``) reads the
shared token from when its cfg names none."""
DETERMINISM = ("auto", "on", "off")
"""``--deterministic``: Isaac Lab 3.0's reproducible physics (``PhysicsCfg.deterministic``) always, never, or on a
CUDA device only (auto: the CPU's physics is reproducible already)."""

CFG_OVERRIDES_ATTR = "cfg_overrides"
"""Attribute of a cfg made by :func:`~isaaclab_suspend.tasks.env_factory.make_env_cfg` holding the Hydra overrides it was made
with: a recording stores them in its ``env_args`` (same key), and a replay applies them again."""
DEFAULT_TASK = "Isaac-Cartpole-Suspendable"
"""The task of a run when neither it nor its policy names one."""
DEFAULT_CHUNK = 16
"""H of a model that plans any number of actions (the embedded planners) when none is asked for."""
