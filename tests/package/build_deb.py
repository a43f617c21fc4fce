#!/usr/bin/env python3
"""Build corral's Debian package from a clean copy of the tree, then lintian.

    build_deb.py --source-root SRC --out DIR [--version-suffix +vm1]

The copy holds what git tracks (plus untracked files git does not ignore),
as they are in the work tree, so the package is what a clean clone would
build, whatever lies in build directories. `dpkg-buildpackage -us -uc -b`
builds it (debian/rules sets DEB_BUILD_MAINT_OPTIONS=hardening=+all), then
`lintian --pedantic` reads the .changes; an error or a warning fails the
build.

--version-suffix builds the same tree as a newer version (meson.build's
version and a debian/changelog entry, both VERSION+SUFFIX): the second
package of the upgrade check in the VM test.

The result is cached in DIR/<key>/ (or $CORRAL_DEB_CACHE/<key>/) by a hash of the copied files, the
suffix and the versions of the packaging tools: the package test and the VM
test share one build. Prints the directory's path on the last line.
Importable: build(source_root, out, suffix) returns the same directory.
"""
import argparse
import fcntl
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time

# What the package is made with: the packaging tools, the compiler and the
# libraries its dependencies (shlibs, substvars) are computed from. Any
# version change is a new build.
TOOLS = ('debhelper', 'dpkg-dev', 'lintian', 'meson', 'gcc', 'libc6-dev', 'libuv1-dev',
         'libsystemd-dev', 'libcgroup-dev', 'libcjson-dev', 'libssl-dev', 'libhttp-parser-dev',
         'libllhttp-dev', 'libcmocka-dev', 'scdoc', 'systemd-dev')


def log(msg):
    print(f'[deb {time.strftime("%H:%M:%S")}] {msg}', flush=True)


def tree_files(src):
    """Relative paths of the tree's files: git's view when it is a
    checkout, else every file outside build directories and .git."""
    if os.path.isdir(os.path.join(src, '.git')) and shutil.which('git'):
        out = subprocess.run(['git', '-C', src, 'ls-files', '-z', '--cached', '--others',
                              '--exclude-standard'],
                             stdout=subprocess.PIPE, check=True).stdout
        names = sorted({n for n in out.decode().split('\0') if n})
        return [n for n in names if os.path.isfile(os.path.join(src, n))]
    names = []
    for root, dirs, files in os.walk(src):
        rel = os.path.relpath(root, src)
        dirs[:] = sorted(d for d in dirs if d != '.git' and not (
            rel == '.' and (d.startswith('build') or d.startswith('obj-'))))
        names += [os.path.normpath(os.path.join(rel, f)) for f in files]
    return sorted(names)


def tool_versions():
    proc = subprocess.run(['dpkg-query', '-W', '-f', '${Package} ${Version}\n'] + list(TOOLS),
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return proc.stdout


def cache_key(src, files, suffix):
    h = hashlib.sha256()
    h.update(f'suffix {suffix}\n{tool_versions()}'.encode())
    for name in files:
        h.update(name.encode() + b'\0')
        with open(os.path.join(src, name), 'rb') as f:
            h.update(hashlib.sha256(f.read()).digest())
        h.update(b'%o' % (os.stat(os.path.join(src, name)).st_mode & 0o111))
    return h.hexdigest()[:16]


def project_version(src):
    with open(os.path.join(src, 'meson.build')) as f:
        m = re.search(r"^project\([^)]*?version\s*:\s*'([^']+)'", f.read(), re.S | re.M)
    if not m:
        raise RuntimeError('no version in meson.build')
    return m.group(1)


def bump(tree, suffix):
    """The same tree as version VERSION+SUFFIX, in both places."""
    old = project_version(tree)
    new = old + suffix
    path = os.path.join(tree, 'meson.build')
    with open(path) as f:
        text = f.read()
    with open(path, 'w') as f:
        f.write(text.replace(f"version : '{old}'", f"version : '{new}'", 1))
    if project_version(tree) != new:
        raise RuntimeError('could not bump the version in meson.build')
    path = os.path.join(tree, 'debian', 'changelog')
    with open(path) as f:
        text = f.read()
    # A newer entry needs a newer date (SOURCE_DATE_EPOCH comes from it).
    who = re.search(r'^ -- (.*?)  ', text, re.M).group(1)
    trailer = f' -- {who}  ' + time.strftime('%a, %d %b %Y %H:%M:%S +0000', time.gmtime())
    with open(path, 'w') as f:
        f.write(f'corral ({new}) unstable; urgency=medium\n\n'
                f'  * The same source as {old}, rebuilt as a newer version for the\n'
                f'    upgrade check of the VM test (tests/package/build_deb.py).\n\n'
                f'{trailer}\n\n{text}')
    return new


def run(cmd, cwd, logfile, timeout):
    with open(logfile, 'a') as out:
        out.write(f'$ {" ".join(cmd)}\n')
        out.flush()
        return subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                              timeout=timeout).returncode


