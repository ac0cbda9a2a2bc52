"""A LeRobot ``pretrained_model`` directory as a chunk model: ``model(obs_rows, env_ids) -> (B, H, A)``.

``lerobot-train`` writes ``<output_dir>/checkpoints/<step>/pretrained_model`` (``config.json``,
``model.safetensors``, the pre- and post-processors with their statistics, ``train_config.json``). The policy is
loaded with LeRobot's factory (``get_policy_class(type).from_pretrained`` and ``make_pre_post_processors``) and
called once per schedule call on the B served envs with ``predict_action_chunk``; H is its ``n_action_steps``.
The env's observations become LeRobot's batch through the sidecar of the export it was trained on
(:mod:`.layout`), found beside the checkpoint or at the ``dataset.root`` of ``train_config.json``.
A policy that takes past observations (``n_obs_steps`` > 1, Diffusion) gets them from per-env rings fed every
step through the chunk-model hook ``observe_step``, as LeRobot's rollout loop feeds its queues every step.

Only JSON and safetensors are read, and nothing is downloaded: a processor step that names a class to import
(rather than one of LeRobot's registered steps) is refused, so nothing in the directory decides what code runs;
a config naming pretrained backbone weights (torchvision would download a pickled .pth) is built without them
(the checkpoint's own weights replace them); every file the checkpoint names (config, processors and their
``state_file``, ``train_config.json``, the sidecar) must resolve, symlinks followed, to a regular file inside
the directory, and the JSON ones may not exceed :data:`MAX_JSON_BYTES`; the sizes a config declares are
checked against the ``model.safetensors`` header on a network built on the meta device (no memory) before the
real one is built; a config field this LeRobot does not know, or of the wrong type, is one error naming it.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from isaaclab.utils import configclass

from ..chunking.observation_history import MAX_STEPS, ObservationHistories
from ..chunking.sources import ChunkModelCfg, ChunkModelOpener, register_source
from ..tensor_tree import flatten_names, unflatten_names
from . import so101
from .layout import (
    ACTION_FEATURE,
    ENV_STATE_FEATURE,
    IMAGE_PREFIX,
    SIDECAR_PATH,
    STATE_FEATURE,
    STATE_GROUP,
    ExportSidecar,
)

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv

REQUIRED_FILES = ("config.json", "model.safetensors")
"""Files that make a directory a LeRobot ``pretrained_model``."""
PROCESSOR_FILES = ("policy_preprocessor.json", "policy_postprocessor.json")
STATEFUL_TYPES = ("smolvla", "pi0", "pi05", "pi0_fast")
"""Policy types whose ``predict_action_chunk`` changes internal state: called for one env at a time."""
HISTORY_KEY = "lerobot_history"
"""Entry that :meth:`LeRobotChunkModel.observe_step` adds to the observation: the policy's observations
(``policy`` and ``images/<camera>``) of the last ``n_obs_steps`` steps, each (N, n_obs_steps, ...)."""


MAX_JSON_BYTES = 16 * 2**20
"""Largest JSON file of a checkpoint read (config, processors, train config, sidecar): a few kB in practice."""
MAX_STATE_BYTES = 256 * 2**20
"""Largest processor state file (normalisation statistics: a few kB in practice)."""
UNCHECKED_INTS = 4096
"""Integers of a config up to this are not checked against the weights' size (see ``_check_declared_sizes``)."""


def is_lerobot_checkpoint(path: str) -> bool:
    """Whether ``path`` is a directory holding a LeRobot ``pretrained_model`` (config.json and model.safetensors,
    whatever they are: the loader checks them)."""
    return os.path.isdir(path) and all(os.path.lexists(os.path.join(path, name)) for name in REQUIRED_FILES)


