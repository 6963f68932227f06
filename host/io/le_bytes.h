/* le_bytes.h - little-endian integers read byte by byte, so any alignment and
 * any host byte order work: the header length (safetensors.c) and the tensors'
 * data (st_convert.c). */
#ifndef LF_LE_BYTES_H
#define LF_LE_BYTES_H

#include <stdint.h>

static inline uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t lf__st_ld64(const uint8_t *p) { return ld32(p) | (uint64_t)ld32(p + 4) << 32; }

#endif
