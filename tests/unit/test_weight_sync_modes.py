"""Weight sync modes: after each sync the receiver equals the sender, bytes are reported."""

import copy

import pytest
import torch

from infra.weight_sync import StaleWeightsError, WeightSender, apply_payload, payload_nbytes


def nets(seed=0):
    torch.manual_seed(seed)
    sender = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    receiver = copy.deepcopy(sender)
    with torch.no_grad():
        for p in receiver.parameters():
            p.zero_()
    return sender, receiver


def train_a_little(net, touch_fraction):
    with torch.no_grad():
        for p in net.parameters():
            mask = torch.rand(p.shape) < touch_fraction
            p.add_(mask * torch.randn(p.shape) * 0.01)


def same(a, b):
    return all(
        torch.equal(x, y)
        for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    )


@pytest.mark.parametrize("mode", ["bucket", "patch"])
def test_receiver_equals_sender_after_every_sync(mode):
    sender_net, receiver = nets()
    sender = WeightSender(mode, bucket_bytes=2048, full_interval=3)
    version = None
    sizes = []
    for step in range(7):
        payload = sender.payload(sender_net.state_dict(), step)
        version = apply_payload(receiver, payload, version)
        sizes.append((payload["mode"], payload_nbytes(payload)))
        assert version == step and same(sender_net, receiver)
        train_a_little(sender_net, touch_fraction=0.05)
    full_bytes = sum(p.numel() * 4 for p in sender_net.parameters())
    if mode == "bucket":
        assert all(m == "full" and n == full_bytes for m, n in sizes)
    else:
        assert [m for m, _ in sizes] == ["full", "patch", "patch", "full", "patch", "patch", "full"]
        # ~5% of the elements changed: index (8 B) + value (4 B) each, far below a full sync
        assert all(n < full_bytes * 0.2 for m, n in sizes if m == "patch")


def test_patch_on_other_weights_is_refused_and_reset_sends_full():
    sender_net, receiver = nets()
    sender = WeightSender("patch", full_interval=100)
    apply_payload(receiver, sender.payload(sender_net.state_dict(), 0), None)
    train_a_little(sender_net, 0.1)
    patch = sender.payload(sender_net.state_dict(), 1)
    with pytest.raises(StaleWeightsError, match="based on version 0"):
        apply_payload(receiver, patch, current_version=5)
    sender.reset()
    assert sender.payload(sender_net.state_dict(), 2)["mode"] == "full"


def test_bfloat16_transfer_round_trips_bits():
    sender_net, receiver = nets()
    receiver = receiver.to(torch.bfloat16)
    sender = WeightSender("patch", dtype=torch.bfloat16, full_interval=100)
    apply_payload(receiver, sender.payload(sender_net.state_dict(), 0), None)
    train_a_little(sender_net, 0.5)
    apply_payload(receiver, sender.payload(sender_net.state_dict(), 1), 0)
    for name, value in sender_net.state_dict().items():
        assert torch.equal(receiver.state_dict()[name], value.to(torch.bfloat16))


def test_unknown_mode():
    with pytest.raises(ValueError, match="'bucket' or 'patch'"):
        WeightSender("delta")
