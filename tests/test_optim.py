"""ASGD as the trainer builds it: torch's default on the CPU (which trained the committed runs), capturable on
CUDA (no host sync per parameter), the two giving the same iterates and averages to a tolerance."""
import pytest
import torch

from lmcourse.training.optim import averaged_weights, make_optimizer, set_lr


def _run(device: str, steps: int = 25, lr: float = 0.5) -> tuple:
    """``steps`` ASGD steps on a least-squares problem; the final weights, their averages and the optimizer."""
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(64, 8, generator=g), torch.randn(64, generator=g)  # (N, D), (N,)
    theta = torch.nn.Parameter(torch.zeros(8, device=device))  # (D,)
    optimizer = make_optimizer("asgd", [theta], lr=lr)
    X, y = X.to(device), y.to(device)
    for k in range(steps):
        if k == 10:
            set_lr(optimizer, lr / 2)  # NT-ASGD and variable BPTT change the rate mid-run
        optimizer.zero_grad()
        ((X @ theta - y) ** 2).mean().backward()
        optimizer.step()
    with averaged_weights(optimizer, [theta]) as averaged:
        mean = theta.detach().clone()
    assert averaged
    return theta.detach().cpu(), mean.cpu(), optimizer


def test_on_the_cpu_asgd_is_torchs_default():
    theta, mean, optimizer = _run("cpu")
    group = optimizer.param_groups[0]
    assert isinstance(optimizer, torch.optim.ASGD) and not group["capturable"]
    assert group["t0"] == 0 and group["lambd"] == 0
    assert not torch.allclose(theta, mean)  # the average lags the iterate


@pytest.mark.cuda
def test_on_cuda_asgd_is_capturable_and_agrees_with_the_cpu():
    theta_cpu, mean_cpu, _ = _run("cpu")
    theta_gpu, mean_gpu, optimizer = _run("cuda")
    assert optimizer.param_groups[0]["capturable"]
    state = next(iter(optimizer.state.values()))
    assert all(state[k].is_cuda for k in ("step", "eta", "mu", "ax"))  # nothing read back to the host
    torch.testing.assert_close(theta_gpu, theta_cpu, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(mean_gpu, mean_cpu, rtol=1e-4, atol=1e-5)