class LeRobotChunkModel:
    """A LeRobot policy planning H = ``n_action_steps`` actions per call for the envs it is given.

    Observation history (``n_obs_steps`` > 1, e.g. Diffusion) is kept by :class:`ObservationHistories` on the
    env device, fed every step by the policy's ``observe_step`` hook: a ring advances on each step its env moved,
    stands still while the env is suspended, and is filled with the first observation of each episode. Stateful
    policies (:data:`STATEFUL_TYPES`) are called for one env at a time.

    Args:
        path: The ``pretrained_model`` directory.
        device: Device to run the policy on.

    Raises:
        FileNotFoundError: If ``path`` is not a directory with config.json and model.safetensors.
        ValueError: If a processor names a class to import, the export's sidecar is not found, or LeRobot
            cannot read the files.
    """

    def __init__(self, path: str, device: str | torch.device = "cpu"):
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors
        from lerobot.processor.pipeline import ProcessorMigrationError
        from safetensors import SafetensorError

        self.path = os.path.abspath(path)
        """The ``pretrained_model`` directory."""
        config, self.sidecar = check_checkpoint(self.path, device)
        """The export's mapping between the env and LeRobot's features."""
        try:
            self.policy = get_policy_class(config.type).from_pretrained(self.path, config=config)
            overrides = {"device_processor": {"device": str(device)}}
            self.preprocess, self.postprocess = make_pre_post_processors(
                config, pretrained_path=self.path, preprocessor_overrides=overrides)
        except (OSError, KeyError, TypeError, ValueError, RuntimeError, SafetensorError,
                ProcessorMigrationError) as err:  # e.g. a checkpoint without processors
            raise _cannot_load(self.path, err) from err
        self.policy.eval()
        self.config = config
        """The policy's LeRobot config."""
        self.chunk_length: int = int(config.n_action_steps)
        """H: actions per chunk (``n_action_steps``; :meth:`set_chunk_length` takes fewer)."""
        self.max_chunk_length: int = int(getattr(config, "chunk_size", None) or self.chunk_length)
        """Actions one call predicts (ACT's ``chunk_size``): the longest H."""
        self.task: str = so101.follower_task(self.sidecar.source.get("env_name") or "") if self.sidecar.robot \
            else self.sidecar.source.get("env_name") or ""
        """The task id it acts in: the export's, or a robot's joint-target variant of it."""
        self.action_dim: int = self.sidecar.action.dim
        """Action dim A of the chunks (the env's, without the pad)."""
        self.n_obs_steps: int = int(getattr(config, "n_obs_steps", 1) or 1)
        """Observations per call (the ring's length)."""
        self.stateful = config.type in STATEFUL_TYPES
        """Whether the policy is called for one env at a time."""
        self.history: ObservationHistories | None = None
        """The per-env rings of the observations the policy reads (made at the first :meth:`observe_step`)."""

    def check_env(self, env: ManagerBasedRLEnv) -> None:
        """Raise if ``env`` is not the export's task or lacks its observation width, cameras (of the trained frame
        size) or action width (:func:`check_env_fits`).

        Raises:
            ValueError: Naming the checkpoint, what it expects and what the env has.
        """
        check_env_fits(self.path, self.sidecar, self.config, env)

    def set_chunk_length(self, length: int) -> None:
        """Execute the first ``length`` actions of each predicted chunk (H), as ``--policy.n_action_steps`` does in
        LeRobot.

        Raises:
            ValueError: If ``length`` is not in 1 .. :attr:`max_chunk_length`.
        """
        if not 1 <= length <= self.max_chunk_length:
            raise ValueError(f"LeRobot policy '{self.path}' predicts {self.max_chunk_length} actions per call: H must be"
                             f" 1 to {self.max_chunk_length}, got {length}.")
        self.chunk_length = length

    def chunk_warning(self, env: ManagerBasedRLEnv) -> str | None:
        """Why H may waste the run, or None: an H longer than the episodes the policy was trained on (their mean
        length, from the export) or than ``env``'s episodes (its limit). Such a chunk outlives its episode: the rest
        of it is dropped at the reset, and under the global clock the env then waits suspended for the next tick
        (H = 100 on 40-step episodes: most env-steps suspended). The text names the flags that shorten H."""
        env = getattr(env, "unwrapped", env)
        source = self.sidecar.source
        longer = []
        if source.get("frames") and source.get("demos") and self.chunk_length > source["frames"] / source["demos"]:
            longer.append(f"the episodes it was trained on (mean {source['frames'] / source['demos']:.1f} steps)")
        if self.chunk_length > env.max_episode_length:
            longer.append(f"the env's episodes (at most {int(env.max_episode_length)} steps)")
        if not longer:
            return None
        return (f"LeRobot policy '{self.path}': H = {self.chunk_length} (its n_action_steps) is longer than"
                f" {' and '.join(longer)}, so each episode uses part of a chunk and, under the global clock, waits"
                f" suspended for the rest of it. Execute fewer with --model.chunk_length N (N <= its chunk_size"
                f" {self.max_chunk_length}), or train with --policy.chunk_size=N --policy.n_action_steps=N.")

    def observe_step(self, obs: Mapping, moved: torch.Tensor, restarted: torch.Tensor | None) -> Mapping:
        """The chunk-model hook: advance the rings of every env that moved; returns ``obs`` with :data:`HISTORY_KEY`
        added (``obs`` itself when ``n_obs_steps`` is 1)."""
        if self.n_obs_steps == 1:
            return obs
        if self.history is None:
            terms = self.sidecar.policy_terms()
            paths = [STATE_GROUP] if terms is None else [f"{STATE_GROUP}/{term}" for term in terms]
            paths += [f"images/{cam}" for cam in self.sidecar.cameras]
            self.history = ObservationHistories({path: list(range(1 - self.n_obs_steps, 1)) for path in paths})
        flat = flatten_names(obs)
        current = {path: flat[path] for path in self.history.offsets}
        return {**obs, HISTORY_KEY: unflatten_names(self.history.step(current, moved, restarted))}

    @torch.no_grad()
    def __call__(self, obs_rows: dict, env_ids: torch.Tensor) -> torch.Tensor:
        """Chunks for the envs ``env_ids``. Returns shape (B, H, action_dim).

        Raises:
            RuntimeError: If the policy takes past observations and ``obs_rows`` lacks them (no ``observe_step``).
        """
        if self.n_obs_steps > 1:
            if HISTORY_KEY not in obs_rows:
                raise RuntimeError(f"LeRobot policy '{self.path}' takes {self.n_obs_steps} observations per env: call"
                                   " it through ActionChunkingPolicy, whose observe_step hook keeps each env's.")
            obs_rows = obs_rows[HISTORY_KEY]
        batch = self._features(obs_rows)
        if not self.stateful:
            return self._predict(batch, len(env_ids))
        return torch.cat([self._predict({k: v[b: b + 1] for k, v in batch.items()}, 1)
                          for b in range(len(env_ids))])

    """
    Internals.
    """

    def _features(self, obs_rows: Mapping) -> dict[str, torch.Tensor]:
        """LeRobot's features of the rows: the padded state, the frames as float (B, 3, H, W) in [0, 1]; with the
        history's step dim T after B when given the history ((B, T, D), (B, T, 3, H, W))."""
        batch = self.sidecar.lerobot_observation(obs_rows[STATE_GROUP])
        for cam in self.sidecar.cameras:
            batch[IMAGE_PREFIX + cam] = obs_rows["images"][cam].movedim(-1, -3).float() / 255.0
        return batch

    def _predict(self, batch: dict[str, torch.Tensor], size: int) -> torch.Tensor:
        """Preprocess, ``predict_action_chunk``, unnormalise; the first H actions without the pad, on the device of
        the observations."""
        batch_device = batch[STATE_FEATURE].device
        batch = self.preprocess({**batch, "task": [self.sidecar.task] * size})
        chunk = self.policy.predict_action_chunk(batch)[:, : self.chunk_length]
        chunk = self.postprocess(chunk)
        return self.sidecar.env_action(chunk).to(batch_device)


