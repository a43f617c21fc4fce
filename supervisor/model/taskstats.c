/* taskstats: the exit messages of the kernel's taskstats interface, read
 * and the two requests built, without I/O (see taskstats.h). */
#include "taskstats.h"

#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/taskstats.h>
#include <stdlib.h>
#include <string.h>

/* The attributes of one level, each checked to lie inside the level. */
struct attrs {
    const unsigned char *p;
    size_t left;
};

static bool next_attr(struct attrs *a, uint16_t *type, const unsigned char **data, size_t *len)
{
    struct nlattr h;
    if (a->left < NLA_HDRLEN)
        return false;
    memcpy(&h, a->p, sizeof(h));
    if (h.nla_len < NLA_HDRLEN || h.nla_len > a->left)
        return false;
    *type = h.nla_type & NLA_TYPE_MASK;
    *data = a->p + NLA_HDRLEN;
    *len = h.nla_len - NLA_HDRLEN;
    size_t step = NLA_ALIGN(h.nla_len);
    if (step > a->left)
        step = a->left;
    a->p += step;
    a->left -= step;
    return true;
}

/* The first attribute of type want holding at least size bytes, copied
 * into out; false if there is none. */
static bool find_attr(const unsigned char *data, size_t len, uint16_t want, void *out,
                      size_t size)
{
    struct attrs in = {data, len};
    uint16_t type;
    const unsigned char *v;
    size_t vlen;
    while (next_attr(&in, &type, &v, &vlen))
        if (type == want && vlen >= size) {
            memcpy(out, v, size);
            return true;
        }
    return false;
}

/* The id (u32) inside an AGGR_PID or AGGR_TGID attribute; 0 if none. */
static pid_t nested_id(const unsigned char *data, size_t len, uint16_t want)
{
    uint32_t id;
    return find_attr(data, len, want, &id, sizeof(id)) && id <= INT32_MAX ? (pid_t)id : 0;
}

size_t cr_taskstats_scan(const void *buf, size_t len, uint16_t family,
                         void (*fn)(void *ctx, const struct cr_taskstats_exit *e), void *ctx)
{
    size_t found = 0;
    const unsigned char *p = buf;
    while (len >= NLMSG_HDRLEN) {
        struct nlmsghdr h;
        memcpy(&h, p, sizeof(h));
        if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > len)
            break;
        if (family && h.nlmsg_type == family && h.nlmsg_len >= NLMSG_LENGTH(GENL_HDRLEN)) {
            struct genlmsghdr g;
            memcpy(&g, p + NLMSG_HDRLEN, sizeof(g));
            struct attrs top = {p + NLMSG_LENGTH(GENL_HDRLEN), h.nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN)};
            struct cr_taskstats_exit e = {0};
            uint16_t type;
            const unsigned char *v;
            size_t vlen;
            while (g.cmd == TASKSTATS_CMD_NEW && next_attr(&top, &type, &v, &vlen)) {
                if (type == TASKSTATS_TYPE_AGGR_PID)
                    e.pid = nested_id(v, vlen, TASKSTATS_TYPE_PID);
                else if (type == TASKSTATS_TYPE_AGGR_TGID)
                    e.tgid = nested_id(v, vlen, TASKSTATS_TYPE_TGID);
            }
            e.whole_group = e.tgid > 0;
            if (e.pid > 0 || e.tgid > 0) {
                found++;
                fn(ctx, &e);
            }
        }
        size_t step = NLMSG_ALIGN(h.nlmsg_len);
        if (step >= len)
            break;
        p += step;
        len -= step;
    }
    return found;
}

