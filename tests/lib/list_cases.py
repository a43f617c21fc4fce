#!/usr/bin/env python3
"""The case names of a test script, for meson, and the check that meson's
configured lists still match the scripts.

  list_cases.py FILE
      prints the cases of FILE, one a line, in file order: the top-level
      functions named test_<case> (what corraltest.main() runs).
  list_cases.py --list NAME FILE
      prints the strings of FILE's top-level list NAME = [...] instead
      (a script whose cases are data, e.g. test_lab.py's scenarios).
  list_cases.py --check GROUP...
      GROUP is `--all FILE CASE...` (the list meson registered for FILE is
      all of its cases), `--subset FILE CASE...` (a deliberate selection:
      every one must exist) or `--list NAME FILE CASE...` (as --all, for
      the list NAME). Exit 1, naming each difference, when a list and its
      file disagree: a case added since meson was configured, or one listed
      that no longer exists.

The script is read, never imported (a test module may need its environment
at import time). Python 3 standard library only.
"""
import ast
import os
import sys


def cases(path):
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    return [n.name[len("test_"):] for n in tree.body
            if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]


def listed(path, name):
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                             for t in n.targets):
            value = ast.literal_eval(n.value)
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return value
    raise SystemExit(f"{path}: no top-level list of strings named {name}")


def check(argv):
    """Returns the problems found in the groups of argv."""
    problems, i = [], 0
    while i < len(argv):
        mode = argv[i]
        if mode == "--list":
            name, path = argv[i + 1], argv[i + 2]
            i += 3
        elif mode in ("--all", "--subset"):
            name, path = None, argv[i + 1]
            i += 2
        else:
            raise SystemExit(f"expected --all, --subset or --list, got {mode!r}")
        given = []
        while i < len(argv) and not argv[i].startswith("--"):
            given.append(argv[i])
            i += 1
        have = listed(path, name) if name else cases(path)
        shown = os.path.normpath(path)
        what = f"list {name} of {shown}" if name else shown
        reconfigure = "reconfigure: meson setup --reconfigure BUILDDIR"
        gone = [c for c in given if c not in have]
        if gone:
            problems.append(f"{what}: meson registers {gone}, which the file does not have ("
                            + ("renamed or removed? edit the list in meson.build"
                               if mode == "--subset" else reconfigure) + ")")
        if mode != "--subset":
            new = [c for c in have if c not in given]
            if new:
                problems.append(f"{what}: {new} not registered in meson ({reconfigure})")
            dup = sorted({c for c in given if given.count(c) > 1})
            if dup:
                problems.append(f"{what}: listed twice in meson: {dup}")
    return problems


def main(argv):
    if argv[:1] == ["--check"]:
        problems = check(argv[1:])
        for p in problems:
            print("FAIL: " + p)
        if not problems:
            print("every meson case list matches its script")
        return 1 if problems else 0
    if len(argv) == 3 and argv[0] == "--list":
        print("\n".join(listed(argv[2], argv[1])))
        return 0
    if len(argv) == 1:
        print("\n".join(cases(argv[0])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
