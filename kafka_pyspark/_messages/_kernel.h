/* What the compiled modules of kafka_pyspark/_messages share, defined once: _kernel.c, _snappy.c
 * and _wrappers.c (the module _kernel), and _gzip.c (a module of its own, which reaches
 * _kernel's functions through its capsule, below).
 *
 * - every constant the Python side also states (message layout, codec ids, statuses, the CRC
 *   check's result and chunk, the CRC engines), exported by kp_add_constants from both
 *   modules and checked at load against walk.KERNEL_CONSTANTS (kafka_pyspark/_shared/native.py): a
 *   build that differs is not used;
 * - the message walk (kp_walk): read_head checks each header, a visitor takes each message
 *   (scan's records in _kernel.c; kp_sink_take's payloads into a value column, used by `take`
 *   and by the snappy lane's compaction in place); inline, so each use compiles to one loop;
 * - the check of taken rows against their CRC words (kp_rows_ok, _wrappers.c: the lanes call
 *   it, Python reaches it as check_rows) and the CRC engine it calls (kp_crc_t, kp_crc_parse).
 */
#ifndef KAFKA_PYSPARK_KERNEL_H
#define KAFKA_PYSPARK_KERNEL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
#define KP_INLINE static inline __attribute__((always_inline))
#define PREFETCH(addr) __builtin_prefetch(addr)
#else
#define KP_INLINE static inline
#define PREFETCH(addr) ((void)0)
#endif

/* --- constants shared with the Python side (kp_add_constants exports them) ------------------ */

/* message layout: layout.py */
#define LENGTH_SIZE 4
#define MIN_LENGTH 5          /* MAGIC + CRC32, empty payload (magic 0) */
#define MIN_LENGTH_V1 6       /* MAGIC + ATTRIBUTES + CRC32 (magic 1) */
#define MAX_MESSAGE_LENGTH (1 << 30)
#define CODEC_MASK 0x03

/* codec ids (ATTRIBUTES & CODEC_MASK): layout.py; the mask's one other value names none */
enum { CODEC_NONE = 0, CODEC_GZIP = 1, CODEC_SNAPPY = 2 };

/* why a walk or a lane stopped: walk.py */
enum {
    ST_END = 0,        /* reached min(end, stop) */
    ST_SHORT = 1,      /* fewer than 4 bytes left: LENGTH unreadable */
    ST_PARTIAL = 2,    /* LENGTH readable (value), the message continues past `end` */
    ST_BAD_LENGTH = 3, /* LENGTH (value) out of range */
    ST_BAD_MAGIC = 4,  /* MAGIC (value) not 0 or 1 */
    ST_BAD_CODEC = 5,  /* ATTRIBUTES (value) name no codec */
    ST_SHORT_V1 = 6,   /* magic 1 with LENGTH (value) below its 6-byte header */
    ST_WRAPPER = 7,    /* take only: a compressed message (ATTRIBUTES in value) */
    ST_FULL = 8,       /* take only: an output buffer is full */
    ST_BAD_SNAPPY = 9, /* snappy lane only: not a snappy payload this kernel decodes */
    ST_BAD_CRC = 10,   /* snappy_fetch, gzip_fetch: a CRC32 does not match */
    ST_BAD_GZIP = 11   /* gzip_fetch only: not a gzip payload that lane inflates */
};
#define KP_RAISED (-1) /* not a status: a Python exception is set */

/* the check of rows against their CRC words (crc.py explains it): walk.py */
#define CHECK_OK 0xFFFFFFFFu    /* the CRC of payloads + CRC words when every CRC is right */
#define CHECK_CHUNK (256 << 10) /* payload bytes checked at a time, while in cache */

/* the CRC-32 engines a lane calls itself, as the Python side names them (kp_crc_parse): walk.py */
enum {
    CRC_ISAL = 1,      /* ISA-L's crc32_gzip_refl, once crc_engine_at found it */
    CRC_LIBDEFLATE = 2 /* libdeflate's (_gzip.c only: _kernel does not link it) */
};

/* --- records and headers ----------------------------------------------------------------- */

