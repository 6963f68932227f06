"""Where each library weight sits in a PyTorch state dict: one table per layout.

A row is (library name, state-dict name, stored): "as is" tensors are handed to
the shaped setters with their own shape; "transposed" ones are stored as the
transpose of what the library takes (lucidrains' proj_k is E^T, [seq_len, k]).
Nothing is transposed anywhere else: from_torch reads these tables only. The
library's file loaders read the same names from their own table (host/layouts.c);
tests/test_layouts.c checks that the two agree.
"""
AS_IS, TRANSPOSED = "as is", "transposed"

# lucidrains' LinformerSelfAttention, under the layer's own prefix.
LUCIDRAINS_ATTENTION = (
    ("wq", "to_q.weight", AS_IS), ("bq", "to_q.bias", AS_IS),
    ("wk", "to_k.weight", AS_IS), ("bk", "to_k.bias", AS_IS),
    ("wv", "to_v.weight", AS_IS), ("bv", "to_v.bias", AS_IS),
    ("wo", "to_out.weight", AS_IS), ("bo", "to_out.bias", AS_IS),
    ("e", "proj_k", TRANSPOSED), ("f", "proj_v", TRANSPOSED),
)

# One block of lucidrains' Linformer, under "net.layers.{i}.": PreNorm(attention), PreNorm(FeedForward).
LUCIDRAINS_BLOCK = (
    ("ln1_g", "0.norm.weight", AS_IS), ("ln1_b", "0.norm.bias", AS_IS),
    ("ln2_g", "1.norm.weight", AS_IS), ("ln2_b", "1.norm.bias", AS_IS),
    ("w1", "1.fn.w1.weight", AS_IS), ("b1", "1.fn.w1.bias", AS_IS),
    ("w2", "1.fn.w2.weight", AS_IS), ("b2", "1.fn.w2.bias", AS_IS),
) + tuple((name, "0.fn." + tensor, stored) for name, tensor, stored in LUCIDRAINS_ATTENTION)

# LinformerLM's own tensors (its Linformer is under "linformer.").
LUCIDRAINS_LM = (
    ("tok", "token_emb.weight", AS_IS), ("pos", "pos_emb.weight", AS_IS),
    ("head_w", "to_logits.weight", AS_IS), ("head_b", "to_logits.bias", AS_IS),
)

# One layer of fairseq's Linformer sentence encoder, under "layers.{i}.".
FAIRSEQ_LAYER = (
    ("wq", "self_attn.q_proj.weight", AS_IS), ("bq", "self_attn.q_proj.bias", AS_IS),
    ("wk", "self_attn.k_proj.weight", AS_IS), ("bk", "self_attn.k_proj.bias", AS_IS),
    ("wv", "self_attn.v_proj.weight", AS_IS), ("bv", "self_attn.v_proj.bias", AS_IS),
    ("wo", "self_attn.out_proj.weight", AS_IS), ("bo", "self_attn.out_proj.bias", AS_IS),
    ("e", "self_attn.compress_k.weight", AS_IS), ("f", "self_attn.compress_v.weight", AS_IS),
    ("ln1_g", "self_attn_layer_norm.weight", AS_IS), ("ln1_b", "self_attn_layer_norm.bias", AS_IS),
    ("ln2_g", "final_layer_norm.weight", AS_IS), ("ln2_b", "final_layer_norm.bias", AS_IS),
    ("w1", "fc1.weight", AS_IS), ("b1", "fc1.bias", AS_IS),
    ("w2", "fc2.weight", AS_IS), ("b2", "fc2.bias", AS_IS),
)

# The fairseq encoder's own tensors.
FAIRSEQ_MODEL = (
    ("tok", "embed_tokens.weight", AS_IS), ("pos", "embed_positions.weight", AS_IS),
    ("emb_ln_g", "layernorm_embedding.weight", AS_IS), ("emb_ln_b", "layernorm_embedding.bias", AS_IS),
    ("emb_ln_g", "emb_layer_norm.weight", AS_IS), ("emb_ln_b", "emb_layer_norm.bias", AS_IS),
    ("final_ln_g", "layer_norm.weight", AS_IS), ("final_ln_b", "layer_norm.bias", AS_IS),
    ("shared_e", "compress_layer.weight", AS_IS),
)
