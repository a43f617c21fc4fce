/* `corralctl why`'s "What to do next": the advice for a death's category,
 * one or two lines of text, from a table of categories (why.c lays the
 * lines out). Pure: facts in, text out. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* A memory series' first and last sample in the last minute (why.c folds
 * them from the post-mortem's memory_series). */
struct ctl_why_ends {
    bool known;             /* false: no sample, the rest is meaningless */
    double first, last;     /* bytes */
    double first_t, last_t; /* ms relative to the death (negative) */
};

/* What the advice reads of a post-mortem. tests/unit/ctl/test_why_advice.c
 * walks every combination of the flags and a set of memory figures for each
 * category: a field added here is added to its walk. */
struct ctl_why_facts {
    const char *cat; /* the death's category, never NULL */
    bool planned, core, request, stack, snapshot;
    char limit[16], heap_limit[16]; /* figures as shown, or "not set" / "unknown" */
    const char *verdict;            /* the memory trend's last verdict, or NULL */
    double verdict_ago_ms;          /* < 0: unknown */
    struct ctl_why_ends mem[4];     /* RSS, heap, external, group */
};

/* The room for a line of advice, NUL included. */
#define CTL_WHY_ADVICE_MAX 512

/* The advice for x's category into l1 and l2 (CTL_WHY_ADVICE_MAX bytes
 * each); l2 is "" when there is one line. A category not in the table gets
 * the pointer to docs/exit-classification.md. */
void ctl_why_advice(const struct ctl_why_facts *x, char *l1, char *l2);

/* The table's i-th category, NULL past its end: what a test holds against
 * the categories corrald classifies (model/death.h, which corralctl may not
 * include), so that neither side gains a category the other lacks. */
const char *ctl_why_advice_category(size_t i);