class LeRobotOpener(ChunkModelOpener):
    """Opens a LeRobot ``pretrained_model`` directory: read and checked once, one model for every env."""

    @staticmethod
    def recognizes(path: str) -> bool:
        """Whether ``path`` is a LeRobot ``pretrained_model`` directory (``--checkpoint PATH`` picks this source);
        no other source reads a directory, so one without the files is refused here.

        Raises:
            FileNotFoundError: If ``path`` is a directory without config.json and model.safetensors.
        """
        if os.path.isdir(path) and not is_lerobot_checkpoint(path):
            raise FileNotFoundError(f"'{path}' is a directory but not a LeRobot pretrained_model (it needs"
                                    f" {' and '.join(REQUIRED_FILES)}).")
        return is_lerobot_checkpoint(path)

    def __init__(self, cfg: LeRobotModelCfg, device: str):
        super().__init__(cfg, device)
        if not is_lerobot_checkpoint(cfg.path):
            raise FileNotFoundError(f"'{cfg.path}' is not a LeRobot pretrained_model directory (it needs"
                                    f" {' and '.join(REQUIRED_FILES)}).")
        self.model = LeRobotChunkModel(cfg.path, device)


@register_source("lerobot", LeRobotOpener)
@configclass
class LeRobotModelCfg(ChunkModelCfg):
    """A LeRobot ``pretrained_model`` directory of ``lerobot-train`` (config.json, model.safetensors); H is its
    ``n_action_steps`` or fewer (at most its ``chunk_size``)."""

    class_type: type = LeRobotOpener
    """The opener of this source."""
    path: str = ""
    """The ``pretrained_model`` directory."""


