/* gzip wrappers of Kafka 0.7 message sets, a whole fetch in one call: the fast lane's gzip
 * part (kafka_pyspark/_messages/flat.py). An optional module of its own, linked statically with
 * libdeflate (pyproject.toml), so that a wheel needs nothing at run time and a build without
 * libdeflate still installs: gzip sets then take flat.py's ISA-L path.
 *
 * For every gzip wrapper of an outer set: its CRC32, its member's deflate body inflated by
 * libdeflate straight into the value column (one call, without the GIL, bounded by the room
 * left, the member's ISIZE and max.decompressed.size), the member's trailer checked (CRC32 of
 * what it inflated to, ISIZE), the inner set walked and compacted there in place by the
 * kernel's own `take`, and the rows' CRC words checked by the kernel's own check, one CRC call
 * over them while they are in cache (kafka_pyspark/_messages/crc.py explains the words): both
 * reached through the capsule _kernel exports (_kernel.h), so there is one walker and one
 * check for all lanes. CRCs by the engine the caller names (kp_crc_parse): ISA-L's called
 * directly (CRC_ISAL; it uses VPCLMULQDQ where the CPU has it, faster than libdeflate's on
 * large buffers), python-isal's called back, or libdeflate's own (CRC_LIBDEFLATE).
 *
 * The lane decides nothing: a payload that is not exactly one gzip member with Java's header
 * shape (1f 8b 08, no flags) and nothing after it, a deflate stream that is not one block with
 * a header zlib would write (below), an ISIZE that is not the size inflated, a
 * CRC mismatch, an inflate error, a budget or room exceeded, an inner set that is not whole
 * plain messages: all stop it with a status, and flat.py hands the set to the general path,
 * which raises the exact error (or decodes what this lane does not: several members, trailing
 * bytes, header fields). Nothing here trusts a length: every record is checked against the
 * buffer it points into and every write against the room of its target.
 */
#include "_kernel.h" /* first: Python.h before the standard headers */

#include <libdeflate.h>

#define GZIP_HEADER_SIZE 10 /* 1f 8b | CM 8 | FLG | MTIME (4) | XFL | OS */
#define GZIP_TRAILER_SIZE 8 /* CRC32 of the data | ISIZE, both little-endian */

/* _kernel's walk into a sink, its set-up, the CRC engine's parsing and the rows' CRC check,
 * from its capsule (kernel_api) */
static const kp_capi_t *capi;

/* --- the deflate stream: one block, a header zlib's encoder could have written -------------
 * libdeflate accepts a few dynamic block headers that zlib and ISA-L (the general path) refuse:
 * HLIT above 286 or HDIST above 30 (codes declared, never used), and a code-length repeat that
 * runs past HLIT + HDIST. A lane that let them through would decode what the general path
 * refuses, and the two cannot be told apart after libdeflate's one call. So the lane takes a
 * member only when its deflate stream is one final block (BFINAL set in the first header: no
 * later header to check; zlib ends a block every 16K symbols, about 90 KB of JSON-like text,
 * so the wrappers of 200 such messages are one block; larger ones take flat.py's ISA-L path)
 * that is stored, fixed with symbols zlib accepts (checked here: libdeflate also reads the
 * fixed code's lit/len symbols 286 and 287), or dynamic with a header checked here by
 * zlib's rules and complete codes (zlib's encoder writes complete codes only; ISA-L and zlib
 * accept every header this accepts). Anything else goes to the general path. */

#define MAX_LITLEN 286
#define MAX_DIST 30
#define CL_CODES 19

typedef struct {
    const uint8_t *p, *end;
    uint64_t buf;
    int have, phantom; /* bits in buf; zero bits added past the end */
} bits_t;

static inline void refill(bits_t *b)
{
    if (b->end - b->p >= 8) { /* 56+ bits in buf, 8 bytes loaded at once */
        const uint8_t *q = b->p;
        uint64_t word = (uint64_t)le32(q) | (uint64_t)le32(q + 4) << 32;
        b->buf |= word << b->have;
        b->p += (63 - b->have) >> 3;
        b->have |= 56;
        return;
    }
    while (b->have <= 56) {
        uint64_t byte = 0;
        if (b->p < b->end)
            byte = *b->p++;
        else
            b->phantom += 8;
        b->buf |= byte << b->have;
        b->have += 8;
    }
}

