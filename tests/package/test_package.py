#!/usr/bin/env python3
"""corral's Debian package, as an operator receives it.

    test_package.py --source-root SRC --out DIR

Builds the package from a clean copy of the tree (build_deb.py: the result
is shared with the VM test, which installs it), with lintian failing on any
error or warning, then checks what lintian does not know about corral:

- every program, unit, man page, example and the sysusers file is in it,
  and /etc/corral/corral.json is its only conffile;
- the package's version is the one `corrald --version` prints;
- corral-worker's dlopen()ed libcrypto is a dependency;
- the postinst, run with stubs for the tools it calls, makes the _corral
  user and enables or starts no unit on an install, try-restarts
  corral.service on an upgrade; the prerm stops corral on a removal only;
- every unit's Documentation= file is in the package;
- the shipped config runs workers as _corral, not root;
- the programs are built hardened (PIE, full RELRO, BIND_NOW, fortified);
- `systemd-analyze security --offline=true` rates the packaged
  corral.service, corral@.service and corral.service with the unprivileged
  drop-in at most 3.0.

With CORRAL_PACKAGE_INSTALL=1 (a disposable root: tests/llhttp/run.sh
sets it in its overlay of the Debian 13 root) the package is then
installed with `apt-get install ./corral_*.deb`, and the installed corrald
runs the shipped config: its workers run as _corral and serve.

Exit 77 when dpkg-buildpackage or lintian is absent (not a Debian machine).
"""
import argparse
import glob
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import build_deb  # noqa: E402

MAX_EXPOSURE = 3.0

PROGRAMS = ['usr/bin/corrald', 'usr/bin/corralctl', 'usr/bin/corral-lab',
            'usr/libexec/corral/corral-worker', 'usr/libexec/corral/corral-exec']
FILES = PROGRAMS + [
    'usr/share/corral/corral-node-agent.js',
    'usr/share/corral/examples/node/server.js',
    'usr/share/corral/unprivileged.conf',
    'usr/lib/sysusers.d/corral.conf',
    'usr/share/man/man8/corrald.8.gz',
    'usr/share/man/man1/corralctl.1.gz',
    'usr/share/man/man1/corral-lab.1.gz',
    'usr/share/doc/corral/copyright',
    'usr/share/doc/corral/changelog.gz',
    'etc/corral/corral.json',
]
UNITS = ['corral.service', 'corral.socket', 'corral@.service', 'corral@.socket']

failures = []


