#!/usr/bin/env python3
"""corral under a real systemd with cgroup v2, in a QEMU guest.

1. Build (or reuse from the cache) a Debian 12 guest image: image/ holds the
   recipe; the cache key is a hash of every file in image/.
2. Stage the build under test on a 9p share: the Debian package built from
   a clean copy of the tree (tests/package/build_deb.py, shared with the
   package test), and the same source as a newer version for the upgrade
   check; the guest installs it with `apt install ./corral_*.deb`. Plus
   the build's cgroup unit-test executables and a manifest of how meson runs
   them, the classification tests (tests/integration, run against the
   packaged corrald and worker, so they run on cgroup v2 too, with the
   shared harness they import, tests/lib), the corral
   container image (`docker save`, for guest/engine.sh and guest/kube.sh),
   the Kubernetes manifests (containers/kubernetes, for guest/kube.sh),
   plus the guest scripts: the whole of guest/ as SHARE/guest/, lib.sh
   (the check helpers checks.sh, engine.sh and kube.sh source from beside
   them) included. guest/ is not part of the image: editing it rebuilds
   nothing but the package, whose key is the tree's hash.
3. Boot the guest (TCG unless told otherwise) with a hard timeout; its test
   unit runs guest/run.sh from the share and powers the guest off.
4. Parse SHARE/results.txt: every check named in guest/checks.sh, every
   staged unit test and every classify-* case must report "ok"; any "not ok"
   or missing line fails.

Exit 77 (skip) when CORRAL_SKIP_VM=1 or the tools (qemu-system-x86_64,
mmdebstrap, mkfs.ext4) or root are missing, unless --required.
Environment: CORRAL_VM_CACHE (default /var/cache/corral-vm),
CORRAL_DEB_CACHE (build_deb.py's cache, default BUILD_ROOT/deb),
CORRAL_VM_TIMEOUT (seconds for the guest, default 2400),
CORRAL_VM_ACCEL=kvm to try KVM (only where a stock kernel boots under it).
"""
import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
IMAGE_DIR = os.path.join(HERE, 'image')
GUEST_DIR = os.path.join(HERE, 'guest')
IMAGE_FILES = ('rootfs.ext4', 'vmlinuz', 'initrd.img')
GUEST_SHARE = '/mnt/corral'


def log(msg):
    print(f'[vm {time.strftime("%H:%M:%S")}] {msg}', flush=True)


def image_key():
    """Hash of the image recipe: package list, build script, baked files."""
    h = hashlib.sha256()
    for name in sorted(os.listdir(IMAGE_DIR)):
        h.update(name.encode() + b'\0')
        with open(os.path.join(IMAGE_DIR, name), 'rb') as f:
            h.update(f.read() + b'\0')
    return h.hexdigest()[:16]


def ensure_image(cache, work):
    """Return (image dir, seconds spent building, 0 when reused)."""
    os.makedirs(cache, exist_ok=True)
    imgdir = os.path.join(cache, 'debian12-' + image_key())
    with open(os.path.join(cache, '.lock'), 'w') as lock:
        # Parallel runs from several build dirs share one image.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if all(os.path.exists(os.path.join(imgdir, f)) for f in IMAGE_FILES):
            return imgdir, 0.0
        shutil.rmtree(imgdir, ignore_errors=True)
        buildlog = os.path.join(work, 'image-build.log')
        log(f'building the guest image into {imgdir} (log: {buildlog})')
        t0 = time.monotonic()
        with open(buildlog, 'w') as out:
            proc = subprocess.run(
                ['sh', os.path.join(IMAGE_DIR, 'build-image.sh'), imgdir,
                 os.path.join(IMAGE_DIR, 'packages.txt'), IMAGE_DIR],
                stdout=out, stderr=subprocess.STDOUT, timeout=900)
        if proc.returncode != 0:
            with open(buildlog) as f:
                sys.stdout.write(''.join(f.readlines()[-30:]))
            raise RuntimeError(f'image build failed ({proc.returncode})')
        prune(cache, imgdir)
        return imgdir, time.monotonic() - t0


