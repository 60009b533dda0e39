"""The heads beside the cache: every head's weights by distance over a stream read in chunks, the copy
shares, and the explorer's picture."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from lmcourse.adapt.cache import attention as cache_attention  # noqa: E402
from lmcourse.networks.attention import allowed_positions  # noqa: E402
from lmcourse.widgets.heads_explorer import HeadsExplorer, cache_copy_share, copy_share, head_weights  # noqa: E402
from tests.test_transformer import V, small  # noqa: E402

EOS = V - 1


def test_weights_by_distance_match_a_whole_read():
    model = small(window=5)
    tokens = torch.randint(0, V, (40,), generator=torch.Generator().manual_seed(3))
    a, h = head_weights(model, tokens, chunk=7)  # (2, 4, 40, 6)
    assert torch.allclose(a.sum(-1), torch.ones(2, 4, 40), atol=1e-5)
    model.attention_weights(True)
    model(torch.cat([torch.tensor([EOS]), tokens[:-1]]).view(-1, 1))
    whole = model.blocks[1].attn.weights[0]  # (4, 40, 40)
    model.attention_weights(False)
    t = 30
    assert torch.allclose(a[1, :, t], whole[:, t, t - 5:t + 1].flip(-1), atol=1e-5)
    assert torch.allclose(h, torch.cat([g for _, g in model.stream(tokens)]), atol=1e-5)


def test_copy_share_is_the_weight_on_earlier_inputs_equal_to_the_target():
    tokens = torch.tensor([1, 2, 3, 1, 2, 3, 1, 2])  # inputs: <eos> 1 2 3 1 2 3 1
    w = 3
    weights = torch.zeros(1, 2, len(tokens), w + 1)
    inputs = torch.cat([torch.tensor([EOS]), tokens[:-1]])
    for t in range(len(tokens)):
        for d in range(1, w + 1):
            if t - d >= 0 and inputs[t - d] == tokens[t]:
                weights[0, 0, t, d] = 1.0  # head 0 puts everything on the coming word
    weights[0, 1, :, 0] = 1.0  # head 1 always reads the current input
    share, reach = copy_share(weights, tokens, EOS)
    assert reach == 5 and share[0, 0] == 1.0 and share[0, 1] == 0.0


def test_cache_share_reads_the_caches_own_weights():
    g = torch.Generator().manual_seed(1)
    h = torch.randn(30, 4, generator=g)
    tokens = torch.randint(0, 3, (30,), generator=g)
    share, reach = cache_copy_share(h, tokens, theta=2.0, window=30)
    expected = []
    for t in range(1, 30):
        i, a = cache_attention(h, t, 2.0, 30)
        hit = tokens[i] == tokens[t]
        if hit.any():
            expected.append(float(a[hit].sum()))
    assert reach == len(expected) and share == pytest.approx(sum(expected) / len(expected), abs=1e-6)


def test_the_explorer_draws_the_cache_and_every_head():
    model = small(window=5)
    tokens = torch.randint(0, V, (60,), generator=torch.Generator().manual_seed(2))
    explorer = HeadsExplorer(model, tokens, theta=1.0)
    grid = explorer.grid(20)
    assert grid.shape == (1 + 2 * 4, 6) and torch.allclose(grid[1:].sum(1), torch.ones(8), atol=1e-5)
    # the cache's key i votes for the input u_{i+1}: its w keys land on distances 0 .. w - 1, never w
    assert float(grid[0].sum()) == pytest.approx(1.0, abs=1e-5) and float(grid[0, -1]) == 0.0
    assert explorer.figure(20).axes[0].get_title().startswith("position 20")
    with pytest.raises(ValueError, match="outside the stream of 60 positions"):
        explorer.grid(60)
    shown = explorer.widget(20)
    assert isinstance(shown.png, bytes) and shown.png.startswith(b"\x89PNG")


def test_a_span_draws_only_the_last_inputs_in_readable_type():
    import matplotlib.pyplot as plt

    model = small(window=5)
    tokens = torch.randint(0, V, (60,), generator=torch.Generator().manual_seed(2))
    explorer = HeadsExplorer(model, tokens, theta=1.0, span=3)
    fig = explorer.figure(20)
    ax = fig.axes[0]
    assert len(ax.get_xticklabels()) == 3 and ax.images[0].get_array().shape == (1 + 2 * 4, 3)
    assert min(label.get_fontsize() for label in ax.get_xticklabels() + ax.get_yticklabels()) >= 10
    plt.close(fig)


def test_allowed_positions_of_the_explorer_follow_the_model_window():
    assert allowed_positions(4, 0, 2).sum(1).tolist() == [1, 2, 3, 3]