/* Whether every bit taken so far was in the stream (none of the zeros past its end). */
static inline int within(const bits_t *b)
{
    return b->phantom <= b->have;
}

static inline uint32_t take_bits(bits_t *b, int n)
{
    if (b->have < n)
        refill(b);
    uint32_t v = (uint32_t)(b->buf & ((1u << n) - 1));
    b->buf >>= n;
    b->have -= n;
    return v;
}

/* Whether the code lengths len[0:n] (0: unused, at most `max`) make a complete prefix code. */
static int complete(const uint8_t *len, int n, int max)
{
    uint32_t sum = 0; /* without branches: the compiler vectorises it */
    for (int i = 0; i < n; i++)
        sum += ((1u << max) >> len[i]) & (0u - (len[i] != 0));
    return sum == 1u << max;
}

/* The prefix code of lengths len[0:n] (complete, at most `bits` long) as a lookup table of
 * 1 << bits entries (bits in stream order): symbol | length << 9. */
static void code_table(const uint8_t *len, int n, int bits, uint16_t *table)
{
    int code = 0;
    for (int l = 1; l <= bits; l++) {
        for (int sym = 0; sym < n; sym++) {
            if (len[sym] != l)
                continue;
            int rev = 0; /* Huffman codes go most significant bit first */
            for (int i = 0; i < l; i++)
                rev |= ((code >> i) & 1) << (l - 1 - i);
            for (int fill = rev; fill < 1 << bits; fill += 1 << l)
                table[fill] = (uint16_t)(sym | (l << 9));
            code++;
        }
        code <<= 1;
    }
}

/* The code lengths of a dynamic header (after HLIT, HDIST, HCLEN) into len[0:total]: 0, or -1
 * when zlib would refuse them (an incomplete code-length code, a bad repeat, an overrun). */
static int code_lengths(bits_t *b, int hclen, uint8_t *len, int total)
{
    static const uint8_t order[CL_CODES] = {16, 17, 18, 0, 8,  7, 9,  6, 10, 5,
                                            11, 4,  12, 3, 13, 2, 14, 1, 15};
    uint8_t cl[CL_CODES] = {0};
    uint16_t table[128];
    for (int i = 0; i < hclen; i++)
        cl[order[i]] = (uint8_t)take_bits(b, 3);
    if (!complete(cl, CL_CODES, 7))
        return -1;
    code_table(cl, CL_CODES, 7, table);
    for (int i = 0; i < total;) {
        if (b->have < 14) /* a code (7 bits at most) and its extra bits (7) */
            refill(b);
        uint16_t entry = table[b->buf & 127];
        int sym = entry & 0x1FF, rep;
        uint8_t value = 0;
        b->buf >>= entry >> 9;
        b->have -= entry >> 9;
        if (sym < 16) {
            len[i++] = (uint8_t)sym;
            continue;
        }
        if (sym == 16) {
            if (i == 0)
                return -1;
            value = len[i - 1];
            rep = 3 + (int)take_bits(b, 2);
        } else {
            rep = sym == 17 ? 3 + (int)take_bits(b, 3) : 11 + (int)take_bits(b, 7);
        }
        if (rep > total - i)
            return -1;
        memset(len + i, value, (size_t)rep);
        i += rep;
    }
    return 0;
}

/* The fixed code's lit/len symbols (RFC 1951 3.2.6) as code_table's 9-bit table: set up at
 * load. It has codes for symbols 286 and 287, which zlib and ISA-L refuse and libdeflate reads
 * as length 258 (and codes for distances 30 and 31, which all three refuse). */
#define FIXED_LITLEN 288
static uint16_t fixed_table[1 << 9];

static void fixed_init(void)
{
    uint8_t len[FIXED_LITLEN];
    memset(len, 8, 144);
    memset(len + 144, 9, 112);
    memset(len + 256, 7, 24);
    memset(len + 280, 8, 8);
    code_table(len, FIXED_LITLEN, 9, fixed_table);
}

/* Whether the rest of a fixed block (after its 3 header bits) ends within the stream and uses
 * only the symbols zlib accepts: lit/len 0..285, distances 0..29. Reads its codes, writes
 * nothing (the sizes and distances are libdeflate's to check). */
