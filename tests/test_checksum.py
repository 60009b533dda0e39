"""The checksum every saved file carries: equal structures agree, any change to one disagrees, and a
sealed payload survives torch.save / torch.load (weights_only) with its checksum still matching."""
import io

import pytest
import torch

from lmcourse.checksum import KEY, digest, seal, verify


def payload():
    g = torch.Generator().manual_seed(0)
    return {"format": 2, "config": {"hidden_size": 8, "tie": True, "last_size": None, "lr": 0.5},
            "state_dict": {"w": torch.randn(3, 4, generator=g), "b": torch.zeros(4, dtype=torch.float64)},
            "vocab": ["<eos>", "the", "cat"], "optimizer": {0: {"step": torch.tensor(3.0)}, "groups": [(0.9, 0.99)]},
            "rng": torch.ByteTensor([1, 2, 3]), "empty": torch.zeros(0, 5)}


def next_float(x: torch.Tensor) -> None:
    x.copy_(torch.nextafter(x, x + 1))


def test_equal_structures_have_equal_checksums_whatever_the_key_order():
    a = payload()
    b = dict(reversed(list(payload().items())))
    assert digest(a) == digest(b) and len(digest(a)) == 64


@pytest.mark.parametrize("change", [
    lambda p: next_float(p["state_dict"]["w"].view(-1)[5:6]),        # one weight, by one rounding step
    lambda p: p["state_dict"]["w"].view(torch.int32).view(-1)[0].bitwise_xor_(1),  # one bit
    lambda p: p["state_dict"].update(w=p["state_dict"]["w"].reshape(4, 3)),        # the same bytes, another shape
    lambda p: p["state_dict"].update(b=p["state_dict"]["b"].float()),              # the same values, another dtype
    lambda p: p["config"].update(hidden_size=8.0),                                 # an int become a float
    lambda p: p["config"].update(tie=1),                                           # a bool become an int
    lambda p: p["config"].update(last_size=0),
    lambda p: p["vocab"].__setitem__(1, "tha"),
    lambda p: p["vocab"].append(""),
    lambda p: p.update(empty=torch.zeros(5, 0)),
    lambda p: p["optimizer"].update({1: p["optimizer"].pop(0)}),                   # a key renamed
    lambda p: p.update(rng=torch.ByteTensor([1, 2, 4])),
], ids=["a weight", "a bit", "a shape", "a dtype", "int to float", "bool to int", "None to 0", "a word",
        "a word more", "an empty shape", "a key", "a random state"])
def test_any_change_changes_the_checksum(change):
    p = payload()
    before = digest(p)
    change(p)
    assert digest(p) != before


def test_a_sealed_payload_round_trips_through_torch_save():
    sealed = seal(payload())
    assert KEY in sealed and KEY not in payload() and verify(sealed)
    buffer = io.BytesIO()
    torch.save(sealed, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    assert verify(loaded)
    loaded["state_dict"]["w"][0, 0] += 1
    assert not verify(loaded)


@pytest.mark.parametrize("thing", [None, [], "text", {"format": 2}, {KEY: 5, "a": 1}, {KEY: "0" * 64, "a": 1},
                                   {KEY: "x", "a": object()}])
def test_anything_but_a_sealed_dict_fails_verification(thing):
    assert verify(thing) is False


def test_only_plain_data_and_tensors_are_covered():
    with pytest.raises(TypeError, match="tensors and plain data only, got object"):
        digest({"a": object()})
