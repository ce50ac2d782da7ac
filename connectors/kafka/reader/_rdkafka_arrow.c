/* Executor read path's compiled part: librdkafka messages -> Arrow column buffers.
 *
 * Why this exists: confluent-kafka hands Python one Message object per record, and
 * building Arrow columns from those objects cost more CPU per record than Spark's JVM
 * Kafka source spends in total (issue "barrier-kafka reads at least as fast as Spark's
 * JVM Kafka source").  Here librdkafka's messages are copied straight into the buffers
 * of an Arrow batch (validity bitmaps, int32 offsets, data), with the GIL released, and
 * Python receives a handful of bytes objects per batch -- no object per record.
 *
 * What is deliberately NOT here: every rule a user can observe (where a range starts
 * and ends, data loss, errors, secrets, options) lives in Python (_native_reader.py and
 * _offset_range.py), shared with the other read paths.  This file only fetches and copies:
 *
 *   Fetcher(config_pairs, topic, partition, headers, max_bytes=2**31-1)
 *   .watermarks(timeout_ms) -> (err, low, high, errstr)
 *   .serve(timeout_ms)           run error_cb for client errors (fetch does it too)
 *   .topic_error(timeout_ms) -> (err, errstr)  the topic's error in fresh metadata
 *   .assign(offset)              start (or restart) reading at offset
 *   .fetch(want, end, timeout_ms) -> (added, next_offset, hit_end, full, events)
 *   .take() -> (n, columns...)   the buffered rows as bytes objects; resets
 *   .position() -> int           librdkafka's consumer position (-1001 if unknown)
 *   .leader() -> (id, host:port) the partition's leader in the last topic_error() answer
 *   .client_events() -> [(kind, level_or_code, text)]  error_cb / log_cb, drained
 *   .close()                     at once, or when a call running on another thread ends
 *
 * Kafka is spoken by librdkafka only: no protocol code of our own.
 *
 * No consumer group: librdkafka's high-level consumer (assign, consumer queue) needs a
 * group.id, and with one it looks up the group's coordinator, which needs group rights
 * the executors have no use for.  The Fetcher uses librdkafka's simple consumer instead
 * (consume_start_queue on one partition): no group, no coordinator, no commits.
 *
 * One thread at a time: a method that runs with the GIL released marks the Fetcher busy;
 * another call meanwhile fails with RuntimeError, except close(), which wakes the running
 * call and leaves the closing to it.
 *
 * Which librdkafka (docs/librdkafka.md): the one bundled in the pinned confluent-kafka
 * wheel, compiled against the system's (older, ABI-compatible) rdkafka.h.  Built as
 * _rdkafka_arrow_c and imported through _rdkafka_arrow.py, which loads that library first.  The module
 * refuses to load on a librdkafka older than MIN_LIBRDKAFKA: those compute the SCRAM
 * proof in a way Kafka 4 brokers reject, so SCRAM users could never log in.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_arrow_buffers.h"

/* ---------- client events (error_cb, log_cb) ------------------------------------- */

#define EVENTS_MAX 64

typedef struct {
    int kind; /* 0 error, 1 log */
    int code; /* error code, or syslog level */
    char text[512];
} ClientEvent;

/* ---------- the Fetcher ---------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    rd_kafka_t *rk;
    rd_kafka_topic_t *rkt;
    rd_kafka_queue_t *queue; /* the partition's messages and per-partition events */
    int started;             /* consume_start_queue was called (stop before restart) */
    char *topic;
    int32_t partition;
    int headers;
    size_t max_bytes; /* per variable-length column of one batch */
    /* a call runs with the GIL released; close() asked meanwhile */
    int busy;
    atomic_int closing;
    /* client events, written by librdkafka threads */
    pthread_mutex_t lock;
    int lock_ready;
    ClientEvent events[EVENTS_MAX];
    int n_events, dropped_events;
    /* messages consumed but not yet copied (they did not fit a batch's offsets) */
    rd_kafka_message_t **msgs;
    size_t msgs_cap, carry_from, carry_to;
    /* the batch being built */
    VarCol key, value, hkey, hvalue;
    Buf offset, timestamp, tstype, hoffsets;
    int64_t rows;
    int32_t hcount;
    /* the partition's leader in the last metadata answer (topic_error), for log lines */
    int32_t leader_id; /* -1: not known yet */
    char leader_name[300];
} Fetcher;

