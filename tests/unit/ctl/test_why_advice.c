/* `corralctl why`'s "What to do next" (ctl/why_advice.c) for every death
 * category corrald classifies (model/death.h, its list, not a copy of it)
 * and for one it does not, under every combination of the flags the advice
 * reads and a set of memory figures ("scenes"), held line by line to
 * tests/data/why/advice.golden; and the advice table held to the category
 * list both ways. The screen tests (tests/ctl/test_why.py) see three
 * categories, from real deaths; this sees every row of the table.
 *
 * CORRAL_WHY_REGEN=1 rewrites the golden instead (then read the diff), as
 * it rewrites the screens for tests/ctl/test_why.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "death.h"
#include "render.h"
#include "trend.h"
#include "why_advice.h"

#define MAX CTL_WHY_ADVICE_MAX
#define MIB (1024.0 * 1024.0)

/* Not a category: the table's fallback. */
static const char *const NOT_A_CATEGORY = "not-a-category";

/* The flags of struct ctl_why_facts, each walked at false and true. */
static const struct {
    const char *name;
    size_t off;
} flags[] = {
    {"planned", offsetof(struct ctl_why_facts, planned)},
    {"core", offsetof(struct ctl_why_facts, core)},
    {"request", offsetof(struct ctl_why_facts, request)},
    {"stack", offsetof(struct ctl_why_facts, stack)},
    {"snapshot", offsetof(struct ctl_why_facts, snapshot)},
};
#define NFLAGS (sizeof(flags) / sizeof(flags[0]))
#define NBITS  (1u << NFLAGS)

/* A memory series in the last minute before the death. */
enum shape {
    NONE,  /* no sample */
    FLAT,  /* 40M to 42M over 57.5 s: under a tenth, no growth to tell */
    GREW,  /* 12M to 46M over 57.5 s */
    BRIEF, /* 12M to 46M within 1.5 s: too short a span to call growth */
};

/* The figures beside the flags: a verdict of the trend (by its enum, so a
 * renamed verdict shows here as the advice no longer matching it), its age,
 * the limits and the four series (RSS, heap, external, group). */
static const struct scene {
    const char *name;
    int verdict;   /* enum cr_trend_verdict, or -1: none */
    double ago_ms; /* < 0: unknown */
    bool limits;   /* false: "not set" and "unknown", as why.c shows them */
    enum shape mem[4];
} scenes[] = {
    {"none", -1, -1, false, {NONE, NONE, NONE, NONE}},
    {"flat", CR_TREND_STABLE, 30000, true, {FLAT, FLAT, FLAT, FLAT}},
    {"brief", -1, -1, true, {BRIEF, BRIEF, BRIEF, BRIEF}},
    {"heap-grew", -1, -1, true, {FLAT, GREW, FLAT, FLAT}},
    {"heap-growing", CR_TREND_HEAP_GROWING, 12000, true, {FLAT, GREW, FLAT, FLAT}},
    {"heap-growing-undated", CR_TREND_HEAP_GROWING, -1, true, {FLAT, FLAT, FLAT, FLAT}},
    {"external-grew", CR_TREND_OFFHEAP_GROWING, 5000, true, {GREW, FLAT, GREW, GREW}},
    {"heap-and-group-grew", -1, -1, true, {GREW, GREW, FLAT, GREW}},
    /* rss-growing: no heap was ever reported (trend.h), nor external. */
    {"group-grew", CR_TREND_RSS_GROWING, 8000, true, {GREW, NONE, NONE, GREW}},
    {"rss-grew", -1, -1, true, {GREW, NONE, NONE, NONE}},
    {"near-limit", CR_TREND_NEAR_LIMIT, 3000, true, {FLAT, FLAT, FLAT, FLAT}},
};
#define NSCENES (sizeof(scenes) / sizeof(scenes[0]))
#define NCOMBOS (NBITS * NSCENES)

static const char *const series[4] = {"rss", "heap", "external", "group"};

