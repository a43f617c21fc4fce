#!/usr/bin/env python3
"""Run `systemd-analyze verify` on corral's generated units.

The units name corrald by its installed path; before installation that path
does not exist, so each unit is copied into a temporary directory with the
installed bindir's corrald replaced by the build tree's. Templates are
verified as an instance (corral@shop.*), the socket with the ListenStream=
drop-in the recipe in docs/systemd.md gives it. Any diagnostic fails the test: a
warning today is a unit that misbehaves on the next systemd.
Exit 77 (skip) when systemd-analyze is absent.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--bindir', required=True)
    ap.add_argument('--corrald', required=True)
    ap.add_argument('units', nargs='+')
    args = ap.parse_args()

    analyze = shutil.which('systemd-analyze')
    if analyze is None:
        print('systemd-analyze not found: skipping')
        return 77
    if not os.access(args.corrald, os.X_OK):
        print(f'corrald not built at {args.corrald}: ExecStart= cannot be '
              'verified')
        return 1

    installed = os.path.join(args.bindir, 'corrald')
    with tempfile.TemporaryDirectory(prefix='corral-verify-') as tmp:
        paths = []
        for unit in args.units:
            name = os.path.basename(unit)
            text = open(unit, encoding='utf-8').read()
            if re.search(r'@[A-Z_]+@', text):
                print(f'{name}: unsubstituted @VAR@ left')
                return 1
            text = text.replace(installed, args.corrald)
            name = name.replace('@.', '@shop.')
            path = os.path.join(tmp, name)
            with open(path, 'w', encoding='utf-8') as f:
                f.write(text)
            paths.append(path)
            if name == 'corral@shop.socket':
                os.makedirs(os.path.join(tmp, name + '.d'))
                with open(os.path.join(tmp, name + '.d', 'listen.conf'), 'w',
                          encoding='utf-8') as f:
                    f.write('[Socket]\nListenStream=127.0.0.1:8081\n')
        # Without a system manager as PID 1, verify still loads the units and
        # checks them; --man=no skips the man: Documentation= lookups.
        proc = subprocess.run([analyze, 'verify', '--man=no'] + paths,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, cwd=tmp, timeout=50)
    out = proc.stdout.strip()
    print(f'systemd-analyze verify exit {proc.returncode}')
    if out:
        print(out)
    return 0 if proc.returncode == 0 and not out else 1


if __name__ == '__main__':
    sys.exit(main())