static void push_event(Fetcher *f, int kind, int code, const char *text) {
    pthread_mutex_lock(&f->lock);
    if (f->n_events < EVENTS_MAX) {
        ClientEvent *e = &f->events[f->n_events++];
        e->kind = kind;
        e->code = code;
        snprintf(e->text, sizeof e->text, "%s", text ? text : "");
    } else {
        f->dropped_events++;
    }
    pthread_mutex_unlock(&f->lock);
}

static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
    (void)rk;
    push_event((Fetcher *)opaque, 0, err, reason);
}

static void on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf) {
    Fetcher *f = (Fetcher *)rd_kafka_opaque(rk);
    char line[512];
    snprintf(line, sizeof line, "%s: %s", fac, buf);
    if (f) push_event(f, 1, level, line);
}

static int batch_reset(Fetcher *f) {
    f->offset.len = f->timestamp.len = f->tstype.len = f->hoffsets.len = 0;
    f->rows = 0;
    f->hcount = 0;
    if (varcol_reset(&f->key) || varcol_reset(&f->value) || varcol_reset(&f->hkey) ||
        varcol_reset(&f->hvalue) || buf_reserve(&f->hoffsets, 4))
        return -1;
    buf_append_i32(&f->hoffsets, 0);
    return 0;
}

/* With the GIL held and no call running; the pointers are cleared before the GIL is
 * released, so a call from another thread meanwhile finds the Fetcher closed. */
static void fetcher_close_client(Fetcher *f) {
    while (f->carry_from < f->carry_to) rd_kafka_message_destroy(f->msgs[f->carry_from++]);
    rd_kafka_t *rk = f->rk;
    rd_kafka_topic_t *rkt = f->rkt;
    rd_kafka_queue_t *queue = f->queue;
    int started = f->started;
    f->rk = NULL;
    f->rkt = NULL;
    f->queue = NULL;
    f->started = 0;
    if (!rk) return;
    Py_BEGIN_ALLOW_THREADS
    if (started) rd_kafka_consume_stop(rkt, f->partition);
    if (queue) rd_kafka_queue_destroy(queue);
    if (rkt) rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    Py_END_ALLOW_THREADS
}

static void Fetcher_dealloc(Fetcher *f) {
    fetcher_close_client(f);
    free(f->msgs);
    free(f->topic);
    varcol_free(&f->key);
    varcol_free(&f->value);
    varcol_free(&f->hkey);
    varcol_free(&f->hvalue);
    free(f->offset.data);
    free(f->timestamp.data);
    free(f->tstype.data);
    free(f->hoffsets.data);
    if (f->lock_ready) pthread_mutex_destroy(&f->lock);
    Py_TYPE(f)->tp_free((PyObject *)f);
}