static int fixed_symbols_ok(bits_t *b)
{
    for (;;) {
        if (b->have < 9 + 5 + 5 + 13) /* a lit/len code, its extra bits, a distance, its extra */
            refill(b);
        uint16_t entry = fixed_table[b->buf & 511];
        int sym = entry & 0x1FF;
        b->buf >>= entry >> 9;
        b->have -= entry >> 9;
        if (!within(b) || sym > 285)
            return 0;
        if (sym == 256)
            return 1;
        if (sym < 256)
            continue;
        if (sym >= 265 && sym < 285)
            take_bits(b, (sym - 261) / 4);
        int dist = 0, code = (int)take_bits(b, 5); /* 5 bits, most significant first */
        for (int i = 0; i < 5; i++)
            dist |= ((code >> i) & 1) << (4 - i);
        if (dist >= MAX_DIST)
            return 0;
        if (dist >= 4)
            take_bits(b, dist / 2 - 1);
    }
}

/* Whether the deflate stream p[0:n] is one final block with a header (and, when fixed,
 * symbols) the general path reads the same (see above). A dynamic block: reads only its
 * header; a fixed one: its codes. */
static int one_plain_block(const uint8_t *p, size_t n)
{
    bits_t b = {p, p + n, 0, 0, 0};
    uint32_t head = take_bits(&b, 3); /* BFINAL, BTYPE */
    if (!(head & 1) || (head >> 1) == 3)
        return 0;
    if ((head >> 1) == 0)
        return within(&b); /* stored: nothing more to check here */
    if ((head >> 1) == 1)
        return fixed_symbols_ok(&b);
    int hlit = 257 + (int)take_bits(&b, 5), hdist = 1 + (int)take_bits(&b, 5);
    int hclen = 4 + (int)take_bits(&b, 4);
    uint8_t len[MAX_LITLEN + MAX_DIST];
    if (hlit > MAX_LITLEN || hdist > MAX_DIST || code_lengths(&b, hclen, len, hlit + hdist) < 0)
        return 0;
    return within(&b) && len[256] != 0 && complete(len, hlit, 15) &&
           complete(len + hlit, hdist, 15);
}

/* The ISIZE of a payload this lane inflates: one member with the header Java writes (no
 * FLG bits: no name, comment, extra field or header CRC), at most `limit`; else -1. */
static int64_t member_size(const uint8_t *p, int64_t n, int64_t limit)
{
    if (n < GZIP_HEADER_SIZE + GZIP_TRAILER_SIZE || p[0] != 0x1f || p[1] != 0x8b || p[2] != 8 ||
        p[3] != 0)
        return -1;
    int64_t isize = le32(p + n - 4);
    return isize <= limit ? isize : -1;
}

/* gzip_total(buf, recs, limit): the bytes the gzip wrappers of recs announce (their ISIZEs),
 * all together; -1 if one is not a gzip wrapper this lane inflates within `limit`. */
static PyObject *gzip_total(PyObject *self, PyObject *args)
{
    Py_buffer buf, recbuf;
    long long limit;
    if (!PyArg_ParseTuple(args, "y*y*L", &buf, &recbuf, &limit))
        return NULL;
    const rec_t *recs = (const rec_t *)recbuf.buf;
    Py_ssize_t n = recbuf.len / (Py_ssize_t)sizeof(rec_t);
    long long total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t size, isize = -1;
        const uint8_t *p = wrapper_payload(&recs[i], CODEC_GZIP, (const uint8_t *)buf.buf,
                                           buf.len, &size);
        if (p)
            isize = member_size(p, size, limit);
        if (isize < 0) {
            total = -1;
            break;
        }
        total += isize;
    }
    PyBuffer_Release(&buf);
    PyBuffer_Release(&recbuf);
    return PyLong_FromLongLong(total);
}

/* libdeflate's CRC-32 as the lanes call a C engine (CRC_LIBDEFLATE) */
static uint32_t deflate_crc(uint32_t init, const unsigned char *buf, uint64_t len)
{
    return (uint32_t)libdeflate_crc32(init, buf, (size_t)len);
}

typedef struct {
    const uint8_t *buf;
    Py_ssize_t len;
    const rec_t *recs;
    Py_ssize_t n;
    int64_t *counts;
    int verify;
    int64_t limit;
    kp_crc_t crc;
    struct libdeflate_decompressor *d;
} fetch_t;

/* Inflates the deflate body[0:n] of a member into out[0:isize]: 0 when it ends exactly at
 * the member's trailer and gives exactly isize bytes. Pure C: runs without the GIL. */