static struct ctl_why_ends ends(enum shape s)
{
    switch (s) {
    case FLAT:
        return (struct ctl_why_ends){true, 40 * MIB, 42 * MIB, -57750, -250};
    case GREW:
        return (struct ctl_why_ends){true, 12 * MIB, 46 * MIB, -57750, -250};
    case BRIEF:
        return (struct ctl_why_ends){true, 12 * MIB, 46 * MIB, -1750, -250};
    case NONE:
        break;
    }
    return (struct ctl_why_ends){.known = false};
}

static void facts(struct ctl_why_facts *x, const char *cat, unsigned bits, const struct scene *s)
{
    memset(x, 0, sizeof(*x));
    x->cat = cat;
    for (size_t i = 0; i < NFLAGS; i++)
        *(bool *)((char *)x + flags[i].off) = bits >> i & 1;
    snprintf(x->limit, sizeof(x->limit), "%s", s->limits ? "256M" : "not set");
    snprintf(x->heap_limit, sizeof(x->heap_limit), "%s", s->limits ? "240M" : "unknown");
    x->verdict = s->verdict < 0 ? NULL : cr_trend_verdict_to_string(s->verdict);
    x->verdict_ago_ms = s->ago_ms;
    for (size_t i = 0; i < 4; i++)
        x->mem[i] = ends(s->mem[i]);
}

struct text {
    char l1[MAX], l2[MAX];
};

static size_t combo(unsigned bits, size_t scene)
{
    return bits * NSCENES + scene;
}

/* cat's advice under every combination, out[combo(bits, scene)]. */
static void render_all(const char *cat, struct text *out)
{
    for (unsigned bits = 0; bits < NBITS; bits++)
        for (size_t s = 0; s < NSCENES; s++) {
            struct ctl_why_facts x;
            facts(&x, cat, bits, &scenes[s]);
            struct text *t = &out[combo(bits, s)];
            /* A line the advice leaves unwritten shows as this, not as
             * whatever the buffer held. */
            memset(t, 'X', sizeof(*t));
            ctl_why_advice(&x, t->l1, t->l2);
        }
}

static bool same(const struct text *a, const struct text *b)
{
    return strcmp(a->l1, b->l1) == 0 && strcmp(a->l2, b->l2) == 0;
}

/* The flags cat's text depends on (a bit each), and whether it depends on
 * the scene: a fact that no toggle of it changes anywhere is left out, and
 * the text is then a function of the others alone. */
static unsigned depends(const struct text *out, bool *on_scene)
{
    unsigned mask = 0;
    *on_scene = false;
    for (unsigned bits = 0; bits < NBITS; bits++)
        for (size_t s = 0; s < NSCENES; s++) {
            for (size_t f = 0; f < NFLAGS; f++)
                if (!same(&out[combo(bits, s)], &out[combo(bits ^ (1u << f), s)]))
                    mask |= 1u << f;
            if (!same(&out[combo(bits, s)], &out[combo(bits, 0)]))
                *on_scene = true;
        }
    return mask;
}

static bool in_table(const char *cat)
{
    for (size_t i = 0; ctl_why_advice_category(i); i++)
        if (strcmp(ctl_why_advice_category(i), cat) == 0)
            return true;
    return false;
}

/* ---- the table against the category list ---- */

/* Every row is a category corrald classifies, once: a row of a category
 * that does not exist (a typo, a renamed one) is advice no death gets. */
static void test_rows_are_categories(void **state)
{
    (void)state;
    size_t n = 0;
    for (; ctl_why_advice_category(n); n++) {
        const char *cat = ctl_why_advice_category(n);
        if (cr_death_from_string(cat) < 0)
            fail_msg("the advice table has a row for \"%s\", which is no category of "
                     "model/death.h",
                     cat);
        for (size_t j = 0; j < n; j++)
            if (strcmp(ctl_why_advice_category(j), cat) == 0)
                fail_msg("the advice table has two rows for \"%s\" (rows %zu and %zu)", cat, j, n);
    }
    assert_int_equal(n, _CR_DEATH_MAX);
}

/* Every category corrald classifies has a row: without one its deaths get
 * the fallback's pointer to the docs. */