static int Fetcher_init(Fetcher *f, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"config", "topic", "partition", "headers", "max_bytes", NULL};
    PyObject *config;
    const char *topic;
    int partition, headers;
    Py_ssize_t max_bytes = INT32_MAX;
    char errstr[512];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Osip|n", kwlist, &config, &topic, &partition,
                                     &headers, &max_bytes))
        return -1;
    if (max_bytes < 1 || max_bytes > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "max_bytes must be in 1..2**31-1");
        return -1;
    }
    f->max_bytes = (size_t)max_bytes;
    if (f->rk || f->topic) {
        PyErr_SetString(PyExc_RuntimeError, "Fetcher already initialised");
        return -1;
    }
    if (!f->lock_ready) {
        pthread_mutex_init(&f->lock, NULL);
        f->lock_ready = 1;
    }
    f->topic = strdup(topic);
    f->partition = partition;
    f->leader_id = -1;
    f->leader_name[0] = '\0';
    f->headers = headers;
    f->msgs_cap = 1024;
    f->msgs = calloc(f->msgs_cap, sizeof *f->msgs);
    if (!f->topic || !f->msgs || batch_reset(f)) {
        PyErr_NoMemory();
        return -1;
    }
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    PyObject *items = PySequence_Fast(config, "config must be a sequence of (name, value)");
    if (!items) {
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(items); i++) {
        const char *name, *value;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(items, i), "ss", &name, &value)) {
            Py_DECREF(items);
            rd_kafka_conf_destroy(conf);
            return -1;
        }
        if (rd_kafka_conf_set(conf, name, value, errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
            /* errstr names the setting; values are never echoed by librdkafka here */
            PyErr_SetString(PyExc_ValueError, errstr);
            Py_DECREF(items);
            rd_kafka_conf_destroy(conf);
            return -1;
        }
    }
    Py_DECREF(items);
    rd_kafka_conf_set_opaque(conf, f);
    rd_kafka_conf_set_error_cb(conf, on_error);
    rd_kafka_conf_set_log_cb(conf, on_log);
    f->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    if (!f->rk) { /* conf is still ours on failure */
        rd_kafka_conf_destroy(conf);
        PyErr_SetString(PyExc_ValueError, errstr);
        return -1;
    }
    /* topic settings (auto.offset.reset) come from the default topic conf */
    f->rkt = rd_kafka_topic_new(f->rk, f->topic, NULL);
    f->queue = rd_kafka_queue_new(f->rk);
    if (!f->rkt || !f->queue) {
        PyErr_Format(PyExc_ValueError, "cannot read topic %s: %s", f->topic,
                     rd_kafka_err2str(rd_kafka_last_error()));
        fetcher_close_client(f);
        return -1;
    }
    return 0;
}

/* Enter a call: the Fetcher is open and no other thread runs a call. */
static int enter(Fetcher *f) {
    if (!f->rk || atomic_load(&f->closing)) {
        PyErr_SetString(PyExc_RuntimeError, "Fetcher is closed");
        return -1;
    }
    if (f->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Fetcher is in use by another thread");
        return -1;
    }
    f->busy = 1;
    return 0;
}

/* Leave a call (GIL held); close now if close() was asked while it ran. */
static void leave(Fetcher *f) {
    f->busy = 0;
    if (atomic_load(&f->closing)) fetcher_close_client(f);
}