def check(ok, what):
    print(('ok   ' if ok else 'FAIL ') + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


def out(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=120, **kw).stdout


def unit_dir(root):
    for d in ('usr/lib/systemd/system', 'lib/systemd/system'):
        if os.path.exists(os.path.join(root, d, 'corral.service')):
            return os.path.join(root, d)
    return None


STUB = """#!/bin/sh
echo "${0##*/} $*" >> "$CALLS"
case "${0##*/} $* " in
"deb-systemd-helper "*" was-enabled "*) exit 1 ;;  # a fresh install: never enabled
esac
exit 0
"""


def maintscript_calls(ctrl, script, *args):
    """Runs the package's maintainer script with the tools it calls
    (deb-systemd-helper, deb-systemd-invoke, systemctl, systemd-sysusers)
    replaced by stubs that record their arguments, under a private /run
    that has /run/systemd/system (a systemd host). Returns the calls."""
    with tempfile.TemporaryDirectory(prefix='corral-maint-') as stubs:
        for tool in ('deb-systemd-helper', 'deb-systemd-invoke', 'systemctl', 'systemd-sysusers'):
            with open(os.path.join(stubs, tool), 'w') as f:
                f.write(STUB)
            os.chmod(os.path.join(stubs, tool), 0o755)
        calls = os.path.join(stubs, 'calls')
        open(calls, 'w').close()
        env = dict(os.environ, PATH=stubs + ':' + os.environ['PATH'], CALLS=calls)
        env.pop('DPKG_ROOT', None)
        proc = subprocess.run(
            ['unshare', '--mount', '--propagation', 'private', 'sh', '-ec',
             'mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/system && exec sh "$@"', 'sh',
             os.path.join(ctrl, script)] + list(args),
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        check(proc.returncode == 0, f'{script} {" ".join(args)} exits 0: {proc.stdout.strip()}')
        with open(calls) as f:
            return f.read().splitlines()


def check_postinst(ctrl):
    """On a fresh install the postinst makes the user and enables or starts
    nothing; on an upgrade it try-restarts corral.service and starts
    nothing either."""
    if os.geteuid() != 0 or shutil.which('unshare') is None:
        print('postinst not run: needs root and unshare (a private /run)')
        return
    fresh = maintscript_calls(ctrl, 'postinst', 'configure', '')
    print('postinst configure (fresh):', fresh)
    check(any(c.startswith('systemd-sysusers ') and 'corral.conf' in c for c in fresh),
          'a fresh install runs systemd-sysusers corral.conf (the _corral user)')
    bad = [c for c in fresh if re.match(r'deb-systemd-invoke (start|restart|try-restart)\b', c) or
           re.match(r'deb-systemd-helper enable\b', c) or re.match(r'systemctl .*\b(start|enable)\b', c)]
    check(not bad, f'a fresh install enables and starts nothing: {bad}')
    up = maintscript_calls(ctrl, 'postinst', 'configure', '0.0.1')
    print('postinst configure 0.0.1 (upgrade):', up)
    check('deb-systemd-invoke try-restart corral.service' in up,
          'an upgrade try-restarts corral.service')
    bad = [c for c in up if re.match(r'deb-systemd-invoke (start|restart|stop)\b', c) or
           re.match(r'deb-systemd-helper enable\b', c)]
    check(not bad, f'an upgrade starts, stops or enables nothing else: {bad}')
    pre = maintscript_calls(ctrl, 'prerm', 'upgrade', '0.0.2')
    check(not any('stop' in c for c in pre), f'the prerm of an upgrade stops nothing: {pre}')
    pre = maintscript_calls(ctrl, 'prerm', 'remove')
    check('deb-systemd-invoke stop corral.service corral.socket' in pre,
          f'the prerm of a removal stops corral: {pre}')


def exposure(unit_path):
    """systemd-analyze's overall exposure of one unit file, or None."""
    text = out(['systemd-analyze', 'security', '--offline=true', '--no-pager', unit_path],
               cwd=os.path.dirname(unit_path))
    m = re.search(r'Overall exposure level for \S+: (\d+\.\d+)', text)
    if not m:
        print(text)
    return float(m.group(1)) if m else None


def check_security(udir, root):
    with tempfile.TemporaryDirectory(prefix='corral-security-') as tmp:
        shutil.copy(os.path.join(udir, 'corral.service'), tmp)
        shutil.copy(os.path.join(udir, 'corral@.service'), os.path.join(tmp, 'corral@shop.service'))
        # A drop-in is read as if appended to the unit: so is it here.
        with open(os.path.join(udir, 'corral.service')) as u, \
                open(os.path.join(root, 'usr/share/corral/unprivileged.conf')) as d, \
                open(os.path.join(tmp, 'corral-unprivileged.service'), 'w') as f:
            f.write(u.read() + '\n' + d.read())
        for name in ('corral.service', 'corral@shop.service', 'corral-unprivileged.service'):
            score = exposure(os.path.join(tmp, name))
            check(score is not None and score <= MAX_EXPOSURE,
                  f'systemd-analyze security --offline=true {name}: {score} (at most {MAX_EXPOSURE})')


def check_hardened(path):
    name = os.path.basename(path)
    dyn = out(['readelf', '-d', '-W', path])
    hdr = out(['readelf', '-h', '-l', '-W', path])
    check(re.search(r'Type:\s+DYN', hdr) is not None, f'{name} is PIE')
    check('GNU_RELRO' in hdr and re.search(r'FLAGS.*\bBIND_NOW\b|FLAGS_1.*\bNOW\b', dyn) is not None,
          f'{name} has full RELRO (GNU_RELRO, BIND_NOW)')
    syms = out(['readelf', '--dyn-syms', '-W', path])
    check(re.search(r'__\w+_chk\b', syms) is not None, f'{name} calls fortified functions')


def control(sock, cmd):
    import socket
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(sock)
        s.sendall(json.dumps({'cmd': cmd}).encode() + b'\n')
        data = b''
        while not data.endswith(b'\n'):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data)


def check_installed(deb, version):
    """apt-get install ./DEB into this (disposable) root, then run the
    installed corrald on the shipped config, without cgroups (a chroot has
    no cgroup file system) on a free port."""
    env = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
    text = out(['apt-get', 'install', '-y', '--no-install-recommends', os.path.abspath(deb)],
               env=env)
    print(text[-3000:])
    said = out(['dpkg-query', '-W', '-f', '${Status} ${Version}', 'corral'])
    if not check(said == f'install ok installed {version}', f'apt-get install ./{os.path.basename(deb)}: {said}'):
        return
    check(out(['corrald', '--version']).strip() == f'corrald {version}',
          'the installed corrald --version is the package version')
    ent = out(['getent', 'passwd', '_corral']).strip()
    if not check(ent.startswith('_corral:'), f'the postinst made _corral: {ent}'):
        return
    uid = int(ent.split(':')[2])
    check(uid != 0, f'_corral is not root (uid {uid})')
    tmp = tempfile.mkdtemp(prefix='corral-installed-')
    sock = os.path.join(tmp, 'control.sock')
    logf = open(os.path.join(tmp, 'corrald.log'), 'w+')
    p = subprocess.Popen(['corrald', '--config', '/etc/corral/corral.json', '--no-cgroups',
                          '--listen', '127.0.0.1:0', '--control', sock],
                         stdout=logf, stderr=subprocess.STDOUT)
    try:
        st, end = None, time.monotonic() + 30
        while time.monotonic() < end and p.poll() is None:
            try:
                st = control(sock, 'status')
                if sum(w.get('state') == 'ready' for w in st['workers']) == 2:
                    break
            except (OSError, ValueError):
                pass  # not up yet
            time.sleep(0.2)  # the poll's pace
        ready = [w for w in (st or {}).get('workers', []) if w.get('state') == 'ready']
        if not check(len(ready) == 2, f'the installed corrald runs the shipped 2 workers ({len(ready)} ready)'):
            logf.seek(0)
            print(logf.read()[-3000:])
            return
        for w in ready:
            with open(f"/proc/{w['pid']}/status") as f:
                uids = re.search(r'^Uid:\s+(.*)$', f.read(), re.M).group(1).split()
            check(uids == [str(uid)] * 4, f"worker {w['pid']} runs as uid {uids} (_corral is {uid})")
        host, port = st['supervisor']['listen'][0]['address'].rsplit(':', 1)
        c = http.client.HTTPConnection(host, int(port), timeout=10)
        c.request('GET', '/light')
        r = c.getresponse()
        r.read()
        check(r.status == 200 and int(r.getheader('X-Worker-Pid', '0')) in [w['pid'] for w in ready],
              f'GET /light from an installed worker: {r.status}')
    finally:
        p.terminate()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--source-root', required=True)
    ap.add_argument('--out', required=True)
    args = ap.parse_args()
    missing = [t for t in ('dpkg-buildpackage', 'lintian', 'dh', 'readelf')
               if shutil.which(t) is None]
    if missing:
        print('not a Debian build machine, missing: ' + ', '.join(missing))
        return 77
    try:
        d = build_deb.build(args.source_root, args.out)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f'package build failed: {e}')
        return 1
    with open(os.path.join(d, 'ok')) as f:
        version = f.read().strip()
    debs = glob.glob(os.path.join(d, f'corral_{version}_*.deb'))
    if not check(len(debs) == 1, f'one corral_{version}_*.deb in {d}'):
        return 1
    deb = debs[0]
    print(out(['dpkg-deb', '-I', deb]))

    with tempfile.TemporaryDirectory(prefix='corral-deb-') as root:
        subprocess.run(['dpkg-deb', '-x', deb, root], check=True)
        ctrl = os.path.join(root, 'DEBIAN')
        subprocess.run(['dpkg-deb', '-e', deb, ctrl], check=True)
        for f in FILES:
            check(os.path.isfile(os.path.join(root, f)), f'/{f} is in the package')
        udir = unit_dir(root)
        check(udir is not None, 'the units are in the package')
        for u in UNITS:
            if not check(udir is not None and os.path.isfile(os.path.join(udir, u)),
                         f'{u} is in the package'):
                continue
            with open(os.path.join(udir, u)) as f:
                for doc in re.findall(r'^Documentation=file://(\S+)', f.read(), re.M):
                    check(os.path.isfile(os.path.join(root, doc.lstrip('/'))),
                          f'{u}: its Documentation= {doc} is in the package')
        with open(os.path.join(ctrl, 'conffiles')) as f:
            conffiles = f.read().split()
        check(conffiles == ['/etc/corral/corral.json'],
              f'conffiles: {conffiles} (want /etc/corral/corral.json alone)')

        fields = out(['dpkg-deb', '-f', deb, 'Package', 'Version', 'Depends'])
        print(fields)
        check(re.search(rf'^Version: {re.escape(version)}$', fields, re.M) is not None,
              f'the package is version {version}')
        check(re.search(r'\blibssl3(t64)? \(', fields) is not None,
              "Depends names libcrypto's package (corral-worker dlopen()s it)")
        for prog, name in (('usr/bin/corrald', 'corrald'),
                           ('usr/libexec/corral/corral-worker', 'corral-worker')):
            said = out([os.path.join(root, prog), '--version']).strip()
            check(said == f'{name} {version}', f'{name} --version says "{said}", want "{name} {version}"')

        check_postinst(ctrl)
        with open(os.path.join(root, 'usr/lib/sysusers.d/corral.conf')) as f:
            check(re.search(r'^u _corral ', f.read(), re.M) is not None,
                  'sysusers.d makes the system user _corral')

        with open(os.path.join(root, 'etc/corral/corral.json')) as f:
            cfg = json.load(f)
        check(cfg.get('user') not in (None, '', 'root', '0', 0),
              f'the shipped config runs workers as "{cfg.get("user")}", not root')
        for prog in PROGRAMS:
            path = os.path.join(root, prog)
            if 'corral-exec' in prog or not open(path, 'rb').read(4) == b'\x7fELF':
                continue  # static by design (lintian override), or a script
            check_hardened(path)
        if udir is not None:
            check_security(udir, root)

    if os.environ.get('CORRAL_PACKAGE_INSTALL') == '1':
        check_installed(deb, version)

    lint = os.path.join(d, 'lintian.txt')
    with open(lint) as f:
        tags = [ln for ln in f if re.match(r'^[EW]: ', ln)]
    check(not tags, f'lintian: no errors or warnings ({len(tags)})')
    if failures:
        print(f'{len(failures)} failed')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
