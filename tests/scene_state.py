"""The physics state of every asset of a scene, for tests that compare it bit for bit."""

import torch


def physics_tensors(env) -> list[torch.Tensor]:
    """Copies of every physics quantity of every asset: articulation joint and root state, rigid-object root
    state. Each of shape (num_envs, ...)."""
    out = []
    for name in env.scene.articulations:
        data = env.scene[name].data
        out += [data.joint_pos.torch, data.joint_vel.torch, data.root_pose_w.torch, data.root_vel_w.torch]
    for name in env.scene.rigid_objects:
        data = env.scene[name].data
        out += [data.root_pose_w.torch, data.root_vel_w.torch]
    return [t.clone() for t in out]