def prune(cache, keep):
    """Drop images of older recipes (~400 MB each) once a day has passed
    since they were built; the caller holds the cache lock."""
    for name in os.listdir(cache):
        path = os.path.join(cache, name)
        if not name.startswith('debian12-') or path == keep:
            continue
        if time.time() - os.path.getmtime(path) > 86400:
            log(f'removing the stale image {path}')
            shutil.rmtree(path, ignore_errors=True)


# The upgrade check's second package: the same source as a newer version.
UPGRADE_SUFFIX = '+vm1'


def stage_packages(build_root, source_root, share):
    """The package and its newer twin into SHARE/deb/ (with the package's
    file list, SHARE/deb/files.txt, for installed()); returns the time the
    builds took (0 when cached)."""
    sys.path.insert(0, os.path.join(source_root, 'tests', 'package'))
    import build_deb
    t0 = time.monotonic()
    out = os.path.join(build_root, 'deb')
    d = os.path.join(share, 'deb')
    os.makedirs(os.path.join(d, 'upgrade'))
    for suffix, dst in (('', d), (UPGRADE_SUFFIX, os.path.join(d, 'upgrade'))):
        built = build_deb.build(source_root, out, suffix)
        with open(os.path.join(built, 'ok')) as f:
            version = f.read().strip()
        debs = [f for f in os.listdir(built)
                if f.startswith(f'corral_{version}_') and f.endswith('.deb')]
        if len(debs) != 1:
            raise RuntimeError(f'no single corral_{version}_*.deb in {built}')
        shutil.copy2(os.path.join(built, debs[0]), dst)
        log(f'staged {debs[0]}')
        if not suffix:
            listing = subprocess.run(['dpkg-deb', '-c', os.path.join(built, debs[0])],
                                     stdout=subprocess.PIPE, text=True, check=True).stdout
            with open(os.path.join(d, 'files.txt'), 'w') as f:
                for line in listing.splitlines():
                    path = line.split()[5]
                    if not path.endswith('/'):
                        f.write(path.lstrip('.') + '\n')
    return time.monotonic() - t0


def is_cgroup_test(t):
    suites = [s.split(':')[-1] for s in t.get('suite', [])]
    exe = os.path.basename(t['cmd'][0]) if t.get('cmd') else ''
    return 'cgroups' in suites or exe.startswith('test_cgroups')


def relocate(value, roots, files, name):
    """Copy a file or directory of the source or build tree named by a test
    argument or environment value onto the share; return its guest path."""
    if not os.path.isabs(value) or not os.path.exists(value):
        return value
    real = os.path.realpath(value)
    if not any(real.startswith(os.path.realpath(r) + '/') for r in roots):
        return value
    dst = os.path.join(files, os.path.basename(real))
    if os.path.isdir(real):
        shutil.copytree(real, dst, dirs_exist_ok=True)
    else:
        shutil.copy2(real, dst)
    return f'{GUEST_SHARE}/unit/{name}/{os.path.basename(real)}'


