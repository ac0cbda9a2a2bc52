"""Camera images over every wire: the real camera task's observation rows (a float ``policy`` group and uint8
``images``) reach a served model unchanged, uint8 and bit for bit, through the project's protocol, openpi's and
GR00T's (both observation forms)."""

from __future__ import annotations

import pytest
import torch

from isaaclab_suspend.serving import (
    Gr00tChunkModel,
    Gr00tChunkModelCfg,
    Gr00tPolicyServer,
    Gr00tPolicyServerCfg,
    OpenpiChunkModel,
    OpenpiChunkModelCfg,
    OpenpiPolicyServer,
    OpenpiPolicyServerCfg,
    TcpPolicyServer,
    TcpPolicyServerCfg,
    TcpChunkModel,
    TcpChunkModelCfg,
)
from isaaclab_suspend.tasks.env_factory import open_env

pytestmark = pytest.mark.slow  # the camera task's images over three wires

H = 4
CAMERA = "scene_camera"


@pytest.fixture(scope="module")
def camera_rows():
    """Observation rows of 3 envs of the camera task after a few steps, and the ids the rows belong to."""
    with open_env("Isaac-PushCube-Camera-Suspendable", 3) as env:
        env.reset()
        for _ in range(3):
            obs, *_ = env.step(torch.full((env.num_envs, 1), 0.5))
        rows = {"policy": obs["policy"][[2, 0]].clone(), "images": {CAMERA: obs["images"][CAMERA][[2, 0]].clone()}}
    return rows, torch.tensor([2, 0])


def _image_model(seen: list):
    """A chunk model whose actions are a function of every pixel and of the state, recording what it was sent."""

    def model(obs_rows, env_ids):
        image = obs_rows["images"][CAMERA]
        seen.append(image.clone())
        value = image.double().mean(dim=(1, 2, 3)) / 255 + obs_rows["policy"].double().sum(dim=1)
        return value.float().view(-1, 1, 1).expand(-1, H, 1).contiguous()

    return model


def test_images_travel_as_uint8_through_the_project_protocol(camera_rows):
    rows, env_ids = camera_rows
    image = rows["images"][CAMERA]
    assert image.dtype == torch.uint8 and image.shape[1:] == (64, 64, 3) and image.float().std() > 0
    seen = []
    local = _image_model([])(rows, env_ids)
    with TcpPolicyServer(_image_model(seen), TcpPolicyServerCfg(port=0, chunk_length=H, action_dim=1)) as server:
        host, port = server.address
        remote = TcpChunkModel(TcpChunkModelCfg(host=host, port=port))
        try:
            chunk = remote(rows, env_ids)
        finally:
            remote.close()
    assert seen[0].dtype == torch.uint8 and torch.equal(seen[0], image)
    assert torch.equal(chunk, local)


def test_images_travel_as_uint8_through_openpi(camera_rows):
    rows, env_ids = camera_rows
    image = rows["images"][CAMERA]
    seen = []
    local = _image_model([])(rows, env_ids)
    keys = {"observation/state": "policy", "observation/image": f"images/{CAMERA}"}
    server_cfg = OpenpiPolicyServerCfg(port=0, chunk_length=H, action_dim=1, keys=keys, batching=None)
    with OpenpiPolicyServer(_image_model(seen), server_cfg) as server:
        host, port = server.address
        client = OpenpiChunkModel(OpenpiChunkModelCfg(host=host, port=port, keys=keys, prompt="push the cube"))
        try:
            chunk = client(rows, env_ids)
        finally:
            client.close()
    received = torch.cat(seen)  # one request per env row (openpi serves batch 1), served in any order
    assert received.dtype == torch.uint8 and received.shape == image.shape
    assert sorted(received.flatten(1).tolist()) == sorted(image.flatten(1).tolist())
    assert torch.equal(chunk, local)


@pytest.mark.parametrize("form", ["flat", "nested"])
def test_images_travel_as_uint8_video_through_gr00t(camera_rows, form):
    """GR00T's video modality: (B, T = 1, H, W, 3) uint8 on the wire, the served model sees the frames bit for
    bit, and the actions equal the local model's."""
    rows, env_ids = camera_rows
    image = rows["images"][CAMERA]
    seen = []
    keys = {"state.cube": "policy", "video.scene": f"images/{CAMERA}"}
    server_cfg = Gr00tPolicyServerCfg(port=0, chunk_length=H, action_dim=1, keys=keys, batching=None)
    with Gr00tPolicyServer(_image_model(seen), server_cfg) as server:
        client = Gr00tChunkModel(Gr00tChunkModelCfg(port=server.address[1], keys=keys, form=form))
        try:
            chunk = client(rows, env_ids)
        finally:
            client.close()
    assert len(seen) == 1 and seen[0].dtype == torch.uint8 and torch.equal(seen[0], image)
    assert torch.equal(chunk, _image_model([])(rows, env_ids))
    with pytest.raises(ValueError, match="must be uint8 images"):
        client.observation({**rows, "images": {CAMERA: image.float()}}, 2)