static int inflate_member(struct libdeflate_decompressor *d, const uint8_t *body, size_t n,
                          uint8_t *out, int64_t isize)
{
    size_t used = 0, written = 0;
    enum libdeflate_result rc;
    PyThreadState *ts = PyEval_SaveThread();
    rc = libdeflate_deflate_decompress_ex(d, body, n, out, (size_t)isize, &used, &written);
    PyEval_RestoreThread(ts);
    return rc == LIBDEFLATE_SUCCESS && used == n && written == (size_t)isize ? 0 : -1;
}

/* One wrapper: checked, inflated at the sink's end (its trailer checked: CRC32 and ISIZE) and
 * taken there in place; ST_END, the status that stops the lane, or -1 (raised by f->crc).
 * What needs no CRC comes first: a member this lane does not inflate (several deflate blocks,
 * say) stops it before a CRC of its wrapper that the ISA-L path would compute again. */
static int one_wrapper(const fetch_t *f, Py_ssize_t i, sink_t *s)
{
    const rec_t *r = &f->recs[i];
    int64_t size, isize = -1;
    const uint8_t *p = wrapper_payload(r, CODEC_GZIP, f->buf, f->len, &size);
    uint32_t crc;
    if (p)
        isize = member_size(p, size, f->limit);
    if (isize < 0 || isize > s->dcap - 4 - s->dpos) /* 4 bytes stay free for rows_ok */
        return ST_BAD_GZIP;
    const uint8_t *body = p + GZIP_HEADER_SIZE;
    size_t n = (size_t)(size - GZIP_HEADER_SIZE - GZIP_TRAILER_SIZE);
    if (!one_plain_block(body, n))
        return ST_BAD_GZIP;
    if (f->verify && kp_crc(&f->crc, p, size, 0, &crc) < 0)
        return -1;
    if (f->verify && crc != r->crc)
        return ST_BAD_CRC;
    Py_ssize_t start = s->dpos, end = start + (Py_ssize_t)isize, before = s->k;
    if (inflate_member(f->d, body, n, s->data + start, isize) < 0)
        return ST_BAD_GZIP;
    if (kp_crc(&f->crc, s->data + start, isize, 0, &crc) < 0)
        return -1;
    if (crc != le32(body + n))
        return ST_BAD_GZIP; /* the member's own CRC: the general path says so */
    long long value = 0;
    int status = capi->take(s->data, &start, end, end, s, &value);
    if (status != ST_END)
        return status;
    f->counts[i] = s->k - before;
    int ok = f->verify ? capi->rows_ok(s, before, s->k, &f->crc) : 1;
    return ok < 0 ? -1 : ok ? ST_END : ST_BAD_CRC;
}

/* gzip_fetch(buf, recs, data, dpos, offsets, words, k, counts, verify, limit, crc32)
 *     -> (status, i, dpos, k)
 * For every gzip wrapper recs[i] of buf, in order: its CRC32 checked (when verify), its
 * payload inflated (at most `limit` bytes) and taken into the sink at (dpos, k) (data,
 * offsets, words as for take), counts[i] = the rows it held, their CRCs checked (when
 * verify). CRCs by the engine crc32 (CRC_ISAL, CRC_LIBDEFLATE or a callable: kp_crc_parse).
 * Stops at the first wrapper i that is anything else (status ST_BAD_GZIP, ST_BAD_CRC or a
 * take status): the caller then decodes the set on the general path. */
