/* The taskstats exit messages (the kernel's exit notice) and the requests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/taskstats.h>

#include "taskstats.h"

#define FAMILY 31

/* A message as the kernel builds one: per-thread part, and the group part
 * when tgid > 0; stats_len bytes of taskstats after each id. */
struct msg {
    unsigned char b[2048];
    size_t len;
};

static void put(struct msg *m, const void *p, size_t n)
{
    memcpy(m->b + m->len, p, n);
    m->len += n;
}

static size_t attr(struct msg *m, uint16_t type, const void *p, size_t n)
{
    size_t at = m->len;
    struct nlattr a = {.nla_len = (uint16_t)(NLA_HDRLEN + n), .nla_type = type};
    put(m, &a, sizeof(a));
    if (p)
        put(m, p, n);
    else
        memset(m->b + m->len, 0, n), m->len += n;
    m->len = at + NLA_ALIGN(a.nla_len);
    return at;
}

static size_t nest_begin(struct msg *m, uint16_t type)
{
    size_t at = m->len;
    struct nlattr a = {.nla_len = 0, .nla_type = type};
    put(m, &a, sizeof(a));
    return at;
}

static void nest_end(struct msg *m, size_t at)
{
    struct nlattr a;
    memcpy(&a, m->b + at, sizeof(a));
    a.nla_len = (uint16_t)(m->len - at);
    memcpy(m->b + at, &a, sizeof(a));
}

static void exit_msg(struct msg *m, uint16_t family, uint32_t pid, uint32_t tgid)
{
    size_t start = m->len;
    struct nlmsghdr h = {.nlmsg_type = family};
    struct genlmsghdr g = {.cmd = TASKSTATS_CMD_NEW, .version = TASKSTATS_GENL_VERSION};
    put(m, &h, sizeof(h));
    put(m, &g, sizeof(g));
    size_t n = nest_begin(m, TASKSTATS_TYPE_AGGR_PID);
    attr(m, TASKSTATS_TYPE_PID, &pid, sizeof(pid));
    attr(m, TASKSTATS_TYPE_STATS, NULL, sizeof(struct taskstats));
    nest_end(m, n);
    if (tgid) {
        n = nest_begin(m, TASKSTATS_TYPE_AGGR_TGID);
        attr(m, TASKSTATS_TYPE_TGID, &tgid, sizeof(tgid));
        attr(m, TASKSTATS_TYPE_STATS, NULL, sizeof(struct taskstats));
        nest_end(m, n);
    }
    h.nlmsg_len = (uint32_t)(m->len - start);
    memcpy(m->b + start, &h, sizeof(h));
    m->len = start + NLMSG_ALIGN(h.nlmsg_len);
}

struct seen {
    struct cr_taskstats_exit e[8];
    size_t n;
};

static void collect(void *ctx, const struct cr_taskstats_exit *e)
{
    struct seen *s = ctx;
    if (s->n < 8)
        s->e[s->n++] = *e;
}

static void test_thread_and_group(void **state)
{
    (void)state;
    struct msg m = {0};
    exit_msg(&m, FAMILY, 1234, 0);    /* a thread, or a single-threaded process */
    exit_msg(&m, FAMILY, 1240, 1234); /* the last thread of 1234: the process */
    struct seen s = {0};
    assert_int_equal(cr_taskstats_scan(m.b, m.len, FAMILY, collect, &s), 2);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.e[0].pid, 1234);
    assert_int_equal(s.e[0].tgid, 0);
    assert_false(s.e[0].whole_group);
    assert_int_equal(s.e[1].pid, 1240);
    assert_int_equal(s.e[1].tgid, 1234);
    assert_true(s.e[1].whole_group);
}

static void test_other_family_and_cmd_ignored(void **state)
{
    (void)state;
    struct msg m = {0};
    exit_msg(&m, FAMILY + 1, 77, 77);
    exit_msg(&m, FAMILY, 78, 78);
    struct seen s = {0};
    assert_int_equal(cr_taskstats_scan(m.b, m.len, FAMILY, collect, &s), 1);
    assert_int_equal(s.e[0].tgid, 78);
    /* A GET (command 1) carries no exit. */
    struct msg g = {0};
    exit_msg(&g, FAMILY, 79, 79);
    g.b[NLMSG_HDRLEN] = TASKSTATS_CMD_GET;
    s.n = 0;
    assert_int_equal(cr_taskstats_scan(g.b, g.len, FAMILY, collect, &s), 0);
    /* Family 0 (not known yet) matches nothing. */
    assert_int_equal(cr_taskstats_scan(m.b, m.len, 0, collect, &s), 0);
}

