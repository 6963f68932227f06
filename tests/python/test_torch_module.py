"""linformer_cl.torch.Module: the same output as the lucidrains module, and a backward refused clearly."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
linformer = pytest.importorskip("linformer")

from linformer_cl.torch import Module  # noqa: E402
from conftest import relative_error  # noqa: E402


@pytest.fixture
def pair():
    torch.manual_seed(21)
    lucid = linformer.Linformer(dim=12, seq_len=16, depth=2, k=4, heads=2).eval()
    wrapped = Module.from_torch(lucid, device="pocl")
    yield lucid, wrapped
    wrapped.close()


def test_drop_in_for_the_module_in_eval_mode(pair):
    lucid, wrapped = pair
    x = torch.randn(2, 16, 12)
    with torch.no_grad():
        want = lucid(x)
    y = torch.nn.Sequential(wrapped, torch.nn.Identity())(x)
    assert isinstance(y, torch.Tensor) and relative_error(y.numpy(), want.numpy()) <= 1e-5


def test_backward_says_inference_only_in_either_mode(pair):
    _, wrapped = pair
    x = torch.randn(1, 16, 12, requires_grad=True)
    for train in (False, True):
        wrapped.train(train)
        with pytest.raises(RuntimeError, match="inference only"):
            wrapped(x).sum().backward()
    wrapped.eval()
    assert wrapped(x.detach()).shape == (1, 16, 12)


def test_a_numpy_array_or_a_bfloat16_tensor_is_refused_by_name(pair):
    import linformer_cl
    _, wrapped = pair
    x = torch.randn(1, 16, 12)
    with pytest.raises(linformer_cl.ArgumentError, match="x must be a torch tensor, got ndarray"):
        wrapped(x.numpy())
    with pytest.raises(linformer_cl.ArgumentError, match="x must be float32, got torch.bfloat16"):
        wrapped(x.bfloat16())
    np.testing.assert_array_equal(wrapped(x).numpy(), wrapped.model(x.numpy()))
