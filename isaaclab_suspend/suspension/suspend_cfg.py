"""Configuration of per-env suspension: the cfg the :class:`~isaaclab_suspend.suspension.SuspensionManager` reads."""

from __future__ import annotations

from isaaclab.utils import configclass


@configclass
class SuspendCfg:
    """Settings of a suspendable env: per-env suspension, per-env random streams and the CPU step's threads.

    The cfg of the :class:`~isaaclab_suspend.suspension.SuspensionManager` (the ``suspend`` field of a suspendable
    env's cfg). With :attr:`enabled` False the env behaves bit-identically to :class:`~isaaclab.envs.ManagerBasedRLEnv`
    and :meth:`~isaaclab_suspend.envs.SuspendableManagerBasedRLEnv.suspend_envs` raises.
    """

    enabled: bool = False
    """Whether envs can be suspended. Defaults to False (stock behaviour)."""

    freeze_solver_state: bool = True
    """Whether to also freeze the physics solver's persistent per-world state (MuJoCo-Warp's
    acceleration warm start and actuator activations), so that a resumed env continues bit-exactly
    as if it had never been suspended. Defaults to True."""

    record_active_only: bool = True
    """Whether the recorder manager records only active envs (no samples while suspended). Defaults to True."""

    per_env_random: bool = False
    """Whether each env draws its random numbers (observation noise and delays, events, command resampling) from
    its own counter-based stream instead of torch's shared generator
    (:class:`~isaaclab_suspend.suspension.RandomStreams`): what env i draws then depends only on the seed, i, the
    index of its episode, its active step in the episode and the drawing term, so a resumed env draws what it would
    have drawn, the others' draws do not depend on it, and its k-th episode starts from the same state whatever
    the policy. Works with suspension disabled too. Defaults to False (Isaac Lab's
    generator, bit for bit); the evaluation, recording, replay and audit scripts turn it on."""

    cpu_step_threads: int | None = 1
    """Torch's intra-op threads while the env steps, resets, suspends or resumes envs on a CPU device, the process's
    own setting restored after (so a model called between steps keeps it); None leaves torch's setting. A step on the CPU is hundreds of
    small tensor ops and Warp launches, and torch's thread pool only adds wake-ups to them, on a busy machine
    waits for a descheduled thread: push-cube camera, 16 envs, ran its eval loop at 0.53 of the task without a
    camera per CPU second with 2 threads and at 0.90 with 1, one other job on 2 cores (docs/results.rst). Defaults to 1. No effect on a
    CUDA device."""

    unfrozen_parts: list[str] = []
    """Parts of the env whose per-env state is NOT frozen, by name (``actions``, ``physics``, ``actuators``,
    ``sensors``, ``terminations``, ``rewards``, ``commands``, ``events``, ``observations``). For diagnosis only:
    a suspended env then drifts through that part, which ``scripts/audit_suspension.py`` reports. Defaults to
    none."""


def check_suspend_cfg(cfg: SuspendCfg) -> None:
    """Refuse values of ``cfg`` the env cannot run with, before it is built.

    Raises:
        ValueError: Naming the field, its value and what to give.
    """
    threads = cfg.cpu_step_threads
    if threads is not None and (type(threads) is not int or threads < 1):
        raise ValueError(f"suspend.cpu_step_threads is {threads!r}: give a positive number of threads, or None to "
                         "leave torch's setting while the env steps on the CPU.")
