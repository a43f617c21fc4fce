#!/usr/bin/env python3
"""corrald's defaults are stated once, in the option table of
supervisor/model/config.c; README.md and the man page repeat some of them.
This test holds those copies to the table.

The table speaks through `corrald --help`: every option's line ends its help
with "(default: X)", X being the value in the user's syntax ("10", "auto"),
"value = note" for a value resolved at run time ("auto = one per core"),
the note alone ("corrald's own"), or "off"/"none" when nothing is set.
A document may state the default as the whole X or, for "value = note", the
value alone.

Checked, each a failure of its own:
  - README.md, section "Usage", table `| option | default | meaning |`:
    every option a row names is corrald's, and the row's default (one per
    option when the row names several, "a / b", or one for all of them)
    is the table's;
  - docs/man/corrald.8.scd: every option of the table has an entry, every
    entry's option is corrald's; an entry states a default only as
    "(default X)" or "(default X; more)", one per option it heads, in order,
    and it is the table's; an option whose default is more than "none" or
    "off" states it.

Usage: test_defaults.py CORRALD SRCDIR
"""
import re
import subprocess
import sys

ABSENT = ("none", "off")  # nothing set: a document need not say so


def help_defaults(corrald):
    """{option: default text} from corrald --help, in the table's order."""
    text = subprocess.run([corrald, "--help"], capture_output=True, text=True, timeout=10,
                          check=True).stdout
    out = {}
    for line in text.splitlines():
        m = re.match(r"  (?:-\w, |    )--([a-z][a-z0-9-]*)(?: \S+)?\s+(.*)$", line)
        if not m or m.group(1) in ("help", "version"):
            continue
        found = re.findall(r"\(default: ([^)]*)\)", m.group(2))
        if len(found) != 1:
            raise SystemExit("corrald --help: --%s states %d defaults, not one: %s"
                             % (m.group(1), len(found), line.strip()))
        out[m.group(1)] = found[0]
    if len(out) < 40:
        raise SystemExit("corrald --help lists only %d options" % len(out))
    return out


def accepted(shown):
    """The texts a document may use for a default shown as `shown`."""
    return {shown, shown.split(" = ", 1)[0]}


def split_row(line):
    """A Markdown table row's cells: '|' splits, but not '\\|' nor one
    inside a `code span`."""
    cells, cur, code, i = [], "", False, 0
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line) and line[i + 1] == "|":
            cur += "|"
            i += 2
            continue
        if ch == "`":
            code = not code
        if ch == "|" and not code:
            cells.append(cur.strip())
            cur = ""
        else:
            cur += ch
        i += 1
    if cur.strip():
        cells.append(cur.strip())
    return cells


def plain_md(s):
    return re.sub(r"\s+", " ", s.replace("`", "")).strip()


def check_readme(path, table, problems):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    usage = text.find("\n## Usage")
    head = text.find("| option | default | meaning |", usage)
    if usage < 0 or head < 0:
        problems.append("README.md: no options table `| option | default | meaning |` "
                        "under \"## Usage\"")
        return
    rows = 0
    for line in text[head:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = split_row(line)
        if len(cells) < 3:
            problems.append("README.md: a row of fewer than 3 cells: %s" % line)
            continue
        rows += 1
        parts = [p for p in cells[0].split(" / ")]
        names = []
        for p in parts:
            m = re.search(r"--([a-z][a-z0-9-]*)", p)
            if not m:
                problems.append("README.md: no --option in %r" % p)
                continue
            names.append(m.group(1))
        defaults = [plain_md(d) for d in cells[1].split(" / ")]
        if len(defaults) == 1:
            defaults = defaults * len(names)
        if len(defaults) != len(names):
            problems.append("README.md: row %s gives %d defaults for %d options"
                            % (cells[0], len(defaults), len(names)))
            continue
        for name, d in zip(names, defaults):
            if name not in table:
                problems.append("README.md: --%s is no option of corrald" % name)
            elif d not in accepted(table[name]):
                problems.append("README.md: --%s defaults to %r, corrald to %r"
                                % (name, d, table[name]))
    if rows < 15:
        problems.append("README.md: the options table has only %d rows" % rows)


def plain_scd(s):
    """scdoc text without its markup: *bold*, _underline_ (not the '_'
    inside a word: $RUNTIME_DIRECTORY), and the escapes \\_ and \\*."""
    s = s.replace("\\_", "\0u").replace("\\*", "\0s")
    s = s.replace("*", "")
    s = re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", "", s)
    s = s.replace("\0u", "_").replace("\0s", "*")
    return re.sub(r"\s+", " ", s).strip()


def man_entries(path):
    """[(names, body)] of the OPTIONS section: a heading line that starts
    with '*-', its body the tab-indented lines after it."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    try:
        start = lines.index("# OPTIONS")
    except ValueError:
        return []
    entries = []
    for line in lines[start + 1:]:
        if line.startswith("# "):
            break
        if line.startswith("*-"):
            entries.append((re.findall(r"\*--([a-z][a-z0-9-]*)\*", line), []))
        elif line.startswith("\t") and entries:
            entries[-1][1].append(line.strip())
    return [(names, " ".join(body)) for names, body in entries]


def check_man(path, table, problems):
    entries = man_entries(path)
    if not entries:
        problems.append("corrald.8.scd: no OPTIONS section")
        return
    seen = set()
    for names, body in entries:
        names = [n for n in names if n not in ("help", "version")]
        if not names:
            continue
        label = ", ".join("--" + n for n in names)
        for n in names:
            seen.add(n)
            if n not in table:
                problems.append("corrald.8.scd: --%s is no option of corrald" % n)
        text = plain_scd(body)
        # A default in any other form is one this test cannot read.
        for p in re.findall(r"\([^()]*\bdefault\b[^()]*\)", text, re.I):
            if not re.match(r"\(default:? ", p):
                problems.append("corrald.8.scd: %s: state the default as \"(default X)\": %s"
                                % (label, p))
        for p in re.findall(r"\bDefault:", text):
            problems.append("corrald.8.scd: %s: state the default as \"(default X)\", "
                            "not \"Default:\"" % label)
        stated = [d.strip() for d in re.findall(r"\(default:? ([^;)]*)[;)]", text)]
        if stated and len(stated) != len(names):
            problems.append("corrald.8.scd: %s states %d defaults for %d options"
                            % (label, len(stated), len(names)))
            continue
        for i, n in enumerate(names):
            if n not in table:
                continue
            if stated:
                if stated[i] not in accepted(table[n]):
                    problems.append("corrald.8.scd: --%s defaults to %r, corrald to %r"
                                    % (n, stated[i], table[n]))
            elif table[n] not in ABSENT:
                problems.append("corrald.8.scd: --%s does not state its default (%s)"
                                % (n, table[n]))
    for n in table:
        if n not in seen:
            problems.append("corrald.8.scd: --%s has no entry" % n)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    corrald, src = sys.argv[1], sys.argv[2]
    table = help_defaults(corrald)
    problems = []
    check_readme(src + "/README.md", table, problems)
    check_man(src + "/docs/man/corrald.8.scd", table, problems)
    for p in problems:
        print(p)
    if problems:
        print("%d disagreement(s) with the option table (supervisor/model/config.c)"
              % len(problems))
        sys.exit(1)
    print("README.md and corrald.8 agree with the table's %d defaults" % len(table))


if __name__ == "__main__":
    main()
