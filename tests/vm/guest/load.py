#!/usr/bin/env python3
"""Requests against one URL until told to stop, counting every failure.

    load.py URL STOP_FILE MAX_SECONDS OUT_JSON [CLIENTS]

CLIENTS threads (default 4) each send GET URL on a new connection
(Connection: close), one after another, until STOP_FILE exists or
MAX_SECONDS have passed. A request fails when it cannot connect, is reset,
times out (30 s) or answers anything but 200. OUT_JSON gets, rewritten
twice a second and at the end: requests, failed, the first failures, the
longest request in ms and whether the run has ended.
"""
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse


def main():
    url, stop_file, max_s, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    clients = int(sys.argv[5]) if len(sys.argv) > 5 else 4
    u = urllib.parse.urlsplit(url)
    path = u.path + ('?' + u.query if u.query else '')
    lock = threading.Lock()
    st = {'requests': 0, 'failed': 0, 'errors': [], 'longest_ms': 0.0, 'done': False}
    end = time.monotonic() + max_s

    def running():
        return time.monotonic() < end and not os.path.exists(stop_file)

    def client():
        while running():
            t0 = time.monotonic()
            err = None
            try:
                c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
                c.request('GET', path, headers={'Connection': 'close'})
                r = c.getresponse()
                r.read()
                if r.status != 200:
                    err = f'HTTP {r.status}'
                c.close()
            except (OSError, http.client.HTTPException) as e:
                err = f'{type(e).__name__}: {e}'
            ms = (time.monotonic() - t0) * 1000
            with lock:
                st['requests'] += 1
                st['longest_ms'] = max(st['longest_ms'], round(ms, 1))
                if err:
                    st['failed'] += 1
                    if len(st['errors']) < 10:
                        st['errors'].append(f'{time.strftime("%H:%M:%S")} {err}')

    def write():
        with lock:
            text = json.dumps(st)
        with open(out + '.tmp', 'w') as f:
            f.write(text)
        os.replace(out + '.tmp', out)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        write()
        time.sleep(0.5)  # the report's pace
    for t in threads:
        t.join()
    st['done'] = True
    write()


if __name__ == '__main__':
    main()