static void test_truncated_and_malformed(void **state)
{
    (void)state;
    struct msg m = {0};
    exit_msg(&m, FAMILY, 500, 500);
    struct seen s = {0};
    /* Every prefix of a valid message, its length cut to match: no crash;
     * the group part is found only when it is whole, and nothing but the
     * message's own ids ever comes out. */
    for (size_t cut = 0; cut < m.len; cut++) {
        unsigned char copy[2048];
        memcpy(copy, m.b, cut);
        struct nlmsghdr h;
        if (cut >= sizeof(h)) { /* a header that claims only what is there */
            memcpy(&h, copy, sizeof(h));
            h.nlmsg_len = (uint32_t)cut;
            memcpy(copy, &h, sizeof(h));
        }
        s.n = 0;
        cr_taskstats_scan(copy, cut, FAMILY, collect, &s);
        assert_true(s.n <= 1);
        for (size_t i = 0; i < s.n; i++) {
            assert_true(s.e[i].pid == 500);
            assert_int_equal(s.e[i].tgid, 0); /* the group part comes last: never whole */
            assert_false(s.e[i].whole_group);
        }
    }
    s.n = 0;
    assert_int_equal(cr_taskstats_scan(m.b, m.len, FAMILY, collect, &s), 1);
    assert_true(s.e[0].whole_group);
    /* An attribute longer than its message. */
    struct msg bad = m;
    struct nlattr a;
    size_t first = NLMSG_LENGTH(GENL_HDRLEN);
    memcpy(&a, bad.b + first, sizeof(a));
    a.nla_len = 60000;
    memcpy(bad.b + first, &a, sizeof(a));
    s.n = 0;
    assert_int_equal(cr_taskstats_scan(bad.b, bad.len, FAMILY, collect, &s), 0);
    /* A message length beyond the buffer, or below a header. */
    bad = m;
    struct nlmsghdr h;
    memcpy(&h, m.b, sizeof(h));
    h.nlmsg_len = (uint32_t)m.len + 4;
    memcpy(bad.b, &h, sizeof(h));
    assert_int_equal(cr_taskstats_scan(bad.b, m.len, FAMILY, collect, &s), 0);
    h.nlmsg_len = 3;
    memcpy(bad.b, &h, sizeof(h));
    assert_int_equal(cr_taskstats_scan(bad.b, m.len, FAMILY, collect, &s), 0);
    /* A pid that does not fit a pid_t. */
    struct msg big = {0};
    exit_msg(&big, FAMILY, 0x80000000u, 0);
    assert_int_equal(cr_taskstats_scan(big.b, big.len, FAMILY, collect, &s), 0);
}

static void test_requests(void **state)
{
    (void)state;
    unsigned char b[256];
    size_t n = cr_taskstats_getfamily_msg(b, sizeof(b), 7);
    assert_true(n > NLMSG_LENGTH(GENL_HDRLEN));
    struct nlmsghdr h;
    memcpy(&h, b, sizeof(h));
    assert_int_equal(h.nlmsg_len, n);
    assert_int_equal(h.nlmsg_type, GENL_ID_CTRL);
    assert_int_equal(h.nlmsg_seq, 7);
    assert_int_equal(b[NLMSG_HDRLEN], CTRL_CMD_GETFAMILY);
    assert_string_equal((char *)b + NLMSG_LENGTH(GENL_HDRLEN) + NLA_HDRLEN, TASKSTATS_GENL_NAME);

    n = cr_taskstats_listen_msg(b, sizeof(b), FAMILY, 8, "0-3", true);
    memcpy(&h, b, sizeof(h));
    assert_int_equal(h.nlmsg_type, FAMILY);
    assert_true(h.nlmsg_flags & NLM_F_ACK);
    struct nlattr a;
    memcpy(&a, b + NLMSG_LENGTH(GENL_HDRLEN), sizeof(a));
    assert_int_equal(a.nla_type, TASKSTATS_CMD_ATTR_REGISTER_CPUMASK);
    assert_string_equal((char *)b + NLMSG_LENGTH(GENL_HDRLEN) + NLA_HDRLEN, "0-3");
    n = cr_taskstats_listen_msg(b, sizeof(b), FAMILY, 9, "0-3", false);
    memcpy(&a, b + NLMSG_LENGTH(GENL_HDRLEN), sizeof(a));
    assert_int_equal(a.nla_type, TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK);
    /* Too small a buffer. */
    assert_int_equal(cr_taskstats_listen_msg(b, 20, FAMILY, 9, "0-3", true), 0);
}