static void test_categories_have_rows(void **state)
{
    (void)state;
    for (int d = 0; d < _CR_DEATH_MAX; d++) {
        const char *cat = cr_death_to_string(d);
        assert_non_null(cat);
        if (!in_table(cat))
            fail_msg("category \"%s\" (model/death.h) has no row in ctl/why_advice.c's table", cat);
    }
    assert_false(in_table(NOT_A_CATEGORY));
    assert_true(cr_death_from_string(NOT_A_CATEGORY) < 0);
}

/* Every category, and the fallback, under every combination: a first line
 * always, each line whole (not cut at the buffer) and one line (why.c wraps
 * it), the second line empty or text. */
static void test_lines_whole(void **state)
{
    (void)state;
    struct text *out = calloc(NCOMBOS, sizeof(*out));
    assert_non_null(out);
    for (int d = 0; d <= _CR_DEATH_MAX; d++) {
        const char *cat = d < _CR_DEATH_MAX ? cr_death_to_string(d) : NOT_A_CATEGORY;
        render_all(cat, out);
        for (size_t c = 0; c < NCOMBOS; c++) {
            const struct text *t = &out[c];
            const char *where = scenes[c % NSCENES].name;
            assert_non_null(memchr(t->l1, '\0', MAX));
            assert_non_null(memchr(t->l2, '\0', MAX));
            if (!t->l1[0])
                fail_msg("%s, scene %s, flags 0x%zx: no first line", cat, where, c / NSCENES);
            if (strlen(t->l1) >= MAX - 1 || strlen(t->l2) >= MAX - 1)
                fail_msg("%s, scene %s: a line fills the buffer (cut)", cat, where);
            if (strchr(t->l1, '\n') || strchr(t->l2, '\n'))
                fail_msg("%s, scene %s: a line holds a newline", cat, where);
        }
    }
    free(out);
}

/* ---- the golden ---- */

static void describe_scene(FILE *f, const struct scene *s)
{
    fprintf(f, "# %s: verdict %s", s->name,
            s->verdict < 0 ? "none" : cr_trend_verdict_to_string(s->verdict));
    if (s->verdict >= 0 && s->ago_ms >= 0) {
        char ago[32];
        ctl_fmt_ms(s->ago_ms, ago, sizeof(ago));
        fprintf(f, " (%s before)", ago);
    }
    fprintf(f, ", limits %s;", s->limits ? "256M / heap 240M" : "not set / heap unknown");
    for (size_t i = 0; i < 4; i++) {
        struct ctl_why_ends e = ends(s->mem[i]);
        if (!e.known) {
            fprintf(f, " %s -", series[i]);
            continue;
        }
        char a[16], b[16], d[32];
        ctl_fmt_bytes(e.first, a, sizeof(a));
        ctl_fmt_bytes(e.last, b, sizeof(b));
        ctl_fmt_ms(e.last_t - e.first_t, d, sizeof(d));
        fprintf(f, " %s %s..%s/%s", series[i], a, b, d);
    }
    fputc('\n', f);
}

/* The whole golden text into *buf (malloc'd). */
static size_t golden_text(char **buf)
{
    size_t len = 0;
    FILE *f = open_memstream(buf, &len);
    assert_non_null(f);
    fputs("# corralctl why, \"What to do next\": the advice for each death category of\n"
          "# model/death.h (in its order) and for one that is none, written by\n"
          "# tests/unit/ctl/test_why_advice.c. Each was rendered under every\n"
          "# combination of the flags and every scene below; a block names only the\n"
          "# facts its text depends on: the others were varied and changed nothing.\n"
          "# Rewritten by CORRAL_WHY_REGEN=1 meson test -C build unit-why-advice.\n"
          "#\n"
          "# Flags:",
          f);
    for (size_t i = 0; i < NFLAGS; i++)
        fprintf(f, " %s", flags[i].name);
    fputs("\n# Scenes (a series: its first and last sample before the death, the span):\n", f);
    for (size_t s = 0; s < NSCENES; s++)
        describe_scene(f, &scenes[s]);

    struct text *out = calloc(NCOMBOS, sizeof(*out));
    assert_non_null(out);
    for (int d = 0; d <= _CR_DEATH_MAX; d++) {
        const char *cat = d < _CR_DEATH_MAX ? cr_death_to_string(d) : NOT_A_CATEGORY;
        render_all(cat, out);
        bool on_scene;
        unsigned mask = depends(out, &on_scene);
        for (unsigned bits = 0; bits < NBITS; bits++) {
            if (bits & ~mask)
                continue;
            for (size_t s = 0; s < (on_scene ? NSCENES : 1); s++) {
                fprintf(f, "\n== %s", cat);
                for (size_t i = 0; i < NFLAGS; i++)
                    if (mask >> i & 1)
                        fprintf(f, " %s=%s", flags[i].name, bits >> i & 1 ? "yes" : "no");
                if (on_scene)
                    fprintf(f, " scene=%s", scenes[s].name);
                const struct text *t = &out[combo(bits, s)];
                fprintf(f, "\n  %s\n", t->l1);
                if (t->l2[0])
                    fprintf(f, "  %s\n", t->l2);
            }
        }
    }
    free(out);
    assert_int_equal(fclose(f), 0);
    return len;
}

