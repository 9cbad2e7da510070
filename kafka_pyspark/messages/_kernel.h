/* Shared by _kernel.c (the walk) and _snappy.c (snappy-java wrappers): see _kernel.c; and by
 * _gzip.c (a module of its own), which reaches the walk through _kernel's capsule (below). */
#ifndef KAFKA_PYSPARK_KERNEL_H
#define KAFKA_PYSPARK_KERNEL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* keep in step with layout.py and walk.py: exported, checked at load (walk.KERNEL_CONSTANTS) */
#define LENGTH_SIZE 4
#define MIN_LENGTH 5          /* MAGIC + CRC32, empty payload (magic 0) */
#define MIN_LENGTH_V1 6       /* MAGIC + ATTRIBUTES + CRC32 (magic 1) */
#define MAX_MESSAGE_LENGTH (1 << 30)
#define CODEC_MASK 0x03

enum {
    ST_END = 0,        /* reached min(end, stop) */
    ST_SHORT = 1,      /* fewer than 4 bytes left: LENGTH unreadable */
    ST_PARTIAL = 2,    /* LENGTH readable (value), the message continues past `end` */
    ST_BAD_LENGTH = 3, /* LENGTH (value) out of range */
    ST_BAD_MAGIC = 4,  /* MAGIC (value) not 0 or 1 */
    ST_BAD_CODEC = 5,  /* ATTRIBUTES (value) name codec 3 */
    ST_SHORT_V1 = 6,   /* magic 1 with LENGTH (value) below its 6-byte header */
    ST_WRAPPER = 7,    /* take only: a compressed message (ATTRIBUTES in value) */
    ST_FULL = 8,       /* take only: an output buffer is full */
    ST_BAD_SNAPPY = 9, /* snappy_take only: not a snappy payload this kernel decodes */
    ST_BAD_CRC = 10,   /* snappy_fetch, gzip_fetch: a CRC32 does not match */
    ST_BAD_GZIP = 11   /* gzip_fetch only: not a gzip payload that lane inflates */
};

typedef struct {
    int64_t start;  /* position of LENGTH in the buffer */
    int32_t length; /* LENGTH */
    uint32_t crc;   /* stored CRC32 */
    uint8_t magic;
    uint8_t codec;  /* ATTRIBUTES & 3 (magic 1), else 0 */
    uint8_t pad[6];
} rec_t;

static inline int64_t payload_start(const rec_t *r)
{
    return r->start + LENGTH_SIZE + 1 + r->magic + 4;
}

static inline int64_t payload_size(const rec_t *r)
{
    return (int64_t)r->length - 1 - r->magic - 4;
}

/* The payload of record r within buf[0:len] and its size in *size; NULL if r does not point
 * into buf or its payload does not fit (start checked first: no overflow for any record). */
static inline const uint8_t *rec_payload(const rec_t *r, const uint8_t *buf, Py_ssize_t len,
                                         int64_t *size)
{
    if (r->start < 0 || r->start > len || r->magic > 1)
        return NULL;
    int64_t start = payload_start(r);
    *size = payload_size(r);
    return *size < 0 || start + *size > len ? NULL : buf + start;
}

/* Where `take` puts what it finds: payloads back to back in data[dpos:dcap], their end
 * positions in offsets[k+1:], their CRC words in words[k:] and (when starts is not NULL) the
 * absolute offset base + position of every message in starts[m:], then of the end. */
typedef struct {
    uint8_t *data;
    Py_ssize_t dpos, dcap;
    int32_t *offsets;
    Py_ssize_t k, ocap;
    uint32_t *words;
    Py_ssize_t wcap;
    int64_t *starts;
    Py_ssize_t m, scap;
    int64_t base;
} sink_t;

static inline uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static inline uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

uint32_t kp_zeros_crc(int64_t n);

/* crc32 of n zero bytes (kp_zeros_crc), inline for the sizes of the table */
#define KP_ZERO_TABLE 65536
extern uint32_t kp_zero_table[KP_ZERO_TABLE];
static inline uint32_t zeros_crc(int64_t n)
{
    return n < KP_ZERO_TABLE ? kp_zero_table[n] : kp_zeros_crc(n);
}

/* --- one header (the walks of _kernel.c and _snappy.c) --- */

typedef struct {
    int32_t length;
    uint32_t crc;
    uint8_t magic, attributes, codec;
} head_t;

/* The message at pos (pos < end): ST_END when it is complete and well-formed (its fields in
 * *h), else the status that stops a walk there (*value says why). */
