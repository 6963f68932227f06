/*
 * causal_pv.cl - the diagonal blocks of causal attention's P V (dense mode).
 * Row i of a block of `block` rows that starts at r0 = i / block * block:
 *
 *   o[h, i, c] (+)= sum over j in [r0, i] of p[h, i, j] v[h, j, c]
 *
 * adding to o where r0 > 0 (a GEMM over the keys before r0 wrote it first)
 * and writing it where r0 is 0. Only the keys a query sees are read, so an inf
 * or NaN in a later value row never meets its weight of 0, as it would in a
 * GEMM over the whole block (0 x inf is NaN). Global (d_head, rows, heads).
 */
kernel void causal_pv_diagonal(global const float *p, ulong p_off, int p_ld, ulong p_hstride,
                               global const float *v, ulong v_off, int v_ld, ulong v_hstride,
                               global float *o, ulong o_off, int o_ld, ulong o_hstride, int block, int d_head,
                               int rows)
{
    const int c = get_global_id(0), i = get_global_id(1), h = get_global_id(2);
    if (c >= d_head || i >= rows) return;
    const int r0 = i / block * block;
    const global float *pi = p + p_off + h * p_hstride + (ulong)i * p_ld;
    const global float *vc = v + v_off + h * v_hstride + c;
    float acc = 0.0f;
    for (int j = r0; j <= i; j++) acc += pi[j] * vc[(ulong)j * v_ld];
    global float *out = o + o_off + h * o_hstride + (ulong)i * o_ld + c;
    *out = r0 > 0 ? *out + acc : acc;
}