typedef struct {
    int64_t start;  /* position of LENGTH in the buffer */
    int32_t length; /* LENGTH */
    uint32_t crc;   /* stored CRC32 */
    uint8_t magic;
    uint8_t codec;  /* ATTRIBUTES & 3 (magic 1), else 0 */
    uint8_t pad[6];
} rec_t;

/* Bytes before the payload of a message of this magic (0 or 1: magic 1 has ATTRIBUTES). */
static inline Py_ssize_t header_size(uint8_t magic)
{
    return LENGTH_SIZE + MIN_LENGTH + magic;
}

/* The payload size of a message of this LENGTH and magic. */
static inline Py_ssize_t payload_size(int32_t length, uint8_t magic)
{
    return (Py_ssize_t)length - MIN_LENGTH - magic;
}

/* The payload of record r within buf[0:len] and its size in *size; NULL if r does not point
 * into buf or its payload does not fit (start checked first: no overflow for any record). */
static inline const uint8_t *rec_payload(const rec_t *r, const uint8_t *buf, Py_ssize_t len,
                                         int64_t *size)
{
    if (r->start < 0 || r->start > len || r->magic > 1)
        return NULL;
    int64_t start = r->start + header_size(r->magic);
    *size = payload_size(r->length, r->magic);
    return *size < 0 || start + *size > len ? NULL : buf + start;
}

/* The payload of record r when it is a wrapper of `codec` within buf (else NULL). */
static inline const uint8_t *wrapper_payload(const rec_t *r, uint8_t codec, const uint8_t *buf,
                                             Py_ssize_t len, int64_t *size)
{
    return r->codec == codec && r->magic == 1 ? rec_payload(r, buf, len, size) : NULL;
}

static inline uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static inline uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

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
        if (h->codec > CODEC_SNAPPY)
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

/* --- the walk ------------------------------------------------------------------------------ */

/* The walk is a chain of dependent loads (each LENGTH gives the next position), so a buffer
 * that is not in cache costs a full memory latency per message. Messages are back to back, so
 * the lines ahead of the walk are prefetched as it goes: it then runs at memory bandwidth. */
#define PREFETCH_AHEAD 8192
#define PREFETCH_BIG 4096 /* AHEAD_SMALL: messages this long (wrappers) are walked without it */

enum {
    AHEAD_NONE,   /* what was just decompressed: in cache */
    AHEAD_ALWAYS, /* payloads copied as the walk goes: their bytes are wanted */
    AHEAD_SMALL   /* headers only (scan): no read ahead of the body after a long message */
};

KP_INLINE void prefetch_to(const uint8_t *p, Py_ssize_t *fetched, Py_ssize_t pos,
                           Py_ssize_t end)
{
    Py_ssize_t ahead = pos + PREFETCH_AHEAD < end ? pos + PREFETCH_AHEAD : end;
    for (; *fetched < ahead; *fetched += 64)
        PREFETCH(p + *fetched);
}

/* What a walk does with each complete, well-formed message (header h, at pos in p[0:end]):
 * ST_END to go on, another status to stop the walk at that message, or KP_RAISED. */
typedef int (*kp_visit_fn)(void *ctx, const uint8_t *p, Py_ssize_t pos, Py_ssize_t end,
                           const head_t *h, long long *value);

/* The one message walk: follows LENGTH from *at while it is below min(end, stop), checking
 * every header (read_head) and handing each message to visit, until a header or visit stops
 * it (its status, *value saying why) or the limit (ST_END). *at: where it stopped (the
 * message at fault, or the position reached). Inline, with a constant visit: compiled into
 * each caller as one loop. */
