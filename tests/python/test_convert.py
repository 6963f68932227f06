#!/usr/bin/env python3
"""python -m linformer_cl.convert on real checkpoints written by torch.save.

A fairseq-style checkpoint (its "model" state dict with every layer naming
the one layerwise compress_layer as its compress_k, and its "args") converts
to one copy of the projection with the config in __metadata__, and
`linformer run` serves the result; a lucidrains state dict under a prefix
converts with --prefix; contradicting flags, a missing head count and a file
that is no checkpoint are errors with a clear message.
Hostile and careless checkpoints are in test_convert_safety.py.
LF_TOOL_PATH names the program (default: the build's).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import unittest

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")
from torch import nn  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from conftest import TOOL  # noqa: E402


class Attention(nn.Module):
    def __init__(self, d, k, n, shared):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))
        self.compress_k = shared  # fairseq's layerwise sharing: the same module in every layer


class Layer(nn.Module):
    def __init__(self, d, k, n, shared):
        super().__init__()
        self.self_attn = Attention(d, k, n, shared)
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.final_layer_norm = nn.LayerNorm(d)


class SentenceEncoder(nn.Module):
    def __init__(self, d=8, k=3, n=10, layers=2):
        super().__init__()
        self.compress_layer = nn.Linear(n, k, bias=False)
        self.layers = nn.ModuleList(Layer(d, k, n, self.compress_layer) for _ in range(layers))
        self.register_buffer("version", torch.tensor([3.0]))


def run(*args):
    return subprocess.run([sys.executable, "-m", "linformer_cl.convert", *args], capture_output=True, text=True)


class Convert(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = lambda name: os.path.join(self.dir.name, name)

    def tearDown(self):
        self.dir.cleanup()

    def fairseq_checkpoint(self, heads=2):
        torch.manual_seed(0)
        model = nn.Module()
        model.encoder = nn.Module()
        model.encoder.sentence_encoder = SentenceEncoder()
        args = argparse.Namespace(encoder_attention_heads=heads, activation_fn="gelu_accurate",
                                  encoder_normalize_before=False)
        torch.save({"model": model.state_dict(), "args": args}, self.path("fairseq.pt"))
        return self.path("fairseq.pt")

    def test_fairseq_checkpoint_keeps_one_layerwise_projection_and_its_config(self):
        out = self.path("fairseq.safetensors")
        r = run(self.fairseq_checkpoint(), out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with safe_open(out, "pt") as f:
            names, meta = set(f.keys()), f.metadata()
        stem = "encoder.sentence_encoder."
        self.assertIn(stem + "compress_layer.weight", names)
        self.assertFalse([n for n in names if "compress_k" in n or n.endswith("version")], names)
        self.assertEqual(meta["heads"], "2")
        self.assertEqual(meta["activation"], "gelu_tanh")
        self.assertEqual(meta["norm"], "post")
        if TOOL:
            save_file({"x": torch.randn(2, 7, 8)}, self.path("x.safetensors"))
            r = subprocess.run([TOOL, "run", "--model", out, "--input", self.path("x.safetensors"), "--output",
                                self.path("y.safetensors")], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("fairseq encoder: 2 layers", r.stderr)
            self.assertIn("one projection for all layers", r.stderr)

    def test_a_flag_contradicting_the_checkpoint_is_an_error(self):
        r = run(self.fairseq_checkpoint(heads=2), self.path("out.safetensors"), "--heads", "4")
        self.assertEqual(r.returncode, 1)
        self.assertIn("--heads 4 was given but the checkpoint says 2", r.stderr)
        r = run(self.fairseq_checkpoint(), self.path("out.safetensors"), "--norm", "pre")
        self.assertIn("--norm pre was given but the checkpoint says post", r.stderr)

    def test_state_dict_under_a_prefix_and_without_a_head_count(self):
        layer = nn.Linear(4, 6, bias=False)
        torch.save({"model.net.layers.0.0.fn.to_q.weight": layer.weight.detach(), "other.w": torch.zeros(2)},
                   self.path("sd.pt"))
        r = run(self.path("sd.pt"), self.path("sd.safetensors"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("give --heads", r.stderr)
        r = run(self.path("sd.pt"), self.path("sd.safetensors"), "--heads", "3", "--prefix", "model.")
        self.assertEqual(r.returncode, 0, r.stderr)
        with safe_open(self.path("sd.safetensors"), "pt") as f:
            self.assertEqual(set(f.keys()), {"net.layers.0.0.fn.to_q.weight"})
        r = run(self.path("sd.pt"), self.path("sd.safetensors"), "--heads", "4")
        self.assertIn("6 query rows do not split into 4 heads", r.stderr)

    def test_a_file_that_is_no_checkpoint(self):
        with open(self.path("junk.pt"), "wb") as f:
            f.write(b"not a checkpoint")
        r = run(self.path("junk.pt"), self.path("out.safetensors"), "--heads", "2")
        self.assertEqual(r.returncode, 1)
        self.assertTrue(r.stderr.startswith("linformer_cl.convert: "), r.stderr)
        self.assertNotIn("Traceback", r.stderr)