/* librdkafka's free text as str; never fails on bytes that are not UTF-8. */
static PyObject *text_of(const char *s) {
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

static PyObject *Fetcher_watermarks(Fetcher *f, PyObject *args) {
    int timeout_ms;
    int64_t low = -1, high = -1;
    if (!PyArg_ParseTuple(args, "i", &timeout_ms) || enter(f)) return NULL;
    rd_kafka_resp_err_t err;
    Py_BEGIN_ALLOW_THREADS
    err = rd_kafka_query_watermark_offsets(f->rk, f->topic, f->partition, &low, &high,
                                           timeout_ms);
    rd_kafka_poll(f->rk, 0); /* error_cb for what went wrong meanwhile */
    Py_END_ALLOW_THREADS
    leave(f);
    return Py_BuildValue("iLLN", (int)err, (long long)low, (long long)high,
                         text_of(rd_kafka_err2str(err)));
}

/* The broker's error for the topic in a fresh metadata request (0: none). Kafka hides a
 * topic the user may not Describe, and librdkafka then reports it unknown, as if it
 * had been deleted; this tells the two apart. */
static PyObject *Fetcher_topic_error(Fetcher *f, PyObject *args) {
    int timeout_ms;
    if (!PyArg_ParseTuple(args, "i", &timeout_ms) || enter(f)) return NULL;
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err;
    Py_BEGIN_ALLOW_THREADS
    err = rd_kafka_metadata(f->rk, 0, f->rkt, &md, timeout_ms);
    if (!err && md) err = md->topic_cnt > 0 ? md->topics[0].err : RD_KAFKA_RESP_ERR_NO_ERROR;
    if (md && md->topic_cnt > 0) {
        for (int i = 0; i < md->topics[0].partition_cnt; i++) {
            if (md->topics[0].partitions[i].id != f->partition) continue;
            int32_t leader = md->topics[0].partitions[i].leader;
            f->leader_id = leader;
            f->leader_name[0] = '\0';
            for (int b = 0; b < md->broker_cnt; b++)
                if (md->brokers[b].id == leader)
                    snprintf(f->leader_name, sizeof f->leader_name, "%s:%d",
                             md->brokers[b].host, md->brokers[b].port);
        }
    }
    if (md) rd_kafka_metadata_destroy(md);
    Py_END_ALLOW_THREADS
    leave(f);
    return Py_BuildValue("iN", (int)err, text_of(rd_kafka_err2str(err)));
}

/* The partition's leader as the last topic_error() heard it: (node id or -1, "host:port"
 * or ""). No request: safe while another call runs (a torn read only garbles a log line). */
static PyObject *Fetcher_leader(Fetcher *f, PyObject *noargs) {
    (void)noargs;
    char name[sizeof f->leader_name];
    memcpy(name, f->leader_name, sizeof name);
    name[sizeof name - 1] = '\0';
    return Py_BuildValue("iN", (int)f->leader_id, text_of(name));
}

static PyObject *Fetcher_serve(Fetcher *f, PyObject *args) {
    int timeout_ms;
    if (!PyArg_ParseTuple(args, "i", &timeout_ms) || enter(f)) return NULL;
    Py_BEGIN_ALLOW_THREADS
    rd_kafka_poll(f->rk, timeout_ms); /* the simple consumer's main queue: error_cb */
    Py_END_ALLOW_THREADS
    leave(f);
    Py_RETURN_NONE;
}

static PyObject *Fetcher_assign(Fetcher *f, PyObject *args) {
    long long offset;
    if (!PyArg_ParseTuple(args, "L", &offset) || enter(f)) return NULL;
    /* messages fetched under the old start are stale now (librdkafka drops the ones
     * still queued: a new start bumps the partition's op version) */
    while (f->carry_from < f->carry_to) rd_kafka_message_destroy(f->msgs[f->carry_from++]);
    int r, restarted = f->started;
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    Py_BEGIN_ALLOW_THREADS
    r = restarted ? rd_kafka_consume_stop(f->rkt, f->partition) : 0;
    if (!r) r = rd_kafka_consume_start_queue(f->rkt, f->partition, offset, f->queue);
    if (r) err = rd_kafka_last_error();
    Py_END_ALLOW_THREADS
    f->started = !r;
    leave(f);
    if (r) {
        PyErr_Format(PyExc_RuntimeError, "assign failed: %s", rd_kafka_err2str(err));
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *Fetcher_stop(Fetcher *f, PyObject *noargs) {
    (void)noargs;
    if (enter(f)) return NULL;
    /* an idle Fetcher in the pool fetches nothing and holds no messages; its client,
     * connections and metadata stay for the next range */
    while (f->carry_from < f->carry_to) rd_kafka_message_destroy(f->msgs[f->carry_from++]);
    int r = 0, started = f->started;
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    Py_BEGIN_ALLOW_THREADS
    if (started) r = rd_kafka_consume_stop(f->rkt, f->partition);
    if (r) err = rd_kafka_last_error();
    Py_END_ALLOW_THREADS
    f->started = 0;
    leave(f);
    if (r) {
        PyErr_Format(PyExc_RuntimeError, "stop failed: %s", rd_kafka_err2str(err));
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *Fetcher_position(Fetcher *f, PyObject *noargs) {
    (void)noargs;
    if (enter(f)) return NULL;
    long long offset = -1;
    int carried = 0;
    /* librdkafka counts carried messages as consumed; the reader has not taken them */
    for (size_t i = f->carry_from; i < f->carry_to && !carried; i++)
        if (!f->msgs[i]->err) {
            offset = f->msgs[i]->offset;
            carried = 1;
        }
    if (!carried) {
        rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(list, f->topic, f->partition);
        rd_kafka_position(f->rk, list);
        offset = list->elems[0].offset;
        rd_kafka_topic_partition_list_destroy(list);
    }
    leave(f);
    return PyLong_FromLongLong(offset);
}

/* Copy one data message into the batch. Returns 1 if it did not fit (a column would
 * pass max_bytes, at most what int32 offsets address), 0 when copied, -1 when an
 * allocation failed -- before any column was written, so all stay one length. */
static int copy_message(Fetcher *f, const rd_kafka_message_t *m) {
    rd_kafka_headers_t *hdrs = NULL;
    size_t hn = 0, hnames = 0, hvalues = 0;
    const char *name;
    const void *val;
    size_t size;
    if (f->headers && rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        for (; !rd_kafka_header_get_all(hdrs, hn, &name, &val, &size); hn++) {
            hnames += strlen(name);
            hvalues += size;
        }
    } else {
        hdrs = NULL;
    }
    /* a batch always takes its first record, so one oversized record cannot stall */
    if (f->rows > 0 &&
        (!varcol_fits(&f->key, m->key_len, f->max_bytes) ||
         !varcol_fits(&f->value, m->len, f->max_bytes) ||
         !varcol_fits(&f->hkey, hnames, f->max_bytes) ||
         !varcol_fits(&f->hvalue, hvalues, f->max_bytes)))
        return 1;
    if (varcol_reserve(&f->key, 1, m->key_len) || varcol_reserve(&f->value, 1, m->len) ||
        buf_reserve(&f->offset, 8) || buf_reserve(&f->timestamp, 8) ||
        buf_reserve(&f->tstype, 4) ||
        (f->headers && (buf_reserve(&f->hoffsets, 4) || varcol_reserve(&f->hkey, hn, hnames) ||
                        varcol_reserve(&f->hvalue, hn, hvalues))))
        return -1;
    rd_kafka_timestamp_type_t tstype;
    int64_t ts = rd_kafka_message_timestamp(m, &tstype);
    varcol_append(&f->key, m->key, m->key_len, m->key == NULL);
    varcol_append(&f->value, m->payload, m->len, m->payload == NULL);
    buf_append_i64(&f->offset, m->offset);
    buf_append_i64(&f->timestamp, ts);
    /* librdkafka: 0 none, 1 CreateTime, 2 LogAppendTime; Spark: -1, 0, 1 */
    buf_append_i32(&f->tstype, (int32_t)tstype - 1);
    if (f->headers) {
        for (size_t i = 0; hdrs && i < hn; i++) {
            rd_kafka_header_get_all(hdrs, i, &name, &val, &size);
            varcol_append(&f->hkey, name, strlen(name), 0);
            varcol_append(&f->hvalue, val, size, val == NULL);
            f->hcount++;
        }
        buf_append_i32(&f->hoffsets, f->hcount);
    }
    f->rows++;
    return 0;
}

#define MAX_FETCH_EVENTS 16

static PyObject *Fetcher_fetch(Fetcher *f, PyObject *args) {
    long long want, end;
    int timeout_ms;
    if (!PyArg_ParseTuple(args, "LLi", &want, &end, &timeout_ms) || enter(f)) return NULL;
    /* per-partition events (EOF, errors), in the order librdkafka delivered them */
    struct {
        int code;
        long long offset;
        char text[256];
    } evs[MAX_FETCH_EVENTS];
    int n_evs = 0, hit_end = 0, full = 0, oom = 0;
    long long added = 0, next = -1;
    Py_BEGIN_ALLOW_THREADS
    while (added < want && !hit_end && !full && !oom && n_evs == 0 &&
           !atomic_load(&f->closing)) {
        if (f->carry_from == f->carry_to) {
            size_t ask = (size_t)(want - added) < f->msgs_cap ? (size_t)(want - added)
                                                              : f->msgs_cap;
            ssize_t got = rd_kafka_consume_batch_queue(f->queue, timeout_ms, f->msgs, ask);
            if (got <= 0) break; /* nothing within timeout_ms (or woken): Python looks around */
            f->carry_from = 0;
            f->carry_to = (size_t)got;
        }
        while (f->carry_from < f->carry_to) {
            rd_kafka_message_t *m = f->msgs[f->carry_from];
            if (m->err) {
                if (n_evs == MAX_FETCH_EVENTS) break; /* the rest waits for the next call */
                evs[n_evs].code = m->err;
                evs[n_evs].offset = m->offset;
                snprintf(evs[n_evs].text, sizeof evs[n_evs].text, "%s",
                         rd_kafka_message_errstr(m));
                n_evs++;
            } else if (m->offset >= end || hit_end) {
                hit_end = 1;
            } else if (added < want) {
                int r = copy_message(f, m);
                if (r > 0) { /* batch full by bytes: keep m and the rest for later */
                    full = 1;
                    break;
                }
                if (r < 0) { /* keep m: nothing of it was copied */
                    oom = 1;
                    break;
                }
                added++;
                next = m->offset + 1;
            } else {
                break; /* keep the rest for the next call */
            }
            rd_kafka_message_destroy(m);
            f->carry_from++;
        }
    }
    rd_kafka_poll(f->rk, 0); /* client errors (error_cb) of this fetch */
    Py_END_ALLOW_THREADS
    leave(f);
    if (oom) return PyErr_NoMemory();
    PyObject *events = PyList_New(n_evs);
    if (!events) return NULL;
    for (int i = 0; i < n_evs; i++) {
        PyObject *ev = Py_BuildValue("iLN", evs[i].code, evs[i].offset, text_of(evs[i].text));
        if (!ev) {
            Py_DECREF(events);
            return NULL;
        }
        PyList_SET_ITEM(events, i, ev);
    }
    return Py_BuildValue("LLOiN", added, next, hit_end ? Py_True : Py_False, full, events);
}

static PyObject *bytes_of(const Buf *b) {
    return PyBytes_FromStringAndSize(b->data ? b->data : "", (Py_ssize_t)b->len);
}

/* A VarCol as (validity or None, offsets, data). */
static PyObject *varcol_tuple(const VarCol *c) {
    PyObject *valid;
    if (c->nulls) {
        valid = bytes_of(&c->valid);
    } else {
        valid = Py_None;
        Py_INCREF(valid);
    }
    return Py_BuildValue("NNN", valid, bytes_of(&c->offsets), bytes_of(&c->data));
}

static PyObject *Fetcher_take(Fetcher *f, PyObject *noargs) {
    (void)noargs;
    if (f->busy) { /* the running fetch writes these buffers */
        PyErr_SetString(PyExc_RuntimeError, "Fetcher is in use by another thread");
        return NULL;
    }
    PyObject *out;
    if (f->headers) {
        out = Py_BuildValue("LNNNNNNNNL", (long long)f->rows, varcol_tuple(&f->key),
                            varcol_tuple(&f->value), bytes_of(&f->offset), bytes_of(&f->timestamp),
                            bytes_of(&f->tstype), bytes_of(&f->hoffsets), varcol_tuple(&f->hkey),
                            varcol_tuple(&f->hvalue), (long long)f->hcount);
    } else {
        out = Py_BuildValue("LNNNNNOOOi", (long long)f->rows, varcol_tuple(&f->key),
                            varcol_tuple(&f->value), bytes_of(&f->offset), bytes_of(&f->timestamp),
                            bytes_of(&f->tstype), Py_None, Py_None, Py_None, 0);
    }
    if (out && batch_reset(f)) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    return out;
}

static PyObject *Fetcher_rows(Fetcher *f, void *closure) {
    (void)closure;
    return PyLong_FromLongLong(f->rows);
}

static PyObject *Fetcher_client_events(Fetcher *f, PyObject *noargs) {
    (void)noargs;
    ClientEvent copy[EVENTS_MAX];
    int n, dropped;
    pthread_mutex_lock(&f->lock);
    n = f->n_events;
    dropped = f->dropped_events;
    memcpy(copy, f->events, sizeof(ClientEvent) * (size_t)n);
    f->n_events = f->dropped_events = 0;
    pthread_mutex_unlock(&f->lock);
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *ev = Py_BuildValue("siN", copy[i].kind ? "log" : "error", copy[i].code,
                                     text_of(copy[i].text));
        if (!ev || PyList_Append(out, ev)) {
            Py_XDECREF(ev);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(ev);
    }
    if (dropped) {
        char text[64];
        snprintf(text, sizeof text, "%d client events dropped", dropped);
        PyObject *ev = Py_BuildValue("sis", "log", 4, text);
        if (!ev || PyList_Append(out, ev)) {
            Py_XDECREF(ev);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(ev);
    }
    return out;
}

static PyObject *Fetcher_close(Fetcher *f, PyObject *noargs) {
    (void)noargs;
    if (f->busy) { /* a call runs on another thread: wake it; it closes when it ends */
        atomic_store(&f->closing, 1);
        if (f->queue) rd_kafka_queue_yield(f->queue);
    } else {
        fetcher_close_client(f);
    }
    Py_RETURN_NONE;
}

static PyMethodDef Fetcher_methods[] = {
    {"watermarks", (PyCFunction)Fetcher_watermarks, METH_VARARGS,
     "watermarks(timeout_ms) -> (err, low, high, errstr)"},
    {"topic_error", (PyCFunction)Fetcher_topic_error, METH_VARARGS,
     "topic_error(timeout_ms) -> (err, errstr): the topic's error in fresh metadata"},
    {"leader", (PyCFunction)Fetcher_leader, METH_NOARGS,
     "leader() -> (node_id, host_port): the partition's leader in the last topic_error()"},
    {"serve", (PyCFunction)Fetcher_serve, METH_VARARGS,
     "serve(timeout_ms): run error_cb for the client errors queued so far"},
    {"assign", (PyCFunction)Fetcher_assign, METH_VARARGS, "assign(offset)"},
    {"stop", (PyCFunction)Fetcher_stop, METH_NOARGS, "stop(): fetch nothing more until assign()"},
    {"position", (PyCFunction)Fetcher_position, METH_NOARGS, "position() -> offset"},
    {"fetch", (PyCFunction)Fetcher_fetch, METH_VARARGS,
     "fetch(want, end, timeout_ms) -> (added, next_offset, hit_end, full, events)"},
    {"take", (PyCFunction)Fetcher_take, METH_NOARGS, "take() -> buffered rows; resets"},
    {"client_events", (PyCFunction)Fetcher_client_events, METH_NOARGS,
     "client_events() -> [(kind, code_or_level, text)]"},
    {"close", (PyCFunction)Fetcher_close, METH_NOARGS,
     "close(): now, or when the call running on another thread ends"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Fetcher_getset[] = {
    {"rows", (getter)Fetcher_rows, NULL, "rows buffered for the next take()", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject FetcherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sparkbarrier.connectors.kafka.reader._rdkafka_arrow.Fetcher",
    .tp_basicsize = sizeof(Fetcher),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One group-less librdkafka consumer of one partition, copying into Arrow buffers.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Fetcher_init,
    .tp_dealloc = (destructor)Fetcher_dealloc,
    .tp_methods = Fetcher_methods,
    .tp_getset = Fetcher_getset,
};

/* Test-only hook (tests/connectors/kafka/test_native_fetcher.py). */
static PyObject *fail_allocation(PyObject *self, PyObject *args) {
    (void)self;
    long n;
    if (!PyArg_ParseTuple(args, "l", &n)) return NULL;
    fail_reserve_in = n > 0 ? n : 0;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"_fail_allocation", fail_allocation, METH_VARARGS,
     "_fail_allocation(n): test only -- the n-th buffer reservation from now fails (0: none)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rdkafka_arrow_c",
    "librdkafka messages copied into Arrow column buffers (see _native_reader.py).", -1,
    module_methods,
};

/* 2.6.1 final, in rd_kafka_version()'s 0xMMmmrrxx form (xx = 0xff for a release) */
#define MIN_LIBRDKAFKA 0x020601ff

PyMODINIT_FUNC PyInit__rdkafka_arrow_c(void) {
    if (rd_kafka_version() < MIN_LIBRDKAFKA) {
        PyErr_Format(PyExc_ImportError,
                     "it runs on librdkafka %s, older than 2.6.1 (its SCRAM login fails "
                     "on Kafka 4 brokers)",
                     rd_kafka_version_str());
        return NULL;
    }
    if (PyType_Ready(&FetcherType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&FetcherType);
    if (PyModule_AddObject(m, "Fetcher", (PyObject *)&FetcherType) < 0) {
        Py_DECREF(&FetcherType);
        Py_DECREF(m);
        return NULL;
    }
    /* the librdkafka this process runs on (not the header's RD_KAFKA_VERSION) */
    PyModule_AddStringConstant(m, "librdkafka_version", rd_kafka_version_str());
    PyModule_AddIntConstant(m, "librdkafka_version_int", rd_kafka_version());
    PyModule_AddIntConstant(m, "min_librdkafka_version_int", MIN_LIBRDKAFKA);
    /* librdkafka's error codes the reader acts on (same numbers as confluent-kafka's) */
    PyModule_AddIntConstant(m, "ERR_PARTITION_EOF", RD_KAFKA_RESP_ERR__PARTITION_EOF);
    PyModule_AddIntConstant(m, "ERR_AUTO_OFFSET_RESET", RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET);
    PyModule_AddIntConstant(m, "ERR_OFFSET_OUT_OF_RANGE", RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE);
    PyModule_AddIntConstant(m, "ERR_UNKNOWN_PARTITION", RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION);
    PyModule_AddIntConstant(m, "ERR_UNKNOWN_TOPIC", RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC);
    PyModule_AddIntConstant(m, "ERR_UNKNOWN_TOPIC_OR_PART",
                            RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART);
    PyModule_AddIntConstant(m, "ERR_FATAL", RD_KAFKA_RESP_ERR__FATAL);
    PyModule_AddIntConstant(m, "ERR_AUTHENTICATION", RD_KAFKA_RESP_ERR__AUTHENTICATION);
    PyModule_AddIntConstant(m, "ERR_SSL", RD_KAFKA_RESP_ERR__SSL);
    PyModule_AddIntConstant(m, "ERR_SASL_AUTHENTICATION_FAILED",
                            RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED);
    PyModule_AddIntConstant(m, "ERR_TOPIC_AUTHORIZATION_FAILED",
                            RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
    PyModule_AddIntConstant(m, "ERR_CLUSTER_AUTHORIZATION_FAILED",
                            RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED);
    PyModule_AddIntConstant(m, "ERR_TIMED_OUT", RD_KAFKA_RESP_ERR__TIMED_OUT);
    PyModule_AddIntConstant(m, "ERR_ALL_BROKERS_DOWN", RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN);
    PyModule_AddIntConstant(m, "ERR_TRANSPORT", RD_KAFKA_RESP_ERR__TRANSPORT);
    return m;
}