KP_INLINE int kp_walk(const uint8_t *p, Py_ssize_t *at, Py_ssize_t end, Py_ssize_t stop,
                      int ahead, kp_visit_fn visit, void *ctx, long long *value)
{
    Py_ssize_t pos = *at, limit = stop < end ? stop : end, fetched = pos;
    int status = ST_END, big = 0;
    head_t h;
    while (pos < limit) {
        if (ahead == AHEAD_ALWAYS || (ahead == AHEAD_SMALL && !big))
            prefetch_to(p, &fetched, pos, end);
        else if (ahead == AHEAD_SMALL)
            fetched = pos; /* after a long message: no read ahead of the next one's body */
        status = read_head(p, pos, end, &h, value);
        if (status == ST_END)
            status = visit(ctx, p, pos, end, &h, value);
        if (status != ST_END)
            break;
        big = h.length >= PREFETCH_BIG;
        pos += LENGTH_SIZE + (Py_ssize_t)h.length;
    }
    *at = pos;
    return status;
}

/* --- taking plain messages into a value column ---------------------------------------------- */

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

uint32_t kp_zeros_crc(int64_t n);
void kp_zeros_init(void); /* _zeros.c: fills the tables, once per module */

/* crc32 of n zero bytes (kp_zeros_crc), inline for the sizes of the table */
#define KP_ZERO_TABLE 65536
extern uint32_t kp_zero_table[KP_ZERO_TABLE];
static inline uint32_t zeros_crc(int64_t n)
{
    return n < KP_ZERO_TABLE ? kp_zero_table[n] : kp_zeros_crc(n);
}

/* Copies n bytes from src down to dst (dst <= src: they may overlap, when a set is taken in
 * place) with room bytes free to write at dst and avail readable at src: short payloads in
 * 16-byte steps, forward (each store lands before the bytes still to be read), possibly past
 * n, within room and avail; others by memmove. */
KP_INLINE void copy_down(uint8_t *dst, const uint8_t *src, Py_ssize_t n, Py_ssize_t room,
                         Py_ssize_t avail)
{
    if (n <= 64 && room >= 64 && avail >= 64) {
        for (Py_ssize_t i = 0; i < n; i += 16) {
            uint8_t chunk[16];
            memcpy(chunk, src + i, 16);
            memcpy(dst + i, chunk, 16);
        }
    } else {
        memmove(dst, src, (size_t)n);
    }
}

/* Moves n bytes down from src to dst = src - gap (payloads compacted within one buffer),
 * avail bytes being readable at src. With 32 bytes or more between them, in 32-byte steps,
 * each loaded before it is stored: the stores (up to 31 bytes past n) only overwrite bytes
 * already read, and the reads (up to 31 bytes past n) stay within avail; else by memmove. */
KP_INLINE void move_down(uint8_t *dst, const uint8_t *src, Py_ssize_t n, Py_ssize_t gap,
                         Py_ssize_t avail)
{
    if (gap >= 32 && n <= 512 && avail >= ((n + 31) & ~(Py_ssize_t)31)) {
        for (Py_ssize_t i = 0; i < n; i += 32) {
            uint8_t a[16], b[16];
            memcpy(a, src + i, 16);
            memcpy(b, src + i + 16, 16);
            memcpy(dst + i, a, 16);
            memcpy(dst + i + 16, b, 16);
        }
    } else {
        memmove(dst, src, (size_t)n);
    }
}

/* The sink's state in locals while a walk takes into it (the copies could alias the sink's
 * fields for the compiler); rows bounds k (k < rows). */
typedef struct {
    uint8_t *data;
    int32_t *offsets;
    uint32_t *words;
    int64_t *starts;
    Py_ssize_t dpos, dcap, k, m, rows;
    int64_t base;
} taker_t;

/* One message for kp_sink_take: a wrapper stops the walk (ST_WRAPPER, ATTRIBUTES in *value),
 * a payload that does not fit stops it (ST_FULL); else the payload is copied to the sink's
 * end (compact: moved down within the one buffer being walked, see move_down; else copied,
 * p possibly being the sink's own data behind the walk) and its end, CRC word and start
 * recorded. */
