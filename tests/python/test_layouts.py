"""The state-dict layouts as the package reads them from the library (lf_layout_tensors)."""
import pytest

from linformer_cl.errors import ArgumentError
from linformer_cl.layouts import LAYER, MODEL, tensors


def test_rows_name_the_tensors_and_their_storage():
    rows = {weight: (name, transposed, required) for weight, name, transposed, required in
            tensors("lucidrains-attention", LAYER)}
    assert rows["e"] == ("proj_k", True, True) and rows["f"] == ("proj_v", True, False)
    assert rows["wq"] == ("to_q.weight", False, True) and rows["bq"] == ("to_q.bias", False, False)
    assert ("tok", "token_emb.weight", False, False) in tensors("lucidrains-lm", MODEL)
    assert ("w1", "fc1.weight", False, True) in tensors("fairseq", LAYER)


@pytest.mark.parametrize("layout,part,named", [("lucid", LAYER, 'layout "lucid" is not one of'),
                                               ("fairseq", 5, "part 5")])
def test_an_unknown_layout_or_part_is_named(layout, part, named):
    with pytest.raises(ArgumentError, match=named):
        tensors(layout, part)