def check_checkpoint(path: str, device: str | torch.device = "cpu") -> tuple[Any, ExportSidecar]:
    """The LeRobot config and export sidecar of the ``pretrained_model`` at ``path``, after every check made before
    its network is built (by :class:`LeRobotChunkModel`, for ``eval.py --checkpoint``, and by ``lerobot-eval``'s env
    plugin, so both refuse the same files the same way): its files (:func:`checked_file`, no processor naming code),
    its config (this LeRobot's fields and types; ``device`` set, pretrained backbone weights dropped), the sizes it
    declares against its weights, its ``n_obs_steps``, and its features against the sidecar (widths, pads,
    cameras).

    Raises:
        FileNotFoundError: If ``path`` is not a directory with config.json and model.safetensors.
        ValueError: Naming the checkpoint and what is wrong.
    """
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies.factory import get_policy_class
    from safetensors import SafetensorError

    from draccus.utils import DraccusException

    if not is_lerobot_checkpoint(path):
        raise FileNotFoundError(f"'{path}' is not a LeRobot pretrained_model directory (it needs"
                                f" {' and '.join(REQUIRED_FILES)}).")
    config_json = _read_json(path, "config.json")
    if not isinstance(config_json, dict):
        raise ValueError(f"'{path}/config.json' is not a LeRobot config (a JSON object).")
    weights = checked_file(path, "model.safetensors")
    _check_processors(path)
    sidecar = find_sidecar(path)
    try:
        try:
            config = PreTrainedConfig.from_pretrained(path)
        except DraccusException as err:
            raise ValueError(f"its config.json ({config_json.get('type')!r}) does not fit this LeRobot's config"
                             f" of that type: {err}") from None
        config.device = str(device)
        if getattr(config, "pretrained_backbone_weights", None) is not None:
            config.pretrained_backbone_weights = None  # never downloaded: model.safetensors holds the backbone
        _check_declared_sizes(config, config_json, weights, get_policy_class(config.type))
    except (OSError, KeyError, TypeError, ValueError, RuntimeError, SafetensorError) as err:  # a corrupt file
        raise _cannot_load(path, err) from err
    n_obs_steps = int(getattr(config, "n_obs_steps", 1) or 1)
    if not 0 < n_obs_steps <= MAX_STEPS:
        raise ValueError(f"LeRobot policy '{path}' takes n_obs_steps = {n_obs_steps} observations per call; the"
                         f" history rings hold 1 to {MAX_STEPS}.")
    _check_features(path, config, sidecar)
    return config, sidecar


def _cannot_load(path: str, err: BaseException) -> ValueError:
    """LeRobot's error while loading ``path``, in one line."""
    message = " ".join(str(err).split())
    return ValueError(f"LeRobot cannot load '{path}': {message:.400}")


def _check_features(path: str, config: Any, sidecar: ExportSidecar) -> None:
    """Raise if the policy's features (of its LeRobot ``config``) are not the export's (another dataset's
    checkpoint, or a sidecar edited: its widths and pads are what the env's spaces are made of)."""
    inputs, outputs = config.input_features, config.output_features
    expected = {STATE_FEATURE: (sidecar.state.padded_to,)}
    if sidecar.environment_state is not None:
        expected[ENV_STATE_FEATURE] = (sidecar.environment_state.padded_to,)
    expected.update({IMAGE_PREFIX + cam: None for cam in sidecar.cameras})
    for key, shape in expected.items():
        if key in inputs and shape is not None and tuple(inputs[key].shape) != shape:
            raise ValueError(f"LeRobot policy '{path}': '{key}' has shape {tuple(inputs[key].shape)}, the"
                             f" export's sidecar says {shape}.")
    unknown = [key for key in inputs if key not in expected]
    if unknown:
        raise ValueError(f"LeRobot policy '{path}' takes {unknown}, which the export does not map to the env"
                         f" (it maps {sorted(expected)}).")
    action = outputs.get(ACTION_FEATURE)
    if action is None or tuple(action.shape) != (sidecar.action.padded_to,):
        raise ValueError(f"LeRobot policy '{path}' outputs {dict(outputs)}, the export's sidecar says"
                         f" '{ACTION_FEATURE}' of shape ({sidecar.action.padded_to},).")


