/* The only file that includes a parser library header (for the worker and
 * corrald's metrics listener alike): http-parser 2.x on Debian 12, llhttp
 * where CR_HTTP_LLHTTP=1. Both share the callback shape;
 * the differences are in pausing, error positions and EOF handling. */
#include "http_parse.h"

#include <errno.h>
#include <stdlib.h>

#if CR_HTTP_LLHTTP
#include <llhttp.h>
typedef llhttp_t parser_t;
typedef llhttp_settings_t settings_t;
#define CR_F_CHUNKED        F_CHUNKED
#define CR_F_CONTENT_LENGTH F_CONTENT_LENGTH
#else
#include <http_parser.h>
typedef http_parser parser_t;
typedef http_parser_settings settings_t;
#define CR_F_CHUNKED        F_CHUNKED
#define CR_F_CONTENT_LENGTH F_CONTENTLENGTH
#endif

struct cr_http_parse {
    parser_t parser; /* first: callbacks cast parser_t* back to us */
    settings_t settings;
    const struct cr_http_parse_cbs *cbs;
    void *ud;
    const char *error;
    bool want_pause; /* llhttp: pause is a callback's return value */
    bool chunked;    /* from the head: llhttp clears its flags once a message ends */
};

#define SELF(hp) ((struct cr_http_parse *)(hp))

/* Library callbacks return 0 to go on; ours may return any non-zero to
 * stop, which both libraries read as "callback failed". */
static int begin_cb(parser_t *hp)
{
    struct cr_http_parse *p = SELF(hp);
    p->chunked = false;
    return p->cbs->on_begin && p->cbs->on_begin(p->ud) ? -1 : 0;
}

static int url_cb(parser_t *hp, const char *at, size_t len)
{
    struct cr_http_parse *p = SELF(hp);
    return p->cbs->on_url && p->cbs->on_url(p->ud, at, len) ? -1 : 0;
}

static int field_cb(parser_t *hp, const char *at, size_t len)
{
    struct cr_http_parse *p = SELF(hp);
    return p->cbs->on_header_field && p->cbs->on_header_field(p->ud, at, len) ? -1 : 0;
}

static int value_cb(parser_t *hp, const char *at, size_t len)
{
    struct cr_http_parse *p = SELF(hp);
    return p->cbs->on_header_value && p->cbs->on_header_value(p->ud, at, len) ? -1 : 0;
}

static int headers_cb(parser_t *hp)
{
    struct cr_http_parse *p = SELF(hp);
    p->chunked = (p->parser.flags & CR_F_CHUNKED) != 0;
    return p->cbs->on_headers_complete && p->cbs->on_headers_complete(p->ud) ? -1 : 0;
}

static int chunk_cb(parser_t *hp)
{
    struct cr_http_parse *p = SELF(hp);
    return p->cbs->on_chunk_header(p->ud, p->parser.content_length) ? -1 : 0;
}

static int body_cb(parser_t *hp, const char *at, size_t len)
{
    struct cr_http_parse *p = SELF(hp);
    return p->cbs->on_body && p->cbs->on_body(p->ud, at, len) ? -1 : 0;
}

static int complete_cb(parser_t *hp)
{
    struct cr_http_parse *p = SELF(hp);
    int r = p->cbs->on_complete && p->cbs->on_complete(p->ud) ? -1 : 0;
#if CR_HTTP_LLHTTP
    /* llhttp pauses by the callback's return value, not by a flag. */
    if (r == 0 && p->want_pause) {
        p->want_pause = false;
        return HPE_PAUSED;
    }
#endif
    return r;
}

struct cr_http_parse *cr_http_parse_new(const struct cr_http_parse_cbs *cbs, void *ud)
{
    struct cr_http_parse *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->cbs = cbs;
    p->ud = ud;
#if CR_HTTP_LLHTTP
    llhttp_settings_init(&p->settings);
#endif
    p->settings.on_message_begin = begin_cb;
    p->settings.on_url = url_cb;
    p->settings.on_header_field = field_cb;
    p->settings.on_header_value = value_cb;
    p->settings.on_headers_complete = headers_cb;
    p->settings.on_body = body_cb;
    if (cbs->on_chunk_header)
        p->settings.on_chunk_header = chunk_cb;
    p->settings.on_message_complete = complete_cb;
#if CR_HTTP_LLHTTP
    llhttp_init(&p->parser, HTTP_REQUEST, &p->settings);
#else
    http_parser_init(&p->parser, HTTP_REQUEST);
#endif
    return p;
}

