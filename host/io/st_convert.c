/* st_convert.c - a safetensors tensor's little-endian data to float or int64:
 * f32, f16, bf16 and f64 to float; i32 and i64 to int64. */
#include <string.h>

#include "runtime.h"
#include "le_bytes.h"
#include "safetensors.h"

#define FAIL(status, ...) lf__fail_buf(msg, msg_size, (status), __VA_ARGS__)

static float f32_from_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* IEEE half to float; every half is exactly a float. */
static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0) { /* zero or subnormal: mant * 2^-24 */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    if (exp == 31) /* inf, or NaN keeping its payload */
        return f32_from_bits(sign | 0x7f800000u | mant << 13);
    return f32_from_bits(sign | (exp + 127 - 15) << 23 | mant << 13);
}

lf_status lf_st_to_f32(const lf_st_tensor *t, float *out, char *msg, size_t msg_size)
{
    if (!t || (!out && t->count)) return FAIL(LF_ERR_ARGUMENT, "lf_st_to_f32: tensor or out is NULL");
    const uint8_t *p = t->data;
    size_t n = t->count;
    switch (t->dtype) {
    case LF_ST_F32:
        for (size_t i = 0; i < n; i++) out[i] = f32_from_bits(ld32(p + 4 * i));
        return LF_OK;
    case LF_ST_F16:
        for (size_t i = 0; i < n; i++) out[i] = f16_to_f32(ld16(p + 2 * i));
        return LF_OK;
    case LF_ST_BF16: /* the top half of an f32 */
        for (size_t i = 0; i < n; i++) out[i] = f32_from_bits((uint32_t)ld16(p + 2 * i) << 16);
        return LF_OK;
    case LF_ST_F64:
        for (size_t i = 0; i < n; i++) {
            uint64_t bits = lf__st_ld64(p + 8 * i);
            double d;
            memcpy(&d, &bits, sizeof d);
            out[i] = (float)d;
        }
        return LF_OK;
    default:
        return FAIL(LF_ERR_FORMAT, "tensor \"%s\" is %s, not a float type", t->name,
                    lf_st_dtype_name(t->dtype));
    }
}

lf_status lf_st_to_i64(const lf_st_tensor *t, int64_t *out, char *msg, size_t msg_size)
{
    if (!t || (!out && t->count)) return FAIL(LF_ERR_ARGUMENT, "lf_st_to_i64: tensor or out is NULL");
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case LF_ST_I32:
        for (size_t i = 0; i < t->count; i++) {
            uint32_t bits = ld32(p + 4 * i);
            int32_t v;
            memcpy(&v, &bits, sizeof v); /* two's complement, no conversion rules involved */
            out[i] = v;
        }
        return LF_OK;
    case LF_ST_I64:
        for (size_t i = 0; i < t->count; i++) {
            uint64_t bits = lf__st_ld64(p + 8 * i);
            memcpy(&out[i], &bits, sizeof bits);
        }
        return LF_OK;
    default:
        return FAIL(LF_ERR_FORMAT, "tensor \"%s\" is %s, not an integer type", t->name,
                    lf_st_dtype_name(t->dtype));
    }
}