def meson_tests(meson, build_root):
    """The build's tests as `meson introspect --tests` describes them."""
    proc = subprocess.run([meson, 'introspect', '--tests', build_root],
                          stdout=subprocess.PIPE, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError('meson introspect --tests failed')
    return json.loads(proc.stdout)


def safe_name(name):
    return re.sub(r'[^A-Za-z0-9_.-]', '_', name)


def stage_unit_tests(tests, build_root, source_root, share):
    """Copy the cgroup unit tests with the argv/env meson would use."""
    unit = os.path.join(share, 'unit')
    os.makedirs(unit, exist_ok=True)
    manifest = []
    for t in tests:
        if not is_cgroup_test(t):
            continue
        name = safe_name(t['name'])
        files = os.path.join(unit, name)
        os.makedirs(files, exist_ok=True)
        roots = (build_root, source_root)
        argv = [relocate(a, roots, files, name) for a in t['cmd']]
        env = {k: relocate(v, roots, files, name)
               for k, v in (t.get('env') or {}).items()}
        # Emulated (TCG) on a shared host: a process start costs ten times
        # what it does here (cgroup-kill starts 1000 of them), so meson's
        # limit is tripled in the guest.
        manifest.append({'name': name, 'argv': argv, 'env': env,
                         'timeout': 3 * int(t.get('timeout') or 60)})
        log(f'staged unit test {name}: {" ".join(argv)}')
    with open(os.path.join(unit, 'manifest.json'), 'w') as f:
        json.dump(manifest, f, indent=1)
    return [m['name'] for m in manifest]


def is_classify_test(t):
    # The -nocg variants take the path without cgroups, the same on v1 and
    # v2: the host runs them. Node.js is not in the guest image (its v2
    # behaviour is the C worker's): test_node.py stays on the host.
    return (t['name'].startswith('classify-') and not t['name'].endswith('-nocg')
            and not any(a.endswith('test_node.py') for a in t['cmd']))


def installed(value, build_root, share):
    """The guest path of the packaged copy of a build-tree executable named
    in a test's environment, e.g. CORRALD: the guest runs what the package
    installed, as users do."""
    real = os.path.realpath(value)
    if not real.startswith(os.path.realpath(build_root) + '/'):
        return value
    with open(os.path.join(share, 'deb', 'files.txt')) as f:
        for path in f.read().split():
            if os.path.basename(path) == os.path.basename(real):
                return path
    raise RuntimeError(f'{value} is not in the package: cannot run it in the guest')


def stage_classify_tests(tests, build_root, source_root, share):
    """The classification tests (tests/integration/classify) on cgroup v2:
    the Python harness goes onto the share, the executables they start are
    the installed ones."""
    src = os.path.join(source_root, 'tests', 'integration')
    dst = os.path.join(share, 'integration')
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns('__pycache__', 'meson.build'))
    # The shared harness they import (tests/lib/corraltest.py), beside
    # integration/ as in the source tree: SHARE/lib.
    shutil.copytree(os.path.join(source_root, 'tests', 'lib'), os.path.join(share, 'lib'),
                    ignore=shutil.ignore_patterns('__pycache__'))
    os.makedirs(os.path.join(share, 'classify'), exist_ok=True)
    manifest = []
    for t in tests:
        if not is_classify_test(t):
            continue
        script = os.path.relpath(os.path.realpath(t['cmd'][1]), os.path.realpath(src))
        if script.startswith('..'):
            raise RuntimeError(f'{t["name"]}: {t["cmd"][1]} is not under {src}')
        argv = ['python3', f'{GUEST_SHARE}/integration/{script}'] + t['cmd'][2:]
        env = {k: installed(v, build_root, share) if os.path.isabs(v) else v
               for k, v in (t.get('env') or {}).items()}
        # The guest is emulated on a shared host: waits for an event get
        # three times longer (corraltest.WAIT_SCALE), and so does the case.
        env['CORRAL_TEST_WAIT_SCALE'] = '3'
        manifest.append({'name': safe_name(t['name']), 'argv': argv, 'env': env,
                         'timeout': 2 * int(t.get('timeout') or 60)})
        log(f'staged classify test {t["name"]}: {" ".join(argv)}')
    with open(os.path.join(share, 'classify', 'manifest.json'), 'w') as f:
        json.dump(manifest, f, indent=1)
    return [m['name'] for m in manifest]