struct cr_http_parse *cr_http_parse_free(struct cr_http_parse *p)
{
    free(p);
    return NULL;
}

#if CR_HTTP_LLHTTP
int cr_http_parse_feed(struct cr_http_parse *p, const char *data, size_t len, size_t *ret_used)
{
    llhttp_errno_t e = llhttp_execute(&p->parser, data, len);
    if (e == HPE_OK) {
        *ret_used = len;
        return 0;
    }
    const char *pos = llhttp_get_error_pos(&p->parser);
    *ret_used = pos ? (size_t)(pos - data) : 0;
    if (e == HPE_PAUSED)
        return -EAGAIN;
    p->error = llhttp_get_error_reason(&p->parser);
    if (!p->error)
        p->error = llhttp_errno_name(e);
    return -EBADMSG;
}

int cr_http_parse_finish(struct cr_http_parse *p)
{
    if (llhttp_finish(&p->parser) != HPE_OK) {
        p->error = "unexpected end of message";
        return -EBADMSG;
    }
    return 0;
}

void cr_http_parse_pause(struct cr_http_parse *p)
{
    p->want_pause = true;
}

void cr_http_parse_resume(struct cr_http_parse *p)
{
    llhttp_resume(&p->parser);
}

const char *cr_http_parse_method(const struct cr_http_parse *p)
{
    return llhttp_method_name((llhttp_method_t)p->parser.method);
}

bool cr_http_parse_keep_alive(const struct cr_http_parse *p)
{
    return llhttp_should_keep_alive(&p->parser);
}
#else
int cr_http_parse_feed(struct cr_http_parse *p, const char *data, size_t len, size_t *ret_used)
{
    size_t n = http_parser_execute(&p->parser, &p->settings, data, len);
    enum http_errno e = HTTP_PARSER_ERRNO(&p->parser);
    *ret_used = n;
    if (e == HPE_OK) {
        /* An upgrade request stops the parser short without an error. */
        if (n != len && !p->parser.upgrade) {
            p->error = "trailing garbage";
            return -EBADMSG;
        }
        return 0;
    }
    if (e == HPE_PAUSED)
        return -EAGAIN;
    p->error = http_errno_description(e);
    return -EBADMSG;
}

int cr_http_parse_finish(struct cr_http_parse *p)
{
    http_parser_execute(&p->parser, &p->settings, NULL, 0);
    if (HTTP_PARSER_ERRNO(&p->parser) != HPE_OK) {
        p->error = "unexpected end of message";
        return -EBADMSG;
    }
    return 0;
}

void cr_http_parse_pause(struct cr_http_parse *p)
{
    http_parser_pause(&p->parser, 1);
}

void cr_http_parse_resume(struct cr_http_parse *p)
{
    http_parser_pause(&p->parser, 0);
}

const char *cr_http_parse_method(const struct cr_http_parse *p)
{
    return http_method_str((enum http_method)p->parser.method);
}

bool cr_http_parse_keep_alive(const struct cr_http_parse *p)
{
    return http_should_keep_alive(&p->parser);
}
#endif

bool cr_http_parse_is_upgrade(const struct cr_http_parse *p)
{
    return p->parser.upgrade;
}

unsigned cr_http_parse_version(const struct cr_http_parse *p)
{
    return p->parser.http_major * 10u + p->parser.http_minor;
}

int cr_http_parse_content_length(const struct cr_http_parse *p, uint64_t *ret_len)
{
    if (!(p->parser.flags & CR_F_CONTENT_LENGTH))
        return -ENODATA;
    *ret_len = p->parser.content_length;
    return 0;
}

bool cr_http_parse_chunked(const struct cr_http_parse *p)
{
    return p->chunked;
}

const char *cr_http_parse_error(const struct cr_http_parse *p)
{
    return p->error ? p->error : "malformed request";
}
