/* The CRC-32 of n zero bytes (kp_zeros_crc, kp_zero_table; _kernel.h), compiled into each module
 * that needs it: _kernel (the CRC words of taken rows, crc.py) and _encode (_frame.c's lanes,
 * which fold a payload from register 0 and add this to get its CRC-32). kp_zeros_init fills the
 * tables once, at the module's load.
 */
#include "_kernel.h"

/* --- CRC-32 of runs of zero bytes ---------------------------------------------------------
 * zlib's reflected CRC-32 (polynomial 0xEDB88320). Feeding n zero bytes multiplies the register
 * by x^(8n) modulo the polynomial; zeros_crc(n) = ~(~0 * x^(8n)). A table serves the payload
 * sizes that occur in practice; longer ones square-and-multiply.
 */
#define POLY 0xEDB88320u
static uint32_t byte_table[256];
uint32_t kp_zero_table[KP_ZERO_TABLE];
static uint32_t x2n[64]; /* x^(2^k) mod P */

static uint32_t mulmod(uint32_t a, uint32_t b)
{
    /* a * b mod P, bit 31 being x^0 (reflected) */
    uint32_t product = 0;
    for (uint32_t m = 1u << 31; m; m >>= 1) {
        if (a & m)
            product ^= b;
        b = (b & 1) ? (b >> 1) ^ POLY : b >> 1;
    }
    return product;
}

uint32_t kp_zeros_crc(int64_t n)
{
    if (n < KP_ZERO_TABLE)
        return kp_zero_table[n];
    uint64_t bits = (uint64_t)n * 8;
    uint32_t reg = 0xFFFFFFFFu;
    for (int k = 0; bits; k++, bits >>= 1)
        if (bits & 1)
            reg = mulmod(x2n[k], reg);
    return ~reg;
}

void kp_zeros_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int j = 0; j < 8; j++)
            c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        byte_table[i] = c;
    }
    uint32_t reg = 0xFFFFFFFFu;
    for (int n = 0; n < KP_ZERO_TABLE; n++) {
        kp_zero_table[n] = ~reg;
        reg = (reg >> 8) ^ byte_table[reg & 0xFF];
    }
    x2n[0] = 1u << 30; /* x^1 */
    for (int k = 1; k < 64; k++)
        x2n[k] = mulmod(x2n[k - 1], x2n[k - 1]);
}