def check_env_fits(path: str, sidecar: ExportSidecar, config, env: ManagerBasedRLEnv) -> None:
    """Raise if ``env`` is not the task of the export ``sidecar`` that the policy of ``config`` (its LeRobot
    ``PreTrainedConfig``, at ``path``) was trained on, or lacks its observation width, cameras (of the trained frame
    size) or action width.

    Raises:
        ValueError: Naming the checkpoint, what it expects and what the env has.
    """
    env = getattr(env, "unwrapped", env)
    task = getattr(env.cfg, "env_name", None) or getattr(getattr(env, "spec", None), "id", None)
    trained_on = sidecar.source.get("env_name") or ""
    acts_in = so101.follower_task(trained_on) if sidecar.robot else trained_on
    obs = env.observation_manager
    problems = []
    if acts_in and task and task != acts_in:
        problems.append(f"it was trained on an export of '{trained_on}'" + (f" and acts in '{acts_in}'" if
                        acts_in != trained_on else "") + f", the env is '{task}'")
    terms = dict(zip(obs.active_terms.get(STATE_GROUP, []), obs.group_obs_term_dim.get(STATE_GROUP, [])))
    wanted = dict(sidecar.environment_state.terms) if sidecar.environment_state is not None else {}
    if sidecar.robot:
        wanted = {so101.STATE_TERM: sidecar.state.dim, **wanted}
    if wanted and obs.group_obs_concatenate.get(STATE_GROUP, True):
        problems.append(f"it reads '{STATE_GROUP}' terms by name {list(wanted)}, the env's group is one"
                        " concatenated vector")
    if not sidecar.robot:
        state_dim = obs.group_obs_dim.get(STATE_GROUP, (None,))[0]
        if state_dim != sidecar.state.dim:
            problems.append(f"it takes '{STATE_GROUP}' observations of width {sidecar.state.dim}, the env's are"
                            f" {state_dim}")
    for term, width in wanted.items():
        if term not in terms or tuple(terms[term]) != (width,):
            problems.append(f"it takes the '{STATE_GROUP}' term '{term}' of width {width}, the env's"
                            f" {'is ' + str(tuple(terms[term])) if term in terms else 'has none'}")
    cameras = obs.active_terms.get("images", [])
    missing = [cam for cam in sidecar.cameras if cam not in cameras]
    if missing:
        problems.append(f"it needs cameras {missing}, the env has {cameras}")
    for cam in sidecar.cameras:
        feature = config.input_features.get(IMAGE_PREFIX + cam)
        if cam in missing or feature is None:
            continue
        frame = tuple(obs.group_obs_term_dim["images"][cameras.index(cam)])  # (H, W, 3)
        trained = tuple(feature.shape)  # LeRobot's (3, H, W)
        if frame != trained[1:] + trained[:1]:
            problems.append(f"it takes '{cam}' frames of {trained[1]} x {trained[2]} px, the env's are"
                            f" {frame[0]} x {frame[1]} px")
    if env.action_manager.total_action_dim != sidecar.action.dim:
        problems.append(f"it outputs {sidecar.action.dim} action dims, the env takes"
                        f" {env.action_manager.total_action_dim}")
    if problems:
        raise ValueError(f"LeRobot policy '{path}' does not fit the env: {'; '.join(problems)}.")


def checked_file(directory: str, name: str, limit: int | None = None) -> str:
    """The path of the file ``name`` of the checkpoint ``directory``, if it resolves (symlinks followed) to a
    regular file inside the directory, of at most ``limit`` bytes.

    Raises:
        FileNotFoundError: If there is no such file.
        ValueError: If it resolves outside the directory, is not a regular file (a FIFO, a device, /dev/zero) or
            is larger than ``limit``.
    """
    root = os.path.realpath(directory)
    path = os.path.realpath(os.path.join(root, str(name)))
    where = f"'{name}' of the checkpoint '{directory}'"
    if os.path.commonpath([root, path]) != root:
        raise ValueError(f"{where} resolves to '{path}', outside the checkpoint: every file it names must be in it.")
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{where} ('{path}') is not a regular file.")
    if limit is not None and info.st_size > limit:
        raise ValueError(f"{where} holds {info.st_size} bytes, over the {limit} read of such a file.")
    return path


