"""from_torch() of every fixture configuration of lucidrains' linformer, within 1e-5 of PyTorch in float64.

The configurations are those tests/data/make_*_fixtures.py write (sharing
modes, one_kv_head, dim_head, stored dtypes, Linformer depth 3, LinformerLM,
mixed lengths), built afresh from random weights.
"""
import copy
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("linformer")
from linformer import Linformer, LinformerLM, LinformerSelfAttention  # noqa: E402

import linformer_cl  # noqa: E402
from conftest import DATA, relative_error  # noqa: E402

sys.path.insert(0, DATA)
import make_model_fixtures  # noqa: E402
import make_pytorch_fixtures  # noqa: E402

LAYERS = make_pytorch_fixtures.FIXTURES
MODELS = make_model_fixtures.FIXTURES


@pytest.mark.parametrize("name,args,batch,n,dtype", LAYERS, ids=[f[0] for f in LAYERS])
def test_attention_layer(device, name, args, batch, n, dtype):
    torch.manual_seed(11)
    module = LinformerSelfAttention(**args).eval().to(dtype)
    x = torch.randn(batch, n, args["dim"], dtype=torch.float64)
    with torch.no_grad():
        want = copy.deepcopy(module).double()(x)
    with linformer_cl.from_torch(module, device=device) as model:
        assert (model.info.kind, model.info.heads, model.info.k) == ("layer", args["heads"], args["k"])
        y = model(x.float().numpy())
    assert relative_error(y, want.numpy()) <= 1e-5


@pytest.mark.parametrize("name,cls,args,batch,n,lengths", MODELS, ids=[f[0] for f in MODELS])
def test_model(device, name, cls, args, batch, n, lengths):
    torch.manual_seed(12)
    module = cls(**args).eval()
    if cls is LinformerLM:
        inputs = torch.randint(0, args["num_tokens"], (batch, n))
        want = make_model_fixtures.forward(copy.deepcopy(module).double(), inputs, lengths)
    else:
        inputs = torch.randn(batch, n, args["dim"])
        want = make_model_fixtures.forward(copy.deepcopy(module).double(), inputs.double(), lengths)
    with linformer_cl.from_torch(module, device=device) as model:
        assert model.info.layers == args["depth"]
        y = model(inputs, lengths=lengths)  # a tensor in, a tensor out
    assert isinstance(y, torch.Tensor)
    assert relative_error(y.numpy(), want.numpy()) <= 1e-5


def test_layers_with_their_own_k(device):
    torch.manual_seed(13)
    module = Linformer(dim=12, seq_len=20, depth=3, k=5, heads=3).eval()
    for i, k in enumerate((3, 5, 7)):  # lucidrains builds one k; a model may hold several
        att = module.net.layers[i][0].fn
        att.k, att.proj_k, att.proj_v = k, torch.nn.Parameter(torch.randn(20, k)), torch.nn.Parameter(torch.randn(20, k))
    x = torch.randn(2, 20, 12)
    with torch.no_grad():
        want = copy.deepcopy(module).double()(x.double())
    with linformer_cl.from_torch(module, device=device) as model:
        assert model.info.k == 3
        assert relative_error(model(x.numpy()), want.numpy()) <= 1e-5


def test_a_tensor_that_contradicts_the_module_is_refused():
    module = LinformerSelfAttention(dim=16, seq_len=20, k=5, heads=2)
    module.proj_k = torch.nn.Parameter(torch.randn(5, 20))  # E as the library takes it, not as lucidrains stores it
    with pytest.raises(linformer_cl.ArgumentError, match=r"proj_k.*\[5, 20\], got \[20, 5\]"):
        linformer_cl.from_torch(module, device="pocl")


def test_unsupported_modules_are_named():
    with pytest.raises(linformer_cl.ArgumentError, match="not Linear"):
        linformer_cl.from_torch(torch.nn.Linear(2, 2))
    with pytest.raises(linformer_cl.UnsupportedError, match="reversible"):
        linformer_cl.from_torch(Linformer(dim=8, seq_len=8, depth=1, k=2, heads=2, reversible=True))
    with pytest.raises(linformer_cl.ArgumentError, match="linformer.net.layers is empty"):
        linformer_cl.from_torch(LinformerLM(num_tokens=9, dim=8, seq_len=8, depth=0, k=2, heads=2))
    module = Linformer(dim=8, seq_len=8, depth=2, k=2, heads=2)
    module.net.layers[1][1].norm = torch.nn.Identity()
    with pytest.raises(linformer_cl.UnsupportedError, match=r"net.layers.1.1.norm is Identity"):
        linformer_cl.from_torch(module)
