/* The worker page: what a worker is doing, in memory corrald can read at
 * any moment — while the worker serves, while its loop is stuck, and after
 * it died (corrald keeps its own mapping until the post-mortem is written).
 *
 * corrald creates one page per generation (a sealed memfd of
 * CR_WPAGE_SIZE bytes: it can be neither shrunk nor grown, so a worker
 * cannot make corrald's reads fault) and passes it as fd 5 with
 * CORRAL_PAGE_FD=5. The layout is fixed and little-endian, given as byte
 * offsets so that a runtime without C structs (Node's fs.writeSync with a
 * position, Python's mmap) writes the same bytes; docs/worker-protocol.md
 * is the reference. Two parts:
 *
 * - The request record (the worker writes, corrald reads): the request
 *   the worker is serving now — the newest one started and not finished —
 *   its method, target (path and query, cut to CR_WPAGE_TARGET_MAX),
 *   start time (CLOCK_MONOTONIC ns: process.hrtime.bigint() in Node,
 *   time.monotonic_ns() in Python) and the count in flight. A writer that
 *   can map memory updates it with plain stores, no system call. It is
 *   guarded by a sequence number written twice: the first copy stored
 *   before any field, the second after every field, as three separate
 *   stores (cr_wpage_write_request; the Python helper's three slice
 *   assignments). A reader that finds both equal read a whole record.
 *   Never one memcpy of the whole record: glibc's memcpy of a few hundred
 *   bytes stores the head of the copy last (x86-64, AVX2), so the first
 *   sequence number would change after the fields, and a reader would take
 *   a half-written record for a whole one (tests/unit/core/test_page.c
 *   counts hundreds a second).
 *
 * - The stack exchange: corrald raises CR_WPAGE_STACK_REQ to ask for the
 *   stack of the worker's main thread (before a hang kill, or for
 *   `corralctl stack`); a worker that can answer (it says so in
 *   CR_WPAGE_FEATURES) writes the text, then its length, then sets
 *   CR_WPAGE_STACK_ANS to the request's number. The answer comes from
 *   another thread of the worker, since the main one is what is stuck: a
 *   futex wait on CR_WPAGE_STACK_REQ (corrald wakes it) or a poll of it.
 *
 * Header only, for corrald, the reference worker and the tests. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define CR_WPAGE_SIZE 16384
#define CR_WPAGE_FD 5
#define CR_WPAGE_ENV "CORRAL_PAGE_FD"
#define CR_WPAGE_MAGIC 0x50575243u /* "CRWP" */
#define CR_WPAGE_VERSION 1u

/* Header (corrald writes magic and version once; the worker its features). */
#define CR_WPAGE_OFF_MAGIC 0
#define CR_WPAGE_OFF_VERSION 4
#define CR_WPAGE_OFF_FEATURES 8
#define CR_WPAGE_F_REQUEST 1u /* the worker keeps the request record */
#define CR_WPAGE_F_STACK 2u   /* the worker answers stack requests */

/* The request record. */
#define CR_WPAGE_OFF_REQ 64
#define CR_WPAGE_OFF_SEQ_BEGIN 64 /* u32 */
#define CR_WPAGE_OFF_INFLIGHT 68  /* u32: requests started, not finished */
#define CR_WPAGE_OFF_STARTED 72   /* u64: CLOCK_MONOTONIC ns; 0 = none being served */
#define CR_WPAGE_OFF_COUNT 80     /* u64: requests started since the worker began */
#define CR_WPAGE_OFF_METHOD_LEN 88 /* u16 */
#define CR_WPAGE_OFF_TARGET_LEN 90 /* u16 */
#define CR_WPAGE_OFF_METHOD 96    /* CR_WPAGE_METHOD_MAX bytes */
#define CR_WPAGE_METHOD_MAX 16
#define CR_WPAGE_OFF_TARGET 112 /* CR_WPAGE_TARGET_MAX bytes */
#define CR_WPAGE_TARGET_MAX 384
#define CR_WPAGE_OFF_SEQ_END 496 /* u32 */
#define CR_WPAGE_REQ_LEN (CR_WPAGE_OFF_SEQ_END + 4 - CR_WPAGE_OFF_REQ)

/* The stack exchange. */
#define CR_WPAGE_OFF_STACK_REQ 512 /* u32, corrald: the request's number */
#define CR_WPAGE_OFF_STACK_ANS 516 /* u32, worker: the number answered */
#define CR_WPAGE_OFF_STACK_LEN 520 /* u32, worker: bytes of text */
#define CR_WPAGE_OFF_SOURCE 528    /* worker: who took it ("corral-worker", NUL-padded) */
#define CR_WPAGE_SOURCE_MAX 32
#define CR_WPAGE_OFF_STACK 1024
#define CR_WPAGE_STACK_MAX (CR_WPAGE_SIZE - CR_WPAGE_OFF_STACK)

