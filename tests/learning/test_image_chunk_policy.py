"""The image chunk policy: conv encoder + chunk head, its checkpoint, and training it from image windows."""

import pytest
import torch

from isaaclab_suspend.learning import load_chunk_policy, save_chunk_policy
from isaaclab_suspend.learning.bc_trainer import chunk_loss
from isaaclab_suspend.learning.image_chunk_policy import (
    ImageChunkPolicyCfg,
    ImageChunkPolicyModel,
    ImageChunkPolicyNet,
    SpatialSoftmax,
)

pytestmark = pytest.mark.slow  # training the image chunk policy

H, OBS_DIM, ACTION_DIM, SIZE = 8, 5, 1, 32


def _inputs(batch: int, seed: int = 0) -> dict:
    gen = torch.Generator().manual_seed(seed)
    return {"images": torch.randint(0, 256, (batch, SIZE, SIZE, 3), dtype=torch.uint8, generator=gen),
            "policy": torch.randn(batch, OBS_DIM, generator=gen)}


def _net(**cfg) -> ImageChunkPolicyNet:
    torch.manual_seed(0)
    return ImageChunkPolicyNet(ImageChunkPolicyCfg(chunk_length=H, **cfg), (SIZE, SIZE, 3), OBS_DIM, ACTION_DIM)


def test_spatial_softmax_finds_the_bright_pixel():
    x = torch.full((1, 1, 9, 9), -50.0)
    x[0, 0, 0, 8] = 50.0  # top row (y = -1), right column (x = +1)
    assert torch.allclose(SpatialSoftmax()(x), torch.tensor([[-1.0, 1.0]]), atol=1e-4)


def test_chunk_shape_and_only_the_proprio_dims_are_used():
    net = _net(proprio_dims=2).eval()
    inputs = _inputs(4)
    chunk = net(inputs)
    assert chunk.shape == (4, H, ACTION_DIM)
    other = dict(inputs, policy=inputs["policy"].clone())
    other["policy"][:, 2:] += 100.0  # the cube and target terms: not the policy's to see
    assert torch.equal(net(other), chunk)
    other["images"] = 255 - inputs["images"]
    assert not torch.allclose(net(other), chunk)


def test_normalization_and_checkpoint_round_trip(tmp_path):
    net = _net()
    inputs = _inputs(64)
    net.set_normalization(inputs["policy"], torch.randn(64, ACTION_DIM) * 3 + 1)
    assert torch.equal(net.obs_mean[: -2], torch.zeros(2 * 16)) and torch.allclose(
        net.obs_mean[-2:], inputs["policy"][:, :2].mean(0))
    path = tmp_path / "image_policy.pt"
    save_chunk_policy(str(path), net.eval(), "Isaac-PushCube-Camera-Suspendable")
    model = load_chunk_policy(str(path))
    assert isinstance(model, ImageChunkPolicyModel) and model.chunk_length == H
    rows = {"images": {"scene_camera": inputs["images"][:3]}, "policy": inputs["policy"][:3]}
    assert torch.equal(model(rows, torch.arange(3)), net({k: v[:3] for k, v in inputs.items()}))


def test_learns_where_the_object_is():
    """Targets that only the image shows (a bright square's column): a few steps fit them much better."""
    gen = torch.Generator().manual_seed(1)
    column = torch.randint(0, SIZE - 4, (32,), generator=gen)
    images = torch.zeros(32, SIZE, SIZE, 3, dtype=torch.uint8)
    for i, c in enumerate(column.tolist()):
        images[i, 12:16, c : c + 4] = 255
    inputs = {"images": images, "policy": torch.zeros(32, OBS_DIM)}
    actions = (column.float() / SIZE).view(32, 1, 1).expand(32, H, ACTION_DIM)
    net = _net(hidden_dims=[32])
    net.set_normalization(inputs["policy"], actions.flatten(0, 1))
    valid = torch.ones(32, H, dtype=torch.bool)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    with torch.no_grad():
        first = float(chunk_loss(net, inputs, actions, valid))
    for _ in range(60):
        loss = chunk_loss(net, inputs, actions, valid)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        assert float(chunk_loss(net, inputs, actions, valid)) < 0.5 * first


def test_bad_cfgs_are_refused():
    with pytest.raises(ValueError, match="'mlp' chunk head"):
        _net(arch="transformer")
    with pytest.raises(ValueError, match="proprio_dims 9"):
        _net(proprio_dims=9)
