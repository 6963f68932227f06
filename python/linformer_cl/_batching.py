"""Many Triton requests as one forward, each answered as if it ran alone.

Each request's input is checked on its own first, so that a bad one gets an
error naming its problem and never takes the good ones of its batch down. The
good ones are padded to the longest and run as one forward with `lengths`:
the library never reads a padded row, so each answer is the request's own.
"""
import numpy as np


def request_problem(array, info):
    """None when the model can run this request's input, else what is wrong with it."""
    name = "tokens" if info.takes_tokens else "x"
    b, n = array.shape[:2]
    if b < 1:
        return f"{name} holds no sequence (batch 0)"
    if n < 1:
        return f"{name} has n = 0 rows: every sequence needs at least one"
    if n > info.max_seq_len:
        return f"{name} has n = {n} rows, above the model's max_seq_len {info.max_seq_len}"
    if info.takes_tokens:
        low, high = int(array.min()), int(array.max())
        if low < 0 or high >= info.vocab:
            return f"tokens hold ids {low} to {high}, outside the vocabulary [0, {info.vocab - 1}]"
    elif not np.isfinite(array).all():
        return "x holds NaN or infinite values"
    return None


def forward_padded(model, arrays):
    """Runs every array ([b_i, n_i, ...], all of one dtype) in one forward; the outputs in the same order."""
    longest = max(a.shape[1] for a in arrays)
    rows = sum(a.shape[0] for a in arrays)
    batch = np.zeros((rows, longest) + arrays[0].shape[2:], dtype=arrays[0].dtype)
    lengths = np.empty(rows, dtype=np.int32)
    starts = np.cumsum([0] + [a.shape[0] for a in arrays])
    for a, start in zip(arrays, starts):
        batch[start:start + a.shape[0], :a.shape[1]] = a
        lengths[start:start + a.shape[0]] = a.shape[1]
    y = model(batch, lengths=lengths)
    return [y[start:start + a.shape[0], :a.shape[1]] for a, start in zip(arrays, starts)]