KP_INLINE int take_one(taker_t *t, const uint8_t *p, Py_ssize_t pos, Py_ssize_t end,
                       const head_t *h, long long *value, int compact)
{
    if (h->codec != CODEC_NONE) {
        *value = h->attributes;
        return ST_WRAPPER;
    }
    Py_ssize_t from = pos + header_size(h->magic), size = payload_size(h->length, h->magic);
    if (size > t->dcap - t->dpos || t->dpos + size > INT32_MAX || t->k >= t->rows)
        return ST_FULL;
    if (compact) {
        move_down(t->data + t->dpos, p + from, size, from - t->dpos, t->dcap - from);
    } else {
        Py_ssize_t room = t->dcap - t->dpos;
        if (t->data == p && from - t->dpos + size < room)
            room = from - t->dpos + size; /* in place: the bytes after the payload are unread */
        copy_down(t->data + t->dpos, p + from, size, room, end - from);
    }
    t->dpos += size;
    t->words[t->k] = h->crc ^ zeros_crc(size);
    t->offsets[++t->k] = (int32_t)t->dpos;
    if (t->starts)
        t->starts[t->m] = t->base + pos;
    t->m++;
    return ST_END;
}

static inline int take_copy(void *t, const uint8_t *p, Py_ssize_t pos, Py_ssize_t end,
                            const head_t *h, long long *value)
{
    return take_one((taker_t *)t, p, pos, end, h, value, 0);
}

static inline int take_compact(void *t, const uint8_t *p, Py_ssize_t pos, Py_ssize_t end,
                               const head_t *h, long long *value)
{
    return take_one((taker_t *)t, p, pos, end, h, value, 1);
}

/* Walks plain messages from *at, taking each payload into the sink (take_one), until
 * min(end, stop), a problem (its status), a compressed message (ST_WRAPPER) or a full sink
 * (ST_FULL). compact: p is the sink's data, just decompressed there above its end. */
KP_INLINE int kp_sink_take(const uint8_t *p, Py_ssize_t *at, Py_ssize_t end, Py_ssize_t stop,
                           sink_t *s, long long *value, int compact)
{
    taker_t t = {s->data, s->offsets, s->words, s->starts, s->dpos, s->dcap, s->k, s->m, 0,
                 s->base};
    t.rows = s->ocap - 1 < s->wcap ? s->ocap - 1 : s->wcap;
    if (t.starts && s->scap - 1 < t.rows - t.k + t.m)
        t.rows = s->scap - 1 - t.m + t.k; /* m + 1 < scap */
    int status = compact ? kp_walk(p, at, end, stop, AHEAD_NONE, take_compact, &t, value)
                         : kp_walk(p, at, end, stop, AHEAD_ALWAYS, take_copy, &t, value);
    if (t.starts)
        t.starts[t.m] = t.base + *at; /* scap > m: checked at parse and per message */
    s->dpos = t.dpos;
    s->k = t.k;
    s->m = t.m;
    return status;
}

int kp_take(const uint8_t *p, Py_ssize_t *pos, Py_ssize_t end, Py_ssize_t stop, sink_t *s,
            long long *value);
int kp_sink_parse(sink_t *s, Py_buffer *data, Py_ssize_t dpos, Py_buffer *offs,
                  Py_buffer *wbuf, Py_ssize_t k);

/* --- CRC-32 engines and the check of taken rows --------------------------------------------- */

/* zlib's CRC-32 of buf[0:len] continued from init, by a C function (ISA-L's crc32_gzip_refl,
 * or libdeflate's behind this signature) */
typedef uint32_t (*kp_crc32_fn)(uint32_t init, const unsigned char *buf, uint64_t len);

/* The C function at the address `arg` (ISA-L's crc32_gzip_refl, found by
 * crc.isal_crc_address in python-isal's loaded module; 0: none) if it gives zlib's CRC-32 of
 * known inputs: 1 and *out set; 0 (not usable, *out NULL); -1 with the exception raised. The
 * lookup is Python's (ctypes), so that no module links a dynamic-loader symbol: glibc 2.34
 * moved those into libc, which would raise the wheel's manylinux tag. */
