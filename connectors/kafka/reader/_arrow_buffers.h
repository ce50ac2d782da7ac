/* Arrow column buffers for _rdkafka_arrow.c: growable byte buffers and variable-length
 * binary columns (validity bitmap, int32 offsets, data), in Arrow's memory layout so
 * Python wraps them without copying.
 *
 * Reserve first, then append: a record's columns are all reserved before any of them
 * is written, so a failed allocation leaves every column at the same row count.
 * Included by _rdkafka_arrow.c only (one translation unit: everything is static).
 */
#ifndef SPARKBARRIER_ARROW_BUFFERS_H
#define SPARKBARRIER_ARROW_BUFFERS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

/* Test-only: the n-th buf_reserve from now fails as if out of memory (0: never). */
static long fail_reserve_in = 0;

static int buf_reserve(Buf *b, size_t extra) {
    if (fail_reserve_in > 0 && --fail_reserve_in == 0) return -1;
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

/* Only after buf_reserve made room for n bytes. */
static void buf_append(Buf *b, const void *src, size_t n) {
    if (n) memcpy(b->data + b->len, src, n);
    b->len += n;
}

static void buf_append_i32(Buf *b, int32_t v) { buf_append(b, &v, 4); }
static void buf_append_i64(Buf *b, int64_t v) { buf_append(b, &v, 8); }

/* A variable-length binary/string column: validity bitmap, int32 offsets, data. */
typedef struct {
    Buf valid, offsets, data;
    int64_t rows, nulls;
} VarCol;

static int varcol_reset(VarCol *c) {
    c->valid.len = c->offsets.len = c->data.len = 0;
    c->rows = c->nulls = 0;
    if (buf_reserve(&c->offsets, 4)) return -1;
    buf_append_i32(&c->offsets, 0);
    return 0;
}

/* Room for one more value of n bytes within limit (at most INT32_MAX: int32 offsets). */
static int varcol_fits(const VarCol *c, size_t n, size_t limit) {
    return c->data.len + n <= limit;
}

/* Room for `values` more values of `bytes` bytes in all. */
static int varcol_reserve(VarCol *c, size_t values, size_t bytes) {
    return buf_reserve(&c->valid, values) || buf_reserve(&c->data, bytes) ||
           buf_reserve(&c->offsets, 4 * values);
}

/* Only after varcol_reserve made room. */
static void varcol_append(VarCol *c, const void *src, size_t n, int is_null) {
    size_t byte = (size_t)(c->rows / 8);
    if (byte >= c->valid.len) c->valid.data[c->valid.len++] = 0;
    if (is_null) {
        c->nulls++;
    } else {
        c->valid.data[byte] |= (char)(1u << (c->rows % 8));
        buf_append(&c->data, src, n);
    }
    c->rows++;
    buf_append_i32(&c->offsets, (int32_t)c->data.len);
}

static void varcol_free(VarCol *c) {
    free(c->valid.data);
    free(c->offsets.data);
    free(c->data.data);
}

#endif
