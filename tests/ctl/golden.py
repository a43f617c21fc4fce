"""Structural matching of control responses against golden templates.

A template is JSON. A string "<number>", "<string>", "<bool>", "<array>",
"<object>" or "<any>" matches any value of that type; "<number|null>" and the
like allow either. Any other value must be equal. Objects must have exactly
the template's keys, except keys written "?name", which may be absent.
Arrays match element by element and must have the template's length, unless
the template's last element is "<...>": then the element before it may
repeat (zero or more further times).
"""
import json

TYPES = {
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
    "any": lambda v: True,
}


def match(tpl, val, path="$"):
    """Returns a list of mismatch descriptions (empty = match)."""
    if isinstance(tpl, str) and tpl.startswith("<") and tpl.endswith(">") and tpl != "<...>":
        kinds = tpl[1:-1].split("|")
        if all(k in TYPES for k in kinds):
            if any(TYPES[k](val) for k in kinds):
                return []
            return ["%s: %r is not %s" % (path, val, tpl)]
    if isinstance(tpl, dict):
        if not isinstance(val, dict):
            return ["%s: expected an object, got %r" % (path, val)]
        errs = []
        keys = set()
        for k, t in tpl.items():
            opt = k.startswith("?")
            name = k[1:] if opt else k
            keys.add(name)
            if name not in val:
                if not opt:
                    errs.append("%s: missing key %r" % (path, name))
                continue
            errs += match(t, val[name], "%s.%s" % (path, name))
        extra = sorted(set(val) - keys)
        if extra:
            errs.append("%s: unexpected keys %s" % (path, extra))
        return errs
    if isinstance(tpl, list):
        if not isinstance(val, list):
            return ["%s: expected an array, got %r" % (path, val)]
        t = list(tpl)
        if t and t[-1] == "<...>":
            t = t[:-1]
            t += [t[-1]] * max(0, len(val) - len(t)) if t else []
        if len(t) != len(val):
            return ["%s: expected %d elements, got %d" % (path, len(t), len(val))]
        errs = []
        for i, (a, b) in enumerate(zip(t, val)):
            errs += match(a, b, "%s[%d]" % (path, i))
        return errs
    if type(tpl) != type(val) and not (isinstance(tpl, (int, float)) and
                                       isinstance(val, (int, float)) and
                                       not isinstance(val, bool)):
        return ["%s: expected %r, got %r" % (path, tpl, val)]
    return [] if tpl == val else ["%s: expected %r, got %r" % (path, tpl, val)]


def load(path):
    with open(path) as f:
        return json.load(f)
