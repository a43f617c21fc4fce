#!/bin/sh
# Builds corral against llhttp and runs its unit, worker and package suites,
# in a Debian 13 (trixie) build root: Debian 12 has no llhttp package, and
# the llhttp path of common/http_parse.c must not rot unbuilt. The package
# suite builds corral's Debian package from the same source there and, as
# the root is disposable (below), installs it with apt and runs it.
#
# usage: tests/llhttp/run.sh BUILD_DIR_NAME   (as root; e.g. build-test-llhttp)
#
# The root is made once with mmdebstrap from the host's own Debian mirror
# (as tests/vm/image/build-image.sh does for the VM guest) and cached under
# $CORRAL_LLHTTP_CACHE (default /var/cache/corral-llhttp), keyed by a hash of
# the package list and $recipe (bump it when the mmdebstrap call changes);
# stale roots are removed. Each run enters
# a private mount namespace (unshare), lays a tmpfs overlay over the cached
# root (so the package installed there is gone after the run and the cache
# stays as built), binds the source tree at /src inside it and chroots there; the build dir is SRC/BUILD_DIR_NAME so that
# scripts/test-summary reads its test log like the others. Fails (never
# skips) when anything is missing, or when the build did not pick llhttp.
set -eu

name=${1:?usage: run.sh BUILD_DIR_NAME}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
cache=${CORRAL_LLHTTP_CACHE:-/var/cache/corral-llhttp}
recipe=2
key=$({ echo "$recipe"; cat "$here/packages"; } | sha256sum | cut -c1-16)
root=$cache/trixie-$key

[ "$(id -u)" -eq 0 ] || { echo "llhttp: needs root (mmdebstrap, chroot)" >&2; exit 1; }
# A failed run must not leave an older run's results for the summary.
rm -f "$src/$name/meson-logs/testlog.json"

# The host's Debian mirror: the first deb822 URIs or one-line "deb" source
# whose path ends in /debian (not -security). CORRAL_DEBIAN_MIRROR wins.
mirror=${CORRAL_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
	mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '
		$1 == "URIs:" { for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) { print $i; exit } }')
fi
if [ -z "$mirror" ]; then
	mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '
		$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\/.*\/debian\/?$/) { print $i; exit } }')
fi
[ -n "$mirror" ] || { echo "llhttp: no Debian mirror in the host's apt sources" >&2; exit 1; }

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9 # parallel runs share one root
if [ ! -d "$root" ]; then
	echo "llhttp: building the Debian 13 root $root from $mirror (once)"
	# A killed mmdebstrap can leave /dev or /proc mounted in its tree:
	# removing that would reach into the host's.
	if grep -q " $root.tmp/" /proc/mounts; then
		echo "llhttp: $root.tmp still has mounts; unmount them first" >&2
		exit 1
	fi
	rm -rf "$root.tmp"
	pkgs=$(sed -e 's/#.*//' "$here/packages" | tr -s ' \n' ',' | sed -e 's/^,//;s/,$//')
	mmdebstrap --variant=apt --mode=root --include="$pkgs" \
		--dpkgopt=force-unsafe-io \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		--dpkgopt='path-exclude=/usr/share/doc/*' \
		--customize-hook='mkdir -p "$1/src" &&
			rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
		trixie "$root.tmp" "deb $mirror trixie main" >"$cache/build.log" 2>&1 || {
		tail -20 "$cache/build.log" >&2
		echo "llhttp: mmdebstrap failed (log: $cache/build.log)" >&2
		exit 1
	}
	mv "$root.tmp" "$root"
	for old in "$cache"/trixie-*; do
		[ "$old" = "$root" ] || rm -rf "$old"
	done
fi
flock -u 9

# Inside: a private mount namespace, so every mount goes away with it.
scratch=$(mktemp -d /tmp/corral-llhttp.XXXXXX)
rc=0
unshare --mount --propagation private /bin/sh -eu -c '
	root=$1 src=$2 name=$3 scratch=$4
	mount -t tmpfs tmpfs "$scratch"
	mkdir "$scratch/upper" "$scratch/work" "$scratch/merged"
	mount -t overlay overlay \
		-o "lowerdir=$root,upperdir=$scratch/upper,workdir=$scratch/work" "$scratch/merged"
	root=$scratch/merged
	mount --bind "$src" "$root/src"
	mount -t proc proc "$root/proc"
	mount --rbind /dev "$root/dev"
	mount -t tmpfs tmpfs "$root/tmp"
	mount -t tmpfs tmpfs "$root/run"
	exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp \
		LANG=C.UTF-8 CORRAL_PACKAGE_INSTALL=1 /bin/sh -eu -c "
		cd /src
		git config --global --add safe.directory /src
		if [ -d \"\$0\" ]; then
			meson setup --reconfigure \"\$0\" -Dvm_tests=disabled >/dev/null
		else
			meson setup \"\$0\" -Dvm_tests=disabled >/dev/null
		fi
		grep -q \"CR_HTTP_LLHTTP=1\" \"\$0/compile_commands.json\" || {
			echo \"llhttp: the build did not select llhttp\" >&2
			exit 1
		}
		meson compile -C \"\$0\" >/dev/null
		meson test -C \"\$0\" --print-errorlogs --num-processes 2 --suite unit --suite worker \
			--suite package --no-suite node
	" "$name"
' sh "$root" "$src" "$name" "$scratch" || rc=$?
rmdir "$scratch"
exit "$rc"
