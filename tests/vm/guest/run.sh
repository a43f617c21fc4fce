#!/bin/bash
# Entry point on the 9p share, run by the image's corral-vm-boot as
#   run.sh SHARE
# Installs corral's Debian package (SHARE/deb), runs the guest checks against
# the packaged service and the cgroup unit tests, and leaves results and
# logs on the share. The host parses SHARE/results.txt.
set -u
share=$1
res=$share/results.txt
: > "$res"
echo "# booted uptime=$(cut -d' ' -f1 /proc/uptime)" >> "$res"

# The package, as an operator installs it: apt resolves its dependencies
# from what the image holds (no network), runs the maintainer scripts (the
# _corral user), and must neither enable nor start a unit.
install_package() {
	local deb out
	deb=$(ls "$share"/deb/corral_*.deb)
	cp "$deb" /root/ && deb=/root/$(basename "$deb")
	out=$(DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$deb" 2>&1)
	echo "$out" > "$share/apt-install.log"
	dpkg-query -W -f '${Status}' corral | grep -q 'install ok installed' ||
		{ echo "apt install ./$(basename "$deb") failed: $(echo "$out" | tail -n 1)"; return 1; }
	local want said
	want=$(dpkg-query -W -f '${Version}' corral)
	said=$(corrald --version)
	[ "$said" = "corrald $want" ] || { echo "corrald --version says '$said', the package is $want"; return 1; }
	getent passwd _corral > /dev/null || { echo "no _corral user after the install"; return 1; }
	local u
	for u in corral.service corral.socket; do
		[ "$(systemctl is-enabled "$u")" = disabled ] ||
			{ echo "$u is $(systemctl is-enabled "$u") after the install, want disabled"; return 1; }
		systemctl is-active -q "$u" && { echo "$u was started by the install"; return 1; }
	done
	dpkg-query -W -f '${Conffiles}' corral | grep -q '/etc/corral/corral.json' ||
		{ echo "/etc/corral/corral.json is not a conffile"; return 1; }
	return 0
}
if why=$(install_package); then
	echo "ok package-install # $(dpkg-query -W -f '${Version}' corral)" >> "$res"
else
	echo "not ok package-install: $why" >> "$res"
fi

# corral's container OOM scenarios in docker on cgroup v2 (engine.sh), first:
# the engine is stopped before the systemd checks.
timeout 900 /bin/bash "$share/guest/engine.sh" "$share"
echo "# engine checks exit $? uptime=$(cut -d' ' -f1 /proc/uptime)" >> "$res"
timeout 600 /bin/bash "$share/guest/checks.sh" "$share"
echo "# checks exit $? uptime=$(cut -d' ' -f1 /proc/uptime)" >> "$res"
timeout 300 /bin/bash "$share/guest/unit-tests.sh" "$share"
echo "# unit tests exit $? uptime=$(cut -d' ' -f1 /proc/uptime)" >> "$res"
# The classification tests on cgroup v2. They make their test groups at the
# root, as on a v2 host: memory must be enabled in the root's subtree (a
# systemd host enables it once any unit uses memory accounting).
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
timeout 600 /bin/bash "$share/guest/unit-tests.sh" "$share" classify "" noskip
echo "# classify tests exit $? uptime=$(cut -d' ' -f1 /proc/uptime)" >> "$res"

# corral's Kubernetes manifests played by podman kube play (kube.sh), with
# engine.sh's image; podman needs no daemon, its pods are removed at the
# end. Last: the cgroup unit tests' kill of 1000 processes slows down with
# every container run before it in the emulated guest (25 s at boot, 37 s
# after kube.sh, over its 60 s a third time), so it runs before these.
timeout 900 /bin/bash "$share/guest/kube.sh" "$share"
echo "# kube checks exit $? uptime=$(cut -d' ' -f1 /proc/uptime)" >> "$res"

journalctl -b --no-pager > "$share/journal.txt" 2>&1
journalctl -b -u corral.service -u corral.socket -o verbose --no-pager \
	> "$share/corral-journal.txt" 2>&1
echo "# done uptime=$(cut -d' ' -f1 /proc/uptime)" >> "$res"
sync
