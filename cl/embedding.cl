/*
 * embedding.cl - token and positional embeddings gathered into rows.
 *
 * out[b, i, c] = scale tok[tokens[b, i], c] + pos[i + pos_offset, c] (pos only
 * when has_pos) for i below lengths[b]; rows past a length are 0 and their
 * tokens are never read. Token ids are checked on the host before upload.
 * Global: (d, batch * n).
 */
kernel void embed_tokens(global const long *tokens, global const float *tok, global const float *pos, int has_pos,
                         int pos_offset, float scale, global float *out, int d, int n, global const int *lengths)
{
    const int c = get_global_id(0);
    if (c >= d) return;
    const ulong row = get_global_id(1);
    const int i = (int)(row % (ulong)n);
    global float *o = out + row * d + c;
    if (i >= lengths[row / (ulong)n]) {
        *o = 0.0f;
        return;
    }
    float v = scale * tok[tokens[row] * d + c];
    if (has_pos) v += pos[(ulong)(i + pos_offset) * d + c];
    *o = v;
}
