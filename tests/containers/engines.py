"""Container engines for corral's tests, private to each test run: a dockerd
started by hand (data, exec root and socket in a temporary directory, no
bridge, no iptables) and podman with its own storage (runc, cgroupfs,
file events). The image is built from containers/Containerfile with
BINARIES=prebuilt on a base made of the binaries' library closure
(containers/mkbase), cached under /var/cache/corral-containers by the hash
of its inputs. Python 3 standard library only."""
import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import corraltest as ct  # noqa: E402

SRC = os.environ.get("CORRAL_SOURCE_ROOT",
                     os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("CORRAL_BUILD_ROOT", "")
CACHE = os.environ.get("CORRAL_CONTAINER_CACHE", "/var/cache/corral-containers")
SKIP = 77


class Unavailable(Exception):
    pass


_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


@contextlib.contextmanager
def netns_of(pid):
    """Runs the block with this thread in pid's network namespace: a socket
    made inside stays there (containers run with --network none), as
    corral-lab reaches them."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    other = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        if _libc.setns(other, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns")
        try:
            yield
        finally:
            _libc.setns(own, CLONE_NEWNET)
    finally:
        os.close(own)
        os.close(other)


def run(argv, timeout=300, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({r.returncode}):\n{r.stdout[-2000:]}"
                             f"\n{r.stderr[-3000:]}")
    return r.stdout


def stage_install(dest):
    """The build under test, installed as DESTDIR into dest, usr-merged like
    the image it is copied onto (/lib there is a symlink to usr/lib)."""
    run(["meson", "install", "-C", BUILD, "--destdir", dest, "--no-rebuild", "--quiet"])
    for top in ("bin", "sbin", "lib"):
        src = os.path.join(dest, top)
        if os.path.isdir(src) and not os.path.islink(src):
            shutil.copytree(src, os.path.join(dest, "usr", top), symlinks=True,
                            dirs_exist_ok=True)
            shutil.rmtree(src)


def base_tarball(stage):
    """(key, path) of the closure base, made once per set of inputs."""
    os.makedirs(CACHE, exist_ok=True)
    mkbase = os.path.join(SRC, "containers", "mkbase")
    key = run(["python3", mkbase, "--key", stage]).strip()
    path = os.path.join(CACHE, f"base-{key}.tar")
    if not os.path.exists(path):
        tmp = path + f".{os.getpid()}.tmp"
        run(["python3", mkbase, stage, tmp])
        os.replace(tmp, path)
    return key, path


def build_context(stage, ctx):
    """The files the Containerfile COPYs, and nothing else."""
    os.makedirs(os.path.join(ctx, "containers"))
    shutil.copy(os.path.join(SRC, "containers", "Containerfile"), ctx)
    shutil.copy(os.path.join(SRC, "containers", "entrypoint"), os.path.join(ctx, "containers"))
    shutil.copytree(stage, os.path.join(ctx, "containers", "stage"), symlinks=True)
    shutil.copytree(os.path.join(SRC, "examples", "node"), os.path.join(ctx, "examples", "node"))


class Engine:
    name = ""
    cmd = []

    def build_image(self, tag="corral-test"):
        """Imports the cached base and builds the image; returns the tag."""
        with tempfile.TemporaryDirectory(prefix="corral-img-") as tmp:
            stage = os.path.join(tmp, "stage")
            stage_install(stage)
            key, tar = base_tarball(stage)
            base = f"corral-base:{key}"
            if subprocess.run(self.cmd + ["image", "inspect", base],
                              capture_output=True).returncode != 0:
                run(self.cmd + ["import", tar, base])
            ctx = os.path.join(tmp, "ctx")
            build_context(stage, ctx)
            run(self.cmd + ["build", "-q", "-f", os.path.join(ctx, "Containerfile"),
                            "--build-arg", f"BASE={base}", "--build-arg", "BINARIES=prebuilt",
                            "-t", tag, ctx] + self.build_flags(), timeout=600,
                env=dict(os.environ, DOCKER_BUILDKIT="1"))
        self.image = tag
        return tag

    def build_flags(self):
        return []

    def run_flags(self):
        return self.sanitizer_flags()

    @staticmethod
    def sanitizer_flags():
        """A sanitizer build's options reach the binaries in the container."""
        return [f for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS") if os.environ.get(k)
                for f in ("-e", f"{k}={os.environ[k]}")]

    def env(self):
        """What corral-lab needs to drive this engine."""
        return {"CORRAL_LAB_ENGINE": " ".join(self.cmd), "CORRAL_LAB_IMAGE": self.image,
                "CORRAL_LAB_RUN_FLAGS": " ".join(self.sanitizer_flags())}


class Docker(Engine):
    name = "docker"

    def __init__(self):
        for b in ("dockerd", "docker", "containerd", "runc"):
            if not shutil.which(b):
                raise Unavailable(f"{b} is not installed (scripts/deps)")
        self.tmp = tempfile.mkdtemp(prefix="corral-dockerd-")
        self.sock = os.path.join(self.tmp, "docker.sock")
        self.cmd = [shutil.which("docker") if not os.path.exists("/usr/bin/docker")
                    else "/usr/bin/docker", "-H", f"unix://{self.sock}"]
        self.log = open(os.path.join(self.tmp, "dockerd.log"), "wb")
        self.proc = subprocess.Popen(
            ["dockerd", "--data-root", os.path.join(self.tmp, "data"),
             "--exec-root", os.path.join(self.tmp, "exec"), "-H", f"unix://{self.sock}",
             "--pidfile", os.path.join(self.tmp, "docker.pid"), "--bridge=none",
             "--iptables=false", "--ip-forward=false", "--ip-masq=false"],
            stdout=self.log, stderr=subprocess.STDOUT)
        def up():
            if self.proc.poll() is not None:
                raise AssertionError(f"dockerd exited {self.proc.returncode}")
            return subprocess.run(self.cmd + ["info"], capture_output=True).returncode == 0
        try:
            ct.wait_for(up, 60, interval=0.3, what="dockerd to answer `docker info`")
        except AssertionError as e:
            self.close()
            raise AssertionError(f"dockerd did not start: {e}") from None

    def build_flags(self):
        return ["--network", "none"]

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        # dockerd unmounts its overlays on exit; anything left is unmounted
        # before the directory goes.
        with contextlib.suppress(Exception):
            subprocess.run(["umount", "-R", "-l", self.tmp], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)


class Podman(Engine):
    name = "podman"

    def __init__(self):
        for b in ("podman", "runc"):
            if not shutil.which(b):
                raise Unavailable(f"{b} is not installed (scripts/deps)")
        self.tmp = tempfile.mkdtemp(prefix="corral-podman-")
        self.cmd = ["podman", "--root", os.path.join(self.tmp, "root"),
                    "--runroot", os.path.join(self.tmp, "run"), "--tmpdir",
                    os.path.join(self.tmp, "tmp"), "--runtime", "runc",
                    "--cgroup-manager=cgroupfs", "--events-backend=file"]

    def build_flags(self):
        return ["--network", "none", "--ulimit", "nofile=1024:20000",
                "--ulimit", "nproc=4096:4096"]

    def run_flags(self):
        return ["--ulimit", "nofile=1024:20000", "--ulimit", "nproc=4096:4096"] + \
            self.sanitizer_flags()

    def close(self):
        with contextlib.suppress(Exception):
            subprocess.run(self.cmd + ["rm", "-af", "-t", "0"], capture_output=True, timeout=60)
        with contextlib.suppress(Exception):
            subprocess.run(self.cmd + ["system", "reset", "-f"], capture_output=True,
                           timeout=60)
        with contextlib.suppress(Exception):
            subprocess.run(["umount", "-R", "-l", self.tmp], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)


def engine(name):
    return {"docker": Docker, "podman": Podman}[name]()
