"""The Panda's own layout steps: from ``urdf-usd-converter``'s franka_description to Isaac Lab's ``franka_panda.usda``.

:data:`~isaaclab_suspend.assets.robots.FRANKA_PANDA` converts ``example-robot-data``'s ``panda.urdf``; the
converter nests the bodies as Isaac Lab's newer assets do (``Geometry/panda_link0/.../panda_link7/panda_hand/
panda_{left,right}finger``, the path the lift cfg's finger contact sensors address), with the articulation root
and a fixed joint to the world on ``panda_link0`` and the second finger a mimic of the first. What differs from
Isaac Lab's asset is mended here (:func:`lay_out_panda`):

- the URDF's fixed ``panda_link8`` (a frame between ``panda_link7`` and ``panda_hand``) is merged into
  ``panda_hand``, and the fixed ``panda_hand_tcp`` frame is dropped (Isaac Lab's cfgs reach the TCP through a
  body offset);
- the ``Colliders`` variant set that Isaac Lab's Franka cfgs select: ``primitives`` (their default: an oriented
  box around each arm and hand collision mesh, the URDF's own boxes on the fingers), ``convex_hulls`` (the meshes
  as convex hulls) and ``gripper_only`` (``FRANKA_MINIMAL_CFG``: hand and fingers). The cfgs' ``Physics``
  selection has no set here (one description, Newton's), which Isaac Lab skips with a warning.
"""

from __future__ import annotations

ARM_LINKS = tuple(f"panda_link{i}" for i in range(8))
"""The arm's bodies, base first (``panda_link8`` is merged into the hand)."""

COLLIDER_VARIANTS = ("primitives", "convex_hulls", "gripper_only")
"""The ``Colliders`` variants, the first selected."""


def body_path(root: str, link: str) -> str:
    """Prim path of an arm link or ``panda_hand`` under the robot's ``root`` prim (e.g. ``/franka_panda``)."""
    chain = ARM_LINKS if link == "panda_hand" else ARM_LINKS[: ARM_LINKS.index(link)]
    return "/".join([f"{root}/Geometry", *chain, link])


def lay_out_panda(stage) -> None:
    """Merge ``panda_link8``, drop ``panda_hand_tcp`` and add the ``Colliders`` variant set, in ``stage``."""
    root = stage.GetDefaultPrim().GetPath().pathString
    _merge_link8(stage, root)
    _add_collider_variants(stage, root)


def _merge_link8(stage, root: str) -> None:
    """Move ``panda_hand`` out of ``panda_link8`` (their transforms composed), drop ``panda_link8`` and
    ``panda_hand_tcp``, and point the relationships that named the old paths (joints) at the new ones."""
    from pxr import Gf, Sdf, UsdGeom

    link7 = body_path(root, "panda_link7")
    old_hand, new_hand = f"{link7}/panda_link8/panda_hand", f"{link7}/panda_hand"
    layer = stage.GetRootLayer()
    link8_xf = UsdGeom.Xformable(stage.GetPrimAtPath(f"{link7}/panda_link8")).GetLocalTransformation()
    hand_xf = UsdGeom.Xformable(stage.GetPrimAtPath(old_hand)).GetLocalTransformation()
    if not Sdf.CopySpec(layer, old_hand, layer, new_hand):
        raise RuntimeError(f"cannot move {old_hand} to {new_hand}")
    stage.RemovePrim(f"{link7}/panda_link8")
    stage.RemovePrim(f"{new_hand}/panda_hand_tcp")
    pose = Gf.Transform(hand_xf * link8_xf)
    hand = UsdGeom.Xformable(stage.GetPrimAtPath(new_hand))
    hand.ClearXformOpOrder()
    hand.AddTranslateOp().Set(pose.GetTranslation())
    hand.AddOrientOp().Set(Gf.Quatf(pose.GetRotation().GetQuat()))
    old, new = Sdf.Path(old_hand), Sdf.Path(new_hand)
    for prim in stage.Traverse():
        for rel in prim.GetRelationships():
            targets = rel.GetTargets()
            moved = [t.ReplacePrefix(old, new) for t in targets]
            if moved != targets:
                rel.SetTargets(moved)


def _add_collider_variants(stage, root: str) -> None:
    """The ``Colliders`` variant set on the root prim (:data:`COLLIDER_VARIANTS`)."""
    import numpy as np
    import trimesh
    from pxr import Gf, UsdGeom, UsdPhysics

    def meshes(link: str):
        body = stage.GetPrimAtPath(body_path(root, link))
        return [p for p in body.GetChildren() if p.HasAPI(UsdPhysics.CollisionAPI) and p.IsA(UsdGeom.Mesh)]

    variants = stage.GetPrimAtPath(root).GetVariantSets().AddVariantSet("Colliders")
    for variant in COLLIDER_VARIANTS:
        variants.AddVariant(variant)
        variants.SetVariantSelection(variant)
        with variants.GetVariantEditContext():
            for link in (*ARM_LINKS, "panda_hand"):
                for mesh in meshes(link):
                    if variant == "convex_hulls" or variant == "gripper_only" and link == "panda_hand":
                        continue
                    mesh.SetActive(False)
                    if variant == "primitives":
                        points = np.asarray(UsdGeom.Mesh(mesh).GetPointsAttr().Get(), dtype=np.float64)
                        to_box, extents = trimesh.bounds.oriented_bounds(points)
                        box_in_mesh = Gf.Matrix4d(np.linalg.inv(to_box).T.tolist())  # USD's row vectors
                        pose = Gf.Transform(box_in_mesh * UsdGeom.Xformable(mesh).GetLocalTransformation())
                        box = UsdGeom.Cube.Define(stage, mesh.GetPath().GetParentPath().AppendChild(f"{mesh.GetName()}_box"))
                        box.CreateSizeAttr(1.0)
                        box.CreatePurposeAttr(UsdGeom.Tokens.guide)
                        box.AddTranslateOp().Set(pose.GetTranslation())
                        box.AddOrientOp().Set(Gf.Quatf(pose.GetRotation().GetQuat()))
                        box.AddScaleOp().Set(Gf.Vec3f(*extents.tolist()))
                        UsdPhysics.CollisionAPI.Apply(box.GetPrim())
    variants.SetVariantSelection(COLLIDER_VARIANTS[0])
