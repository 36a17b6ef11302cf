#!/usr/bin/env bash
# Packs .deps/ (../shared/tools/device-deps.sh's copy of our Debian dependencies) into .deps.tgz for a
# device call (carry .deps.tgz and .dev; the call's scripts unpack it with `tar xzf .deps.tgz`).
# A call's working tree, tracked files and carried paths together, must stay under 64 MiB, and the
# tracked tree alone is about 58 MiB: so Eigen's unsupported/ modules (3 MB, no source includes
# them; only <Eigen/Dense> is used) and any doc or man pages are left out, 2.4 -> 1.9 MB.
#   tools/device_pack_deps.sh        (from the repository root; .deps/ must exist)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
[ -d .deps/usr ] || { echo "device_pack_deps.sh: no .deps/usr (run ../shared/tools/device-deps.sh first)" >&2; exit 2; }
if grep -rqs --include='*.cpp' --include='*.h' --include='*.cu' --include='*.cuh' 'unsupported/Eigen' \
    bench contracts engine kernels reference tests tools 2>/dev/null; then
  echo "device_pack_deps.sh: a source includes unsupported/Eigen: keep it in the archive" >&2; exit 2
fi
# A failed tar or gzip (pipefail) leaves the earlier archive and no temp file, and exits 1: set -e
# does not stop at a failure on the left of &&.
if ! { tar cf - --exclude='.deps/usr/include/eigen3/unsupported' --exclude='.deps/usr/share/doc' \
         --exclude='.deps/usr/share/man' .deps | gzip -9 > .deps.tgz.tmp; }; then
  rm -f .deps.tgz.tmp
  echo "device_pack_deps.sh: packing .deps failed; .deps.tgz is unchanged" >&2
  exit 1
fi
mv .deps.tgz.tmp .deps.tgz
ls -l .deps.tgz | awk '{print ".deps.tgz: " $5 " bytes"}'
