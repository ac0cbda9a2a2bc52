"""One table from the files of NVIDIA's asset server to local ones, applied to a task's cfg before its env is built.

Isaac Lab's task cfgs spawn their robots and props from USD files on NVIDIA's asset server (``ISAAC_NUCLEUS_DIR``),
which a kitless install cannot open. :data:`ASSET_MAP` names, by a pattern on the server path, the local file that
stands in for each one (a robot converted by :mod:`~isaaclab_suspend.assets.robots`, a prop authored by
:mod:`~isaaclab_suspend.assets.generate_usd`) and what else the asset's cfg needs to load it (the server file's
variant sets dropped, a ground plane spawned from a plain USD file). :func:`localize_scene` applies it to every
asset of a scene cfg; a server file that no row matches is left as it is, and the check before the env is built
(:func:`isaaclab_suspend.tasks.env_factory.check_local_assets`) names it.

Adding an asset is one row: ``LocalAsset(server=r"/Robots/Vendor/arm/arm\\.usd$", local=lambda m: robot_usd(ARM))``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from . import BLOCK_USDS, GROUND_USD, TABLE_USD
from .robots import FRANKA_PANDA, SO101, ConvertedRobot, robot_usd


def _plain_usd_file(asset, path: str) -> None:
    """Spawn ``asset`` from the file ``path``: a :class:`~isaaclab.sim.UsdFileCfg` keeps its other settings; any
    other spawner of a file (Isaac Lab's ``GroundPlaneCfg``) becomes a ``UsdFileCfg`` of it."""
    import isaaclab.sim as sim_utils

    spawn = asset.spawn
    if type(spawn) is sim_utils.UsdFileCfg:
        spawn.usd_path = path
        spawn.variants = None  # the server file's variant sets; the local file has one layout
    else:
        asset.spawn = sim_utils.UsdFileCfg(usd_path=path, semantic_tags=getattr(spawn, "semantic_tags", None))


def _converted_robot(robot: ConvertedRobot) -> Callable[[object, str], None]:
    """The adapt of a converted robot: spawn the file, keep the cfg's selections of the variant sets the file has
    (:attr:`~isaaclab_suspend.assets.robots.ConvertedRobot.variant_sets`), and turn the root by the robot's
    :attr:`~isaaclab_suspend.assets.robots.ConvertedRobot.frame_correction`."""

    def adapt(asset, path: str) -> None:
        import torch

        from isaaclab.utils.math import quat_mul

        kept = {k: v for k, v in (asset.spawn.variants or {}).items() if k in robot.variant_sets}
        _plain_usd_file(asset, path)
        asset.spawn.variants = kept or None
        rot = quat_mul(torch.tensor([asset.init_state.rot]), torch.tensor([robot.frame_correction]))
        asset.init_state.rot = tuple(rot[0].tolist())

    return adapt


@dataclass(frozen=True)
class LocalAsset:
    """A file on the asset server and its local counterpart."""

    server: str
    """Regular expression searched in the server path (a URL ending; ``re.search``)."""
    local: Callable[[re.Match], str]
    """The local file's path, of the match of :attr:`server` (called when a cfg uses it: a converted robot is
    generated on first use)."""
    adapt: Callable[[object, str], None] = _plain_usd_file
    """Rewrites the asset cfg (an ``AssetBaseCfg`` with a ``spawn``) to load the local file."""


ASSET_MAP: tuple[LocalAsset, ...] = (
    LocalAsset(r"/Robots_Multiphysics/RobotStudio/so101_new_calib_SysID/so101_new_calib\.usda$",
               lambda m: robot_usd(SO101), _converted_robot(SO101)),
    LocalAsset(r"/Robots/FrankaEmika/franka_panda\.usda$", lambda m: robot_usd(FRANKA_PANDA), _converted_robot(FRANKA_PANDA)),
    LocalAsset(r"/Props/Mounts/SeattleLabTable/table_instanceable\.usd$", lambda m: TABLE_USD),
    LocalAsset(r"/Props/Blocks/(blue|red|green)_block\.usd$", lambda m: BLOCK_USDS[m.group(1)]),
    LocalAsset(r"/Environments/Grid/default_ground_plane_checker_v1/default_ground_plane\.usda$", lambda m: GROUND_USD),
    LocalAsset(r"/Environments/Grid/default_environment\.usd$", lambda m: GROUND_USD),
)
"""Server file -> local file, by pattern; the first matching row wins."""


def local_counterpart(path: str) -> tuple[LocalAsset, str] | None:
    """The row of :data:`ASSET_MAP` matching the server path ``path`` and its local file, or None."""
    for row in ASSET_MAP:
        match = re.search(row.server, path)
        if match:
            return row, row.local(match)
    return None


def localize_scene(scene) -> dict[str, str]:
    """Point every asset of ``scene`` (an ``InteractiveSceneCfg``) whose ``spawn.usd_path`` is on the asset server
    and has a row in :data:`ASSET_MAP` at its local file; drop textures that the asset server holds (a dome
    light's sky: kitless rendering lights the scene without them).

    Returns:
        Asset name -> local file, of the assets it changed.
    """
    changed = {}
    for name, asset in vars(scene).items():
        spawn = getattr(asset, "spawn", None)
        path = getattr(spawn, "usd_path", None)
        if isinstance(path, str) and "://" in path:
            found = local_counterpart(path)
            if found is not None:
                row, local = found
                row.adapt(asset, local)
                changed[name] = local
        texture = getattr(spawn, "texture_file", None)
        if isinstance(texture, str) and "://" in texture:
            spawn.texture_file = None
            changed[name] = "(server texture dropped)"
    return changed