def stage_container_image(build_root, source_root, share):
    """The corral image for guest/engine.sh, built here as
    tests/containers builds it (a private dockerd, containers/Containerfile
    with BINARIES=prebuilt on the containers/mkbase base) and saved to
    SHARE/engine/corral-image.tar: the guest has no registry, it loads this.
    Returns None, or why there is no image (written to SHARE/engine/why so
    that the guest's checks say it)."""
    d = os.path.join(share, 'engine')
    os.makedirs(d, exist_ok=True)
    os.environ.setdefault('CORRAL_BUILD_ROOT', build_root)
    os.environ.setdefault('CORRAL_SOURCE_ROOT', source_root)
    sys.path.insert(0, os.path.join(source_root, 'tests', 'containers'))
    why = None
    try:
        import engines
        t0 = time.monotonic()
        eng = engines.Docker()
        try:
            tag = eng.build_image('corral-test')
            engines.run(eng.cmd + ['save', '-o', os.path.join(d, 'corral-image.tar'), tag])
        finally:
            eng.close()
        size = os.path.getsize(os.path.join(d, 'corral-image.tar')) >> 20
        log(f'container image {tag} built and saved ({size} MiB) in '
            f'{time.monotonic() - t0:.1f} s')
    except Exception as e:  # noqa: BLE001 - reported by the guest's checks
        why = f'{type(e).__name__}: {e}'.replace('\n', ' ')[:400]
        log(f'no container image for the guest: {why}')
        with open(os.path.join(d, 'why'), 'w') as f:
            f.write(why + '\n')
    return why


def stage_kube(source_root, share):
    """The Kubernetes manifests and the script that reads them
    (tests/containers/kube_manifest.py) into SHARE/kube/, for guest/kube.sh;
    the image is engine's."""
    d = os.path.join(share, 'kube')
    os.makedirs(d, exist_ok=True)
    manifests = os.path.join(source_root, 'containers', 'kubernetes')
    for name in sorted(os.listdir(manifests)):
        if name.endswith('.yaml'):
            shutil.copy2(os.path.join(manifests, name), d)
    shutil.copy2(os.path.join(source_root, 'tests', 'containers', 'kube_manifest.py'), d)


def expected_checks():
    """Check names, in order, from the check() calls in guest/checks.sh,
    guest/engine.sh and guest/kube.sh."""
    names = []
    for script in ('checks.sh', 'engine.sh', 'kube.sh'):
        with open(os.path.join(GUEST_DIR, script)) as f:
            names += re.findall(r'^check ([a-z0-9-]+) ', f.read(), re.M)
    return names


def qemu_command(img, share):
    # Not -cpu max: QEMU 7.2's TCG mis-executes something in Debian 12's
    # kernel with it (every mount point in /proc/self/mountinfo reads
    # "xxxx"), which breaks systemd's mount namespacing (status 226/NAMESPACE)
    # for every hardened unit. The baseline model runs the kernel correctly.
    accel, cpu = 'tcg,thread=multi', 'qemu64'
    if os.environ.get('CORRAL_VM_ACCEL') == 'kvm':
        # Opt-in only: a /dev/kvm may exist without being able to boot a
        # stock kernel (a PVM device, for one).
        with open('/proc/cpuinfo') as f:
            virt = re.search(r'^flags\s*:.*\b(vmx|svm)\b', f.read(), re.M)
        if virt and os.access('/dev/kvm', os.R_OK | os.W_OK):
            accel, cpu = 'kvm', 'host'
        else:
            log('CORRAL_VM_ACCEL=kvm but no vmx/svm or /dev/kvm: using TCG')
    return ['qemu-system-x86_64', '-accel', accel, '-cpu', cpu,
            '-m', '2048', '-smp', '2', '-nographic', '-no-reboot',
            '-nic', 'none',
            '-kernel', os.path.join(img, 'vmlinuz'),
            '-initrd', os.path.join(img, 'initrd.img'),
            '-drive', 'file=%s,if=virtio,format=raw,snapshot=on'
            % os.path.join(img, 'rootfs.ext4'),
            '-virtfs', f'local,path={share},mount_tag=corral,'
            'security_model=none',
            '-append', 'root=/dev/vda rw console=ttyS0 panic=-1 '
            'systemd.unified_cgroup_hierarchy=1 '
            # docker.io without the apparmor package (guest/engine.sh)
            'apparmor=0']


def boot(img, share, work, timeout):
    console = os.path.join(work, 'console.log')
    cmd = qemu_command(img, share)
    log('booting: ' + ' '.join(cmd))
    t0 = time.monotonic()
    with open(console, 'w') as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)
        rc = None
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:
            # Also on SIGTERM from meson's own timeout: never leave a guest.
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return rc, time.monotonic() - t0, console


