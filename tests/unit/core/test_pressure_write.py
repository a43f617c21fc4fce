"""MEMORY_PRESSURE_WRITE, the trigger corrald hands a worker with a v2
group of its own, is a constant in worker_spawn.c: it must decode to
systemd's default trigger, "some 200000 2000000" and its NUL (200 ms of
stall in a 2 s window), which the kernel takes on a memory.pressure fd."""
import base64
import re
import sys

src = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r'#define CR_MEMORY_PRESSURE_WRITE "([^"]+)"', src)
if not m:
    sys.exit("CR_MEMORY_PRESSURE_WRITE not found")
got = base64.b64decode(m.group(1), validate=True)
want = b"some 200000 2000000\0"
if got != want:
    sys.exit(f"decodes to {got!r}, want {want!r}")
print("ok", got)