def _read_json(directory: str, name: str) -> Any:
    """The JSON file ``name`` of a checkpoint, checked by :func:`checked_file` and read at most
    :data:`MAX_JSON_BYTES` (a file that grows meanwhile is read no further)."""
    path = checked_file(directory, name, MAX_JSON_BYTES)
    with open(path, "rb") as f:
        data = f.read(MAX_JSON_BYTES + 1)
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as err:
        raise ValueError(f"'{path}' is not JSON: {str(err)[:200]}") from None


def _check_processors(path: str) -> None:
    """Raise if a processor file names a class to import instead of a registered LeRobot step, or a state file
    that :func:`checked_file` refuses."""
    for name in PROCESSOR_FILES:
        if not os.path.lexists(os.path.join(path, name)):
            continue
        try:
            steps = _read_json(path, name)["steps"]
            named = [step.get("class") for step in steps if "registry_name" not in step]
            states = [step["state_file"] for step in steps if step.get("state_file") is not None]
        except (OSError, KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"'{os.path.join(path, name)}' is not a LeRobot processor file: {err}") from err
        if named:
            raise ValueError(f"'{os.path.join(path, name)}' names classes to import ({named}); only LeRobot's"
                             " registered processor steps are loaded, so no code is run from a checkpoint.")
        for state in states:
            checked_file(path, state, MAX_STATE_BYTES)


def _check_declared_sizes(config: Any, config_json: Mapping, weights: str, policy_class: type) -> None:
    """Raise if the network ``config`` declares does not have the shapes of the ``weights`` file's header,
    before any real tensor is allocated: an integer of the config over :data:`UNCHECKED_INTS` and over the
    weights' element count is refused at once (no size of a network exceeds its weights), then the network is
    built on the meta device and its state's shapes compared with the header's."""
    from safetensors import safe_open

    with safe_open(weights, "pt", device="cpu") as f:
        shapes = {key: tuple(f.get_slice(key).get_shape()) for key in f.keys()}
    total = sum(int(torch.Size(shape).numel()) for shape in shapes.values())

    def ints(value: Any, name: str):
        if isinstance(value, Mapping):
            for key, item in value.items():
                yield from ints(item, f"{name}.{key}" if name else str(key))
        elif isinstance(value, list):
            for item in value:
                yield from ints(item, name)
        elif type(value) is int:
            yield name, value

    for name, value in ints(config_json, ""):
        if value > max(UNCHECKED_INTS, total):
            raise ValueError(f"its config.json declares {name} = {value}, more than all {total} weights of"
                             " model.safetensors: it cannot be this checkpoint's network.")
    with torch.device("meta"):
        network = policy_class(config)
    declared = {key: tuple(value.shape) for key, value in network.state_dict().items()}
    wrong = [f"{key} {declared[key]} (weights: {shapes[key]})" for key in declared if key in shapes
             and declared[key] != shapes[key]]
    if wrong:
        raise ValueError(f"its config.json declares a network of other sizes than model.safetensors holds:"
                         f" {'; '.join(wrong[:3])}{' ...' if len(wrong) > 3 else ''}.")


def find_sidecar(path: str) -> ExportSidecar:
    """The export's sidecar: in the checkpoint directory, else at the ``dataset.root`` of ``train_config.json``."""
    name = os.path.basename(SIDECAR_PATH)
    if os.path.lexists(os.path.join(path, name)):
        return ExportSidecar.read(checked_file(path, name, MAX_JSON_BYTES))
    try:
        root = _read_json(path, "train_config.json")["dataset"]["root"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"'{path}' has no sidecar of scripts/export_lerobot.py and no train_config.json naming the"
                         f" dataset it was trained on ({err}): copy the export's {SIDECAR_PATH} into it.") from err
    if not isinstance(root, str) or not root or not os.path.isfile(os.path.join(root, SIDECAR_PATH)):
        raise ValueError(f"'{path}' was trained on dataset root {str(root)[:200]!r}, which has no {SIDECAR_PATH}:"
                         " copy the sidecar of the export it was trained on into the checkpoint directory.")
    return ExportSidecar.read(checked_file(root, SIDECAR_PATH, MAX_JSON_BYTES))