static inline int kp_crc_fn_at(PyObject *arg, kp_crc32_fn *out)
{
    void *at = PyLong_AsVoidPtr(arg);
    *out = NULL;
    if (!at && PyErr_Occurred())
        return -1;
    kp_crc32_fn fn = NULL;
    *(void **)&fn = at;
    if (!fn || fn(0, (const unsigned char *)"123456789", 9) != 0xCBF43926u ||
        fn(0xFFFFFFFFu, (const unsigned char *)"abc", 3) != 0x359A672Fu)
        return 0;
    *out = fn;
    return 1;
}

/* A CRC-32 engine as kp_crc_parse resolves the Python side's choice: a C function (direct),
 * else a Python callable crc32(data, init) (call, borrowed). */
typedef struct {
    kp_crc32_fn direct;
    PyObject *call;
} kp_crc_t;

/* crc32(p[0:n], init) by the engine (a Python callable through a memoryview: no copy): 0, or
 * -1 with the exception the callable raised. */
static inline int kp_crc(const kp_crc_t *c, const uint8_t *p, Py_ssize_t n, uint32_t init,
                         uint32_t *out)
{
    if (c->direct) {
        *out = c->direct(init, p, (uint64_t)n);
        return 0;
    }
    PyObject *view = PyMemoryView_FromMemory((char *)p, n, PyBUF_READ);
    if (!view)
        return -1;
    PyObject *r = PyObject_CallFunction(c->call, "Ok", view, (unsigned long)init);
    Py_DECREF(view);
    if (!r)
        return -1;
    *out = (uint32_t)PyLong_AsUnsignedLongMask(r);
    Py_DECREF(r);
    return PyErr_Occurred() ? -1 : 0;
}

/* The engine `arg` names (CRC_ISAL, CRC_LIBDEFLATE: the caller's `libdeflate` function, NULL
 * where it has none) or calls (a callable) into *out: 0, or -1 with TypeError (anything
 * else) or ValueError (an engine not there) raised, naming `who`. */
int kp_crc_parse(PyObject *arg, kp_crc32_fn libdeflate, kp_crc_t *out, const char *who);

/* Xors the CRC word w into the 4 bytes at `at`, little-endian (one load and store). */
static inline void xor_word(uint8_t *at, uint32_t w)
{
    w ^= le32(at);
    at[0] = (uint8_t)w;
    at[1] = (uint8_t)(w >> 8);
    at[2] = (uint8_t)(w >> 16);
    at[3] = (uint8_t)(w >> 24);
}

/* Whether payloads k0..k1-1 of the sink match their CRC words (1, 0; -1 raised): one CRC over
 * them with the words xored after their ends (crc.py). ValueError if the sink has not 4 bytes
 * to spare after them. */
int kp_rows_ok(sink_t *s, Py_ssize_t k0, Py_ssize_t k1, const kp_crc_t *crc);
PyObject *kp_check_rows(PyObject *self, PyObject *args); /* kp_rows_ok for Python */

/* --- _kernel's parts (_kernel.c, _snappy.c, _wrappers.c; _module.c lists their entry points) - */

PyObject *kp_scan_py(PyObject *self, PyObject *args);
PyObject *kp_take_py(PyObject *self, PyObject *args);
PyObject *kp_gather_py(PyObject *self, PyObject *args);
PyObject *kp_zeros_crc_py(PyObject *self, PyObject *arg);
void kp_snappy_init(void);
Py_ssize_t kp_snappy_decompress(const uint8_t *p, Py_ssize_t n, uint8_t *dst, Py_ssize_t cap);
int kp_take_snappy(const uint8_t *p, Py_ssize_t n, sink_t *s, long long *value);
int64_t kp_snappy_payload_size(const uint8_t *p, Py_ssize_t n);
PyObject *kp_snappy_size(PyObject *self, PyObject *arg);
PyObject *kp_snappy_take(PyObject *self, PyObject *args);
PyObject *kp_snappy_raw(PyObject *self, PyObject *args);
PyObject *kp_snappy_total(PyObject *self, PyObject *args);
PyObject *kp_snappy_fetch(PyObject *self, PyObject *args);
PyObject *kp_wrapped_rows(PyObject *self, PyObject *args);
PyObject *kp_crc_engine_at(PyObject *self, PyObject *arg);