uint16_t cr_taskstats_family_id(const void *buf, size_t len, int *error)
{
    const unsigned char *p = buf;
    struct nlmsghdr h;
    *error = 0;
    if (len < NLMSG_HDRLEN)
        return 0;
    memcpy(&h, p, sizeof(h));
    if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > len)
        return 0;
    if (h.nlmsg_type == NLMSG_ERROR) {
        struct nlmsgerr err;
        if (h.nlmsg_len >= NLMSG_LENGTH(sizeof(err))) {
            memcpy(&err, p + NLMSG_HDRLEN, sizeof(err));
            *error = err.error;
        }
        return 0;
    }
    if (h.nlmsg_type != GENL_ID_CTRL || h.nlmsg_len < NLMSG_LENGTH(GENL_HDRLEN))
        return 0;
    uint16_t id;
    return find_attr(p + NLMSG_LENGTH(GENL_HDRLEN), h.nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN),
                     CTRL_ATTR_FAMILY_ID, &id, sizeof(id))
               ? id
               : 0;
}

#define PF_EXITING 0x4 /* include/linux/sched.h */

bool cr_taskstats_exiting(const char *stat, bool whole_group)
{
    const char *p = stat;
    unsigned long flags = 0;
    for (int field = 3; p && field < 20; field++) { /* p: the start of field + 1 after */
        p = strchr(p, ' ');
        if (p)
            p++;
        if (p && field == 8)
            flags = strtoul(p, NULL, 10);
    }
    return p && (flags & PF_EXITING) && (whole_group || strtol(p, NULL, 10) <= 1);
}

bool cr_taskstats_ack(const void *buf, size_t len, uint32_t seq, int *error)
{
    const unsigned char *p = buf;
    while (len >= NLMSG_HDRLEN) {
        struct nlmsghdr h;
        memcpy(&h, p, sizeof(h));
        if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > len)
            return false;
        struct nlmsgerr err;
        if (h.nlmsg_type == NLMSG_ERROR && h.nlmsg_seq == seq &&
            h.nlmsg_len >= NLMSG_LENGTH(sizeof(err))) {
            memcpy(&err, p + NLMSG_HDRLEN, sizeof(err));
            *error = err.error > 0 ? -err.error : err.error;
            return true;
        }
        size_t step = NLMSG_ALIGN(h.nlmsg_len);
        if (step >= len)
            return false;
        p += step;
        len -= step;
    }
    return false;
}

/* One generic netlink request with one string attribute. */
static size_t request(void *buf, size_t size, uint16_t type, uint16_t flags, uint8_t cmd,
                      uint8_t version, uint32_t seq, uint16_t attr, const char *value)
{
    size_t vlen = strlen(value) + 1;
    size_t alen = NLA_HDRLEN + vlen;
    size_t total = NLMSG_LENGTH(GENL_HDRLEN) + NLA_ALIGN(alen);
    if (alen > UINT16_MAX || total > size)
        return 0;
    memset(buf, 0, total);
    unsigned char *p = buf;
    struct nlmsghdr h = {.nlmsg_len = (uint32_t)total, .nlmsg_type = type,
                         .nlmsg_flags = (uint16_t)(NLM_F_REQUEST | flags), .nlmsg_seq = seq};
    struct genlmsghdr g = {.cmd = cmd, .version = version};
    struct nlattr a = {.nla_len = (uint16_t)alen, .nla_type = attr};
    memcpy(p, &h, sizeof(h));
    memcpy(p + NLMSG_HDRLEN, &g, sizeof(g));
    memcpy(p + NLMSG_LENGTH(GENL_HDRLEN), &a, sizeof(a));
    memcpy(p + NLMSG_LENGTH(GENL_HDRLEN) + NLA_HDRLEN, value, vlen);
    return total;
}

size_t cr_taskstats_getfamily_msg(void *buf, size_t size, uint32_t seq)
{
    return request(buf, size, GENL_ID_CTRL, 0, CTRL_CMD_GETFAMILY, 1, seq, CTRL_ATTR_FAMILY_NAME,
                   TASKSTATS_GENL_NAME);
}

size_t cr_taskstats_listen_msg(void *buf, size_t size, uint16_t family, uint32_t seq,
                               const char *cpulist, bool on)
{
    return request(buf, size, family, NLM_F_ACK, TASKSTATS_CMD_GET, TASKSTATS_GENL_VERSION, seq,
                   on ? TASKSTATS_CMD_ATTR_REGISTER_CPUMASK
                      : TASKSTATS_CMD_ATTR_DEREGISTER_CPUMASK,
                   cpulist);
}
