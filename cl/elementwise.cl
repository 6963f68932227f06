/*
 * elementwise.cl - bias and row masks.
 *
 * y[r, c] += bias[b_off + c] for the `cols` columns at y + y_off (row stride ld); with
 * mask_len, row r (sequence r / rows_per_seq, position r % rows_per_seq) at or
 * past its sequence's length is set to exactly 0 instead.
 * Global: (cols, rows).
 */
kernel void bias_rows(global float *y, ulong y_off, int ld, int cols, global const float *bias,
                      ulong b_off, int has_bias, global const int *lengths, int rows_per_seq, int mask_len)
{
    const int c = get_global_id(0), r = get_global_id(1);
    if (c >= cols) return;
    global float *p = y + y_off + (ulong)r * ld + c;
    if (mask_len && r % rows_per_seq >= lengths[r / rows_per_seq]) *p = 0.0f;
    else if (has_bias) *p += bias[b_off + c];
}