static PyObject *gzip_fetch(PyObject *self, PyObject *args)
{
    Py_buffer buf, recbuf, data, offs, wbuf, cbuf;
    Py_ssize_t dpos, k;
    long long limit;
    int verify;
    PyObject *fn, *result = NULL;
    if (!PyArg_ParseTuple(args, "y*y*w*nw*w*nw*pLO", &buf, &recbuf, &data, &dpos, &offs, &wbuf,
                          &k, &cbuf, &verify, &limit, &fn))
        return NULL;
    fetch_t f = {(const uint8_t *)buf.buf, buf.len, (const rec_t *)recbuf.buf,
                 recbuf.len / (Py_ssize_t)sizeof(rec_t), (int64_t *)cbuf.buf, verify, limit,
                 {NULL, NULL}, NULL};
    sink_t s;
    Py_ssize_t i = 0;
    int status = ST_END;
    if (capi->sink_parse(&s, &data, dpos, &offs, &wbuf, k) < 0)
        goto done;
    if (cbuf.len / (Py_ssize_t)sizeof(int64_t) < f.n) {
        PyErr_SetString(PyExc_ValueError, "gzip_fetch: counts shorter than recs");
        goto done;
    }
    if (capi->crc_parse(fn, deflate_crc, &f.crc, "gzip_fetch") < 0)
        goto done;
    f.d = libdeflate_alloc_decompressor();
    if (!f.d) {
        PyErr_NoMemory();
        goto done;
    }
    for (; i < f.n && status == ST_END; i++)
        status = one_wrapper(&f, i, &s);
    if (status >= 0)
        result = Py_BuildValue("(innn)", status, status == ST_END ? i : i - 1, s.dpos, s.k);
done:
    libdeflate_free_decompressor(f.d);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&recbuf);
    PyBuffer_Release(&data);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&wbuf);
    PyBuffer_Release(&cbuf);
    return result;
}

/* inflate(payload, out) -> bytes written: one gzip member (nothing after it) inflated into
 * out by libdeflate; ValueError if it is not one or does not fit (tests, and the bench's plain
 * inflate of the same payloads). */
static PyObject *inflate(PyObject *self, PyObject *args)
{
    Py_buffer buf, out;
    if (!PyArg_ParseTuple(args, "y*w*", &buf, &out))
        return NULL;
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    size_t used = 0, written = 0;
    enum libdeflate_result rc = LIBDEFLATE_BAD_DATA;
    if (d)
        rc = libdeflate_gzip_decompress_ex(d, buf.buf, (size_t)buf.len, out.buf, (size_t)out.len,
                                           &used, &written);
    libdeflate_free_decompressor(d);
    Py_ssize_t len = buf.len;
    PyBuffer_Release(&buf);
    PyBuffer_Release(&out);
    if (!d)
        return PyErr_NoMemory();
    if (rc != LIBDEFLATE_SUCCESS || used != (size_t)len) {
        PyErr_Format(PyExc_ValueError, "inflate: not one gzip member that fits (result %d)",
                     (int)rc);
        return NULL;
    }
    return PyLong_FromSize_t(written);
}

static PyMethodDef methods[] = {
    {"gzip_total", gzip_total, METH_VARARGS, "Bytes gzip wrappers announce (ISIZE), together."},
    {"gzip_fetch", gzip_fetch, METH_VARARGS, "Check, inflate and take gzip wrappers."},
    {"inflate", inflate, METH_VARARGS, "Inflate one gzip member into a buffer (libdeflate)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_gzip",
    .m_doc = "gzip wrappers of Kafka 0.7 message sets, inflated by libdeflate and walked by "
             "the decode kernel.",
    .m_size = -1,
    .m_methods = methods,
};

/* _kernel's C functions; NULL with ImportError raised when there is no usable _kernel. (Not
 * PyCapsule_Import: it reaches the capsule through package attributes, which a package still
 * importing, as kafka_pyspark._messages is when flat.py loads this module, does not have yet.) */
static const kp_capi_t *kernel_api(void)
{
    const kp_capi_t *api = NULL;
    PyObject *kernel = PyImport_ImportModule("kafka_pyspark._messages._kernel");
    PyObject *capsule = kernel ? PyObject_GetAttrString(kernel, "_C_API") : NULL;
    if (capsule)
        api = (const kp_capi_t *)PyCapsule_GetPointer(capsule, KP_CAPI_NAME);
    Py_XDECREF(capsule);
    Py_XDECREF(kernel);
    if (api && (api->version != KP_CAPI_VERSION || api->rec_size != sizeof(rec_t) ||
                api->sink_size != sizeof(sink_t) || api->crc_size != sizeof(kp_crc_t)))
        api = NULL;
    if (!api && (!PyErr_Occurred() || !PyErr_ExceptionMatches(PyExc_ImportError))) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ImportError, "_gzip: no _kernel with a matching " KP_CAPI_NAME);
    }
    return api;
}

PyMODINIT_FUNC PyInit__gzip(void)
{
    capi = kernel_api();
    if (!capi)
        return NULL;
    fixed_init();
    PyObject *m = PyModule_Create(&module);
    if (m && (kp_add_constants(m) < 0 ||
              PyModule_AddStringConstant(m, "LIBDEFLATE", LIBDEFLATE_VERSION_STRING) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