/* The request record as read. */
struct cr_wpage_request {
    uint32_t inflight;
    uint64_t started_ns; /* 0: none being served */
    uint64_t count;
    char method[CR_WPAGE_METHOD_MAX + 1];
    char target[CR_WPAGE_TARGET_MAX + 1];
};

static inline _Atomic uint32_t *cr_wpage_u32(void *page, unsigned off)
{
    return (_Atomic uint32_t *)((char *)page + off);
}

static inline uint64_t cr_wpage_get_u64(const void *page, unsigned off)
{
    uint64_t v;
    memcpy(&v, (const char *)page + off, sizeof(v));
    return v;
}

static inline void cr_wpage_put_u64(void *page, unsigned off, uint64_t v)
{
    memcpy((char *)page + off, &v, sizeof(v));
}

/* Copies the request record out of a page another process writes. false
 * when it was being rewritten on every one of a few tries (or is not
 * kept): the caller says "unknown", it never waits. */
static inline bool cr_wpage_read_request(void *page, struct cr_wpage_request *ret)
{
    for (int tries = 0; tries < 4; tries++) {
        uint32_t end = atomic_load_explicit(cr_wpage_u32(page, CR_WPAGE_OFF_SEQ_END),
                                            memory_order_acquire);
        struct cr_wpage_request r = {0};
        r.inflight = atomic_load_explicit(cr_wpage_u32(page, CR_WPAGE_OFF_INFLIGHT),
                                          memory_order_relaxed);
        r.started_ns = cr_wpage_get_u64(page, CR_WPAGE_OFF_STARTED);
        r.count = cr_wpage_get_u64(page, CR_WPAGE_OFF_COUNT);
        uint16_t ml, tl;
        memcpy(&ml, (char *)page + CR_WPAGE_OFF_METHOD_LEN, sizeof(ml));
        memcpy(&tl, (char *)page + CR_WPAGE_OFF_TARGET_LEN, sizeof(tl));
        if (ml > CR_WPAGE_METHOD_MAX)
            ml = CR_WPAGE_METHOD_MAX;
        if (tl > CR_WPAGE_TARGET_MAX)
            tl = CR_WPAGE_TARGET_MAX;
        memcpy(r.method, (char *)page + CR_WPAGE_OFF_METHOD, ml);
        memcpy(r.target, (char *)page + CR_WPAGE_OFF_TARGET, tl);
        atomic_thread_fence(memory_order_acquire);
        uint32_t begin = atomic_load_explicit(cr_wpage_u32(page, CR_WPAGE_OFF_SEQ_BEGIN),
                                              memory_order_relaxed);
        if (begin == end) {
            *ret = r;
            return true;
        }
    }
    return false;
}

/* The writer's side, for a worker that maps the page: the record of the
 * request now being served (method and target are cut to their bounds;
 * started_ns 0 with empty strings: none). seq is the writer's own
 * counter, one more each call. */
static inline void cr_wpage_write_request(void *page, uint32_t *seq, uint32_t inflight,
                                          uint64_t started_ns, uint64_t count, const char *method,
                                          size_t mlen, const char *target, size_t tlen)
{
    uint32_t s = ++*seq;
    atomic_store_explicit(cr_wpage_u32(page, CR_WPAGE_OFF_SEQ_BEGIN), s, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(cr_wpage_u32(page, CR_WPAGE_OFF_INFLIGHT), inflight,
                          memory_order_relaxed);
    cr_wpage_put_u64(page, CR_WPAGE_OFF_STARTED, started_ns);
    cr_wpage_put_u64(page, CR_WPAGE_OFF_COUNT, count);
    uint16_t ml = (uint16_t)(mlen > CR_WPAGE_METHOD_MAX ? CR_WPAGE_METHOD_MAX : mlen);
    uint16_t tl = (uint16_t)(tlen > CR_WPAGE_TARGET_MAX ? CR_WPAGE_TARGET_MAX : tlen);
    memcpy((char *)page + CR_WPAGE_OFF_METHOD_LEN, &ml, sizeof(ml));
    memcpy((char *)page + CR_WPAGE_OFF_TARGET_LEN, &tl, sizeof(tl));
    if (ml)
        memcpy((char *)page + CR_WPAGE_OFF_METHOD, method, ml);
    if (tl)
        memcpy((char *)page + CR_WPAGE_OFF_TARGET, target, tl);
    atomic_store_explicit(cr_wpage_u32(page, CR_WPAGE_OFF_SEQ_END), s, memory_order_release);
}