static inline int read_head(const uint8_t *p, Py_ssize_t pos, Py_ssize_t end, head_t *h,
                            long long *value)
{
    if (end - pos < LENGTH_SIZE)
        return ST_SHORT;
    int32_t length = (int32_t)be32(p + pos);
    *value = length;
    if (length < MIN_LENGTH || length > MAX_MESSAGE_LENGTH)
        return ST_BAD_LENGTH;
    if ((Py_ssize_t)length > end - pos - LENGTH_SIZE)
        return ST_PARTIAL;
    const uint8_t *m = p + pos + LENGTH_SIZE;
    h->length = length;
    h->magic = m[0];
    h->attributes = h->codec = 0;
    if (m[0] == 1) {
        if (length < MIN_LENGTH_V1)
            return ST_SHORT_V1;
        h->attributes = m[1];
        h->codec = m[1] & CODEC_MASK;
        *value = m[1];
        if (h->codec == 3)
            return ST_BAD_CODEC;
        h->crc = be32(m + 2);
    } else if (m[0] == 0) {
        h->crc = be32(m + 1);
    } else {
        *value = m[0];
        return ST_BAD_MAGIC;
    }
    *value = 0;
    return ST_END;
}

int kp_take(const uint8_t *p, Py_ssize_t *pos, Py_ssize_t end, Py_ssize_t stop, sink_t *s,
            long long *value);
int kp_sink_parse(sink_t *s, Py_buffer *data, Py_ssize_t dpos, Py_buffer *offs,
                  Py_buffer *wbuf, Py_ssize_t k);
void kp_snappy_init(void);
int kp_take_snappy(const uint8_t *p, Py_ssize_t n, sink_t *s, long long *value);
int64_t kp_snappy_payload_size(const uint8_t *p, Py_ssize_t n);
PyObject *kp_snappy_size(PyObject *self, PyObject *arg);
PyObject *kp_snappy_take(PyObject *self, PyObject *args);
PyObject *kp_snappy_raw(PyObject *self, PyObject *args);
PyObject *kp_snappy_total(PyObject *self, PyObject *args);
PyObject *kp_snappy_fetch(PyObject *self, PyObject *args);
PyObject *kp_wrapped_rows(PyObject *self, PyObject *args);
PyObject *kp_crc_engine_at(PyObject *self, PyObject *arg);

/* What _kernel exports to other compiled modules (_gzip.c, an optional module of its own: it
 * links libdeflate) as the capsule _kernel._C_API: the walk itself (and its sink's set-up), so that there is one. A
 * user checks version and sizes (a stale build of either side is refused). */
#define KP_CAPI_NAME "kafka_pyspark.messages._kernel._C_API"
#define KP_CAPI_VERSION 2
typedef int (*kp_take_fn)(const uint8_t *p, Py_ssize_t *pos, Py_ssize_t end, Py_ssize_t stop,
                          sink_t *s, long long *value);
typedef int (*kp_sink_parse_fn)(sink_t *s, Py_buffer *data, Py_ssize_t dpos, Py_buffer *offs,
                                Py_buffer *wbuf, Py_ssize_t k);
/* ISA-L's CRC-32 (crc32_gzip_refl: zlib's CRC-32, from a register), when crc_engine_at found it */
typedef uint32_t (*kp_crc32_fn)(uint32_t init, const unsigned char *buf, uint64_t len);
kp_crc32_fn kp_direct_crc(void); /* NULL until crc_engine_at found it */

/* crc32(p[0:n], init) by the Python callable fn (python-isal's or zlib's, through a memoryview:
 * no copy): 0, or -1 with the exception fn raised. */
static inline int kp_crc_call(PyObject *fn, const uint8_t *p, Py_ssize_t n, uint32_t init,
                              uint32_t *out)
{
    PyObject *view = PyMemoryView_FromMemory((char *)p, n, PyBUF_READ);
    if (!view)
        return -1;
    PyObject *r = PyObject_CallFunction(fn, "Ok", view, (unsigned long)init);
    Py_DECREF(view);
    if (!r)
        return -1;
    *out = (uint32_t)PyLong_AsUnsignedLongMask(r);
    Py_DECREF(r);
    return PyErr_Occurred() ? -1 : 0;
}
typedef struct {
    int version;
    size_t rec_size, sink_size;
    kp_take_fn take;
    kp_sink_parse_fn sink_parse;
    kp_crc32_fn (*direct_crc)(void);
} kp_capi_t;

#endif