/* --- the capsule ------------------------------------------------------------------------------
 * What _kernel exports to other compiled modules (_gzip.c, an optional module of its own: it
 * links libdeflate) as the capsule _kernel._C_API: the walk that takes into a sink, the sink's
 * set-up, the CRC engine's parsing and the rows' check, so that there is one of each. A user
 * checks version and sizes (a stale build of either side is refused). */
#define KP_CAPI_NAME "kafka_pyspark._messages._kernel._C_API"
#define KP_CAPI_VERSION 3
typedef struct {
    int version;
    size_t rec_size, sink_size, crc_size;
    int (*take)(const uint8_t *p, Py_ssize_t *pos, Py_ssize_t end, Py_ssize_t stop, sink_t *s,
                long long *value);
    int (*sink_parse)(sink_t *s, Py_buffer *data, Py_ssize_t dpos, Py_buffer *offs,
                      Py_buffer *wbuf, Py_ssize_t k);
    int (*crc_parse)(PyObject *arg, kp_crc32_fn libdeflate, kp_crc_t *out, const char *who);
    int (*rows_ok)(sink_t *s, Py_ssize_t k0, Py_ssize_t k1, const kp_crc_t *crc);
} kp_capi_t;

/* --- the constants, exported ------------------------------------------------------------------
 * Every fact above that the Python side states too, as module attributes of _kernel and
 * _gzip: walk.KERNEL_CONSTANTS holds the Python values, and kafka_pyspark._shared.native.load_kernel
 * does not use a module whose values differ. 0, or -1 raised. */
static inline int kp_add_constants(PyObject *m)
{
    const struct {
        const char *name;
        long long value;
    } c[] = {
        {"RECORD_SIZE", (long long)sizeof(rec_t)},
        {"RECORD_START", (long long)offsetof(rec_t, start)},
        {"RECORD_LENGTH", (long long)offsetof(rec_t, length)},
        {"RECORD_CRC", (long long)offsetof(rec_t, crc)},
        {"RECORD_MAGIC", (long long)offsetof(rec_t, magic)},
        {"RECORD_CODEC", (long long)offsetof(rec_t, codec)},
        {"LENGTH_SIZE", LENGTH_SIZE},
        {"MIN_LENGTH", MIN_LENGTH},
        {"MIN_LENGTH_V1", MIN_LENGTH_V1},
        {"HEADER_V0_SIZE", (long long)header_size(0)},
        {"HEADER_V1_SIZE", (long long)header_size(1)},
        {"MAX_MESSAGE_LENGTH", MAX_MESSAGE_LENGTH},
        {"CODEC_MASK", CODEC_MASK},
        {"CODEC_NONE", CODEC_NONE},
        {"CODEC_GZIP", CODEC_GZIP},
        {"CODEC_SNAPPY", CODEC_SNAPPY},
        {"ST_END", ST_END},
        {"ST_SHORT", ST_SHORT},
        {"ST_PARTIAL", ST_PARTIAL},
        {"ST_BAD_LENGTH", ST_BAD_LENGTH},
        {"ST_BAD_MAGIC", ST_BAD_MAGIC},
        {"ST_BAD_CODEC", ST_BAD_CODEC},
        {"ST_SHORT_V1", ST_SHORT_V1},
        {"ST_WRAPPER", ST_WRAPPER},
        {"ST_FULL", ST_FULL},
        {"ST_BAD_SNAPPY", ST_BAD_SNAPPY},
        {"ST_BAD_CRC", ST_BAD_CRC},
        {"ST_BAD_GZIP", ST_BAD_GZIP},
        {"CHECK_OK", CHECK_OK},
        {"CHECK_CHUNK", CHECK_CHUNK},
        {"CRC_ISAL", CRC_ISAL},
        {"CRC_LIBDEFLATE", CRC_LIBDEFLATE},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        PyObject *value = PyLong_FromLongLong(c[i].value);
        int failed = !value || PyModule_AddObjectRef(m, c[i].name, value) < 0;
        Py_XDECREF(value);
        if (failed)
            return -1;
    }
    return 0;
}

#endif
