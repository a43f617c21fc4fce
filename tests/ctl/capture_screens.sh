#!/bin/sh
# Regenerates docs/img/corralctl-*.txt from a live corrald (not a test):
#   tests/ctl/capture_screens.sh BUILD_DIR
# Needs root (per-worker cgroups under a throwaway parent), tmux and curl.
set -eu
B=$(cd "${1:?build dir}" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT="$SRC/docs/img"
D=$(mktemp -d)
CG=/corral-test-$$-capture
mkdir -p "$OUT"
"$B/supervisor/corrald" --workers 3 --listen 127.0.0.1:0 --control "$D/c.sock" \
    --cgroup-parent "$CG" --memory-max 96M >"$D/log" 2>&1 &
P=$!
trap 'kill $P 2>/dev/null || true; wait $P 2>/dev/null || true;
      for g in $(find /sys/fs/cgroup/*$CG -depth -type d 2>/dev/null); do rmdir "$g" || true; done;
      tmux kill-session -t corral-capture-$$ 2>/dev/null || true; rm -rf "$D"' EXIT
C="$B/supervisor/ctl/corralctl --socket $D/c.sock"
i=0; until $C ping >/dev/null 2>&1; do i=$((i + 1)); [ $i -lt 50 ] || exit 1; sleep 0.1; done
sleep 1
A=$($C --json status | python3 -c 'import json,sys; print(json.load(sys.stdin)["supervisor"]["listen"][0]["address"])')
tmux new-session -d -s corral-capture-$$ -x 132 -y 26 "$C top"
for i in 1 2 3 4 5 6 7 8; do
    curl -s -o /dev/null "http://$A/buffer?mb=6&retain=1"
    curl -s -o /dev/null "http://$A/alloc?mb=5&retain=1"
    curl -s -o /dev/null "http://$A/heavy?ms=120" &
    sleep 1
done
for i in 1 2 3 4 5 6 7 8; do curl -s -o /dev/null "http://$A/alloc?mb=10&retain=1"; sleep 0.3; done
curl -s -o /dev/null "http://$A/buffer?mb=100" || true
sleep 2
tmux capture-pane -p -t corral-capture-$$ >"$OUT/corralctl-top.txt"
tmux send-keys -t corral-capture-$$ q
$C status >"$OUT/corralctl-status.txt"
$C history >"$OUT/corralctl-history.txt"
$C stop >/dev/null
wait $P
