#!/bin/bash
# Entry point on the 9p share, run by the image's corral-vm-boot as
#   run.sh SHARE
# Installs the corral stage (meson install --destdir of the build under test)
# into /, runs the guest checks and the cgroup unit tests, and leaves results
# and logs on the share. The host parses SHARE/results.txt.
set -u
share=$1
res=$share/results.txt
: > "$res"
echo "# booted uptime=$(cut -d' ' -f1 /proc/uptime)" >> "$res"

# --keep-directory-symlink: /lib is a symlink to usr/lib on Debian 12.
if ! tar -C "$share/stage" -cf - . | tar -C / -xf - --keep-directory-symlink; then
	echo "not ok install-stage: copying the stage into / failed" >> "$res"
fi
ldconfig
systemctl daemon-reload

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

journalctl -b --no-pager > "$share/journal.txt" 2>&1
journalctl -b -u corral.service -u corral.socket -o verbose --no-pager \
	> "$share/corral-journal.txt" 2>&1
echo "# done uptime=$(cut -d' ' -f1 /proc/uptime)" >> "$res"
sync