/* The file's text into *buf (malloc'd, NUL-terminated); bounded: the golden
 * is some 20 KiB. */
static size_t read_all(const char *path, char **buf)
{
    enum { CAP = 1 << 20 };
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s (CORRAL_WHY_REGEN=1 writes it)", path);
    *buf = malloc(CAP + 1);
    assert_non_null(*buf);
    size_t n = fread(*buf, 1, CAP + 1, f);
    fclose(f);
    assert_true(n <= CAP);
    (*buf)[n] = '\0';
    return n;
}

/* The line at p, up to its newline, for a message. */
static int line_len(const char *p, const char *end)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    return (int)((nl ? nl : end) - p);
}

static void test_golden(void **state)
{
    (void)state;
    const char *dir = getenv("CR_TEST_DATA");
    if (!dir)
        fail_msg("CR_TEST_DATA is not set (meson sets it to tests/data/why)");
    char path[4096];
    snprintf(path, sizeof(path), "%s/advice.golden", dir);
    char *got;
    size_t got_len = golden_text(&got);

    const char *regen = getenv("CORRAL_WHY_REGEN");
    if (regen && strcmp(regen, "1") == 0) {
        FILE *f = fopen(path, "wb");
        if (!f)
            fail_msg("cannot write %s", path);
        assert_int_equal(fwrite(got, 1, got_len, f), got_len);
        assert_int_equal(fclose(f), 0);
        printf("wrote %s\n", path);
        free(got);
        return;
    }

    char *want;
    size_t want_len = read_all(path, &want);
    if (want_len != got_len || memcmp(want, got, got_len) != 0) {
        /* The first line that differs, with the golden's block it is in. */
        const char *w = want, *g = got, *we = want + want_len, *ge = got + got_len;
        const char *block = "(the preamble)";
        int block_len = (int)strlen(block), line = 1;
        for (;;) {
            int wl = w < we ? line_len(w, we) : -1, gl = g < ge ? line_len(g, ge) : -1;
            if (wl >= 0 && strncmp(w, "== ", 3) == 0)
                block = w, block_len = wl;
            if (wl != gl || (wl > 0 && memcmp(w, g, (size_t)wl) != 0)) {
                print_error("%s:%d differs (in %.*s):\n  golden: %.*s\n  now:    %.*s\n"
                            "After a deliberate change: CORRAL_WHY_REGEN=1 meson test -C build "
                            "unit-why-advice, then read the diff.\n",
                            path, line, block_len, block, wl < 0 ? 5 : wl, wl < 0 ? "(end)" : w,
                            gl < 0 ? 5 : gl, gl < 0 ? "(end)" : g);
                break;
            }
            if (wl < 0)
                break;
            w += wl + 1, g += gl + 1, line++;
        }
        free(want);
        free(got);
        fail_msg("the advice differs from %s", path);
    }
    free(want);
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_are_categories),
        cmocka_unit_test(test_categories_have_rows),
        cmocka_unit_test(test_lines_whole),
        cmocka_unit_test(test_golden),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