def tail(path, n=40):
    with open(path, errors='replace') as f:
        return ''.join(f.readlines()[-n:])


def build(source_root, out, suffix=''):
    """CORRAL_DEB_CACHE, when set, is the cache instead of out: build
    directories (and CI runs) with the same tree then share one build."""
    src = os.path.abspath(source_root)
    out = os.path.abspath(os.environ.get('CORRAL_DEB_CACHE') or out)
    os.makedirs(out, exist_ok=True)
    files = tree_files(src)
    key = cache_key(src, files, suffix)
    done = os.path.join(out, key)
    with open(os.path.join(out, '.lock'), 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(done, 'ok')):
            log(f'reusing {done}')
            return done
        work = os.path.join(out, 'work-' + key)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(done, ignore_errors=True)
        version = project_version(src)
        tree = os.path.join(work, f'corral-{version}')
        for name in files:
            dst = os.path.join(tree, name)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(os.path.join(src, name), dst)
        if suffix:
            version = bump(tree, suffix)
        buildlog = os.path.join(work, 'build.log')
        log(f'dpkg-buildpackage -us -uc -b of corral {version} ({len(files)} files; '
            f'log: {buildlog})')
        t0 = time.monotonic()
        if run(['dpkg-buildpackage', '-us', '-uc', '-b'], tree, buildlog, 600) != 0:
            sys.stdout.write(tail(buildlog))
            raise RuntimeError(f'dpkg-buildpackage failed (log: {buildlog})')
        log(f'built in {time.monotonic() - t0:.1f} s')
        changes = glob.glob(os.path.join(work, f'corral_{version}_*.changes'))
        if len(changes) != 1:
            raise RuntimeError(f'no single .changes in {work}')
        lint = os.path.join(work, 'lintian.txt')
        t0 = time.monotonic()
        rc = run(['lintian', '--pedantic', '--info', '--display-experimental',
                  '--fail-on', 'error,warning', changes[0]], work, lint, 240)
        log(f'lintian exit {rc} in {time.monotonic() - t0:.1f} s:')
        with open(lint) as f:
            sys.stdout.write(f.read())
        if rc != 0:
            raise RuntimeError(f'lintian failed (exit {rc}): {lint}')
        os.makedirs(done)
        for f in os.listdir(work):
            if os.path.isfile(os.path.join(work, f)):
                shutil.move(os.path.join(work, f), os.path.join(done, f))
        shutil.rmtree(work, ignore_errors=True)
        with open(os.path.join(done, 'ok'), 'w') as f:
            f.write(version + '\n')
        # Older builds of the same suffix by the same tools go (each edit of
        # the tree makes a new key); another distribution's stay.
        stamp = f'{suffix}\n{tool_versions()}'
        for old in os.listdir(out):
            p = os.path.join(out, old)
            if p == done or old.startswith('work-') or not os.path.isdir(p):
                continue
            try:
                with open(os.path.join(p, 'stamp')) as f:
                    same = f.read() == stamp
            except OSError:
                same = False
            if same:
                shutil.rmtree(p, ignore_errors=True)
        with open(os.path.join(done, 'stamp'), 'w') as f:
            f.write(stamp)
        return done


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--source-root', required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--version-suffix', default='')
    args = ap.parse_args()
    try:
        print(build(args.source_root, args.out, args.version_suffix))
    except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
        print(f'package build failed: {e}')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