static void test_family_and_ack(void **state)
{
    (void)state;
    struct msg m = {0};
    struct nlmsghdr h = {.nlmsg_type = GENL_ID_CTRL};
    struct genlmsghdr g = {.cmd = CTRL_CMD_NEWFAMILY};
    put(&m, &h, sizeof(h));
    put(&m, &g, sizeof(g));
    attr(&m, CTRL_ATTR_FAMILY_NAME, TASKSTATS_GENL_NAME, sizeof(TASKSTATS_GENL_NAME));
    uint16_t id = FAMILY;
    attr(&m, CTRL_ATTR_FAMILY_ID, &id, sizeof(id));
    h.nlmsg_len = (uint32_t)m.len;
    memcpy(m.b, &h, sizeof(h));
    int error = 1;
    assert_int_equal(cr_taskstats_family_id(m.b, m.len, &error), FAMILY);
    assert_int_equal(error, 0);

    /* An error answer: -ENOENT when the kernel has no taskstats. */
    struct msg e = {0};
    struct nlmsghdr eh = {.nlmsg_type = NLMSG_ERROR, .nlmsg_seq = 5};
    struct nlmsgerr err = {.error = -2};
    put(&e, &eh, sizeof(eh));
    put(&e, &err, sizeof(err));
    eh.nlmsg_len = (uint32_t)e.len;
    memcpy(e.b, &eh, sizeof(eh));
    assert_int_equal(cr_taskstats_family_id(e.b, e.len, &error), 0);
    assert_int_equal(error, -2);

    /* The ack of request 5, after an exit message; not of request 6. */
    struct msg both = {0};
    exit_msg(&both, FAMILY, 42, 42);
    put(&both, e.b, e.len);
    assert_true(cr_taskstats_ack(both.b, both.len, 5, &error));
    assert_int_equal(error, -2);
    assert_false(cr_taskstats_ack(both.b, both.len, 6, &error));
    err.error = 0;
    memcpy(e.b + NLMSG_HDRLEN, &err, sizeof(err));
    assert_true(cr_taskstats_ack(e.b, e.len, 5, &error));
    assert_int_equal(error, 0);
}

/* /proc/<pid>/stat from its third field: state ppid pgrp session tty_nr
 * tpgid flags ... num_threads (20th). tpgid -1 (no terminal) sits right
 * before the flags: misread, it would look like every flag. */
static void test_exiting(void **state)
{
    (void)state;
    const char *running = "S 1 10 10 0 -1 4194560 300 0 0 0 5 3 0 0 20 0 1 0 100";
    const char *dying = "R 1 10 10 0 -1 4194564 300 0 0 0 5 3 0 0 20 0 1 0 100";
    const char *dying_threads = "R 1 10 10 0 -1 4194564 300 0 0 0 5 3 0 0 20 0 7 0 100";
    assert_false(cr_taskstats_exiting(running, true));
    assert_false(cr_taskstats_exiting(running, false));
    assert_true(cr_taskstats_exiting(dying, true));
    assert_true(cr_taskstats_exiting(dying, false));
    /* The main thread alone, others left: the process goes on. */
    assert_true(cr_taskstats_exiting(dying_threads, true));
    assert_false(cr_taskstats_exiting(dying_threads, false));
    /* Cut short before num_threads. */
    assert_false(cr_taskstats_exiting("R 1 10 10 0 -1 4194564 300", true));
    assert_false(cr_taskstats_exiting("", true));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thread_and_group),
        cmocka_unit_test(test_other_family_and_cmd_ignored),
        cmocka_unit_test(test_truncated_and_malformed),
        cmocka_unit_test(test_requests),
        cmocka_unit_test(test_family_and_ack),
        cmocka_unit_test(test_exiting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
