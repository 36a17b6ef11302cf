# The common start of a device call script (reports/*/receipts-*/callN.sh), sourced from the
# repository root of the device's copy:
#   . tools/device_call.sh NAME
# It sets PATH (the CUDA toolkit first), T0 (the start, in $SECONDS), L (the call's own limit in
# seconds: KC_CALL_S, default 570), W=/tmp/NAME (the working folder, made), GPU (the card's name,
# "none" without nvidia-smi), and defines
#   left   the seconds left of L;
#   pack   $W as $OUT/NAME.tgz (what the call brings back; OUT is the device tool's folder);
# unpacks .deps.tgz where .deps is missing, and makes the git dir from .dev/snap
# (tools/h200_git_from_snap.sh), writing its line and the card's (name, driver, max SM clock) to
# $W/head.txt and stdout. Without a snapshot, with one that does not load, or with a .deps.tgz that
# does not unpack, it exits 4, so the call says so at once. Before the call (here): commit,
# KC_SNAP_BASE=0 tools/h200_snap.sh, and carry .deps.tgz and .dev.
# shellcheck shell=bash
kc_call_name=${1:?"usage: . tools/device_call.sh NAME"}
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS
L=${KC_CALL_S:-570}
W=/tmp/$kc_call_name
mkdir -p "$W"
left() { echo $((L - SECONDS + T0)); }
pack() { tar czf "${OUT:?OUT: the device tool sets it}/$kc_call_name.tgz" -C /tmp "$kc_call_name" 2> /dev/null; }
[ -d .deps ] || [ ! -f .deps.tgz ] || tar xzf .deps.tgz || { echo "device_call: .deps.tgz did not unpack"; exit 4; }
bash tools/h200_git_from_snap.sh | tee "$W/head.txt"
[ "${PIPESTATUS[0]}" = 0 ] || exit 4
if command -v nvidia-smi > /dev/null; then
  GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | head -1 | tee -a "$W/head.txt"
else
  GPU=none
  echo "no nvidia-smi" | tee -a "$W/head.txt"
fi