def parse_results(path, expected):
    """Return (ok names, {name: why} failures, comment lines)."""
    oks, bad, notes = [], {}, []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.rstrip('\n')
                m = re.match(r'^(not ok|ok) ([^:\s]+)(?::\s*(.*))?', line)
                if m and m.group(1) == 'ok' and '# SKIP' in line:
                    notes.append(line)
                if line.startswith('#'):
                    notes.append(line)
                elif m and m.group(1) == 'ok':
                    oks.append(m.group(2))
                elif m:
                    bad[m.group(2)] = m.group(3) or ''
    for name in expected:
        if name not in oks and name not in bad:
            bad[name] = 'no result reported'
    return oks, bad, notes


def tail(path, n):
    try:
        with open(path, errors='replace') as f:
            return ''.join(f.readlines()[-n:])
    except OSError:
        return ''


def prerequisites():
    if os.environ.get('CORRAL_SKIP_VM') == '1':
        return 'CORRAL_SKIP_VM=1'
    missing = [t for t in ('qemu-system-x86_64', 'mmdebstrap', 'mkfs.ext4')
               if shutil.which(t) is None]
    if missing:
        return 'missing: ' + ', '.join(missing)
    if os.geteuid() != 0:
        return 'mmdebstrap --mode=root needs root'
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--build-root', required=True)
    ap.add_argument('--source-root', required=True)
    ap.add_argument('--work', required=True)
    ap.add_argument('--required', action='store_true')
    args = ap.parse_args()

    # meson's timeout sends SIGTERM: unwind so that qemu is killed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    why = prerequisites()
    if why:
        print(f'VM test not run: {why}')
        return 1 if args.required and why != 'CORRAL_SKIP_VM=1' else 77
    meson = shutil.which('meson')
    if meson is None:
        print('meson not found in PATH')
        return 1

    t_start = time.monotonic()
    work = os.path.abspath(args.work)
    share = os.path.join(work, 'share')
    shutil.rmtree(share, ignore_errors=True)
    os.makedirs(share)
    cache = os.environ.get('CORRAL_VM_CACHE', '/var/cache/corral-vm')
    timeout = int(os.environ.get('CORRAL_VM_TIMEOUT', '2400'))

    try:
        img, t_image = ensure_image(cache, work)
        log(f'image {img} ' +
            (f'built in {t_image:.1f} s' if t_image else 'reused'))
        t_deb = stage_packages(args.build_root, args.source_root, share)
        log(f'packages {"built in %.1f s" % t_deb if t_deb > 1 else "cached"}')
        tests = meson_tests(meson, args.build_root)
        units = stage_unit_tests(tests, args.build_root, args.source_root,
                                 share)
        classify = stage_classify_tests(tests, args.build_root,
                                        args.source_root, share)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f'VM test setup failed: {e}')
        return 1
    stage_container_image(args.build_root, args.source_root, share)
    stage_kube(args.source_root, share)
    # All of guest/: the scripts source guest/lib.sh by their own path.
    shutil.copytree(GUEST_DIR, os.path.join(share, 'guest'))
    expected = (['package-install'] + expected_checks() + ['unit-' + u for u in units] +
                classify)

    rc, t_vm, console = boot(img, share, work, timeout)
    results = os.path.join(share, 'results.txt')
    oks, bad, notes = parse_results(results, expected)

    print(tail(results, 200))
    for n in notes:
        log(n)
    log(f'timings: image {"build %.1f s" % t_image if t_image else "cached"}, '
        f'guest {t_vm:.1f} s, total {time.monotonic() - t_start:.1f} s')
    if rc is None:
        bad['qemu'] = f'guest still running after {timeout} s: killed'
    elif rc != 0:
        bad['qemu'] = f'qemu exited {rc}'
    log(f'{len(oks)} ok, {len(bad)} not ok; logs: {console}, '
        f'{share}/checks.log, {share}/journal.txt, {share}/corral-journal.txt')
    if bad:
        for name, reason in bad.items():
            print(f'FAILED {name}: {reason}')
        print('--- console tail ---')
        print(tail(console, 40))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
