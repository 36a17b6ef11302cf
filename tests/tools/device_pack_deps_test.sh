#!/bin/bash
# tools/device_pack_deps.sh: .deps.tgz holds .deps/ but Eigen's unsupported/ modules and doc /
# man pages; a source that includes unsupported/Eigen is refused (exit 2, the old archive kept);
# no .deps/usr is refused (exit 2). Runs on a repository of its own (the tool is the subject).
# Usage: device_pack_deps_test.sh SOURCE_DIR
set -u
src=$1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail() { echo "device_pack_deps_test: $*"; exit 1; }
cd "$t" && git init -q . || fail "no repository"
bash "$src/tools/device_pack_deps.sh" > out.txt 2>&1
[ $? = 2 ] || fail "no .deps/usr: exit 2 expected ($(cat out.txt))"
grep -q 'no .deps/usr' out.txt || fail "no .deps/usr: the message does not say so: $(cat out.txt)"
[ -e .deps.tgz ] && fail "no .deps/usr, yet .deps.tgz was written"
mkdir -p .deps/usr/include/eigen3/Eigen .deps/usr/include/eigen3/unsupported/Eigen .deps/usr/share/doc/x \
  .deps/usr/share/man/man1 .deps/usr/lib/x86_64-linux-gnu .deps/usr/share/eigen3/cmake kernels
echo dense > .deps/usr/include/eigen3/Eigen/Dense
echo fft > .deps/usr/include/eigen3/unsupported/Eigen/FFT
echo doc > .deps/usr/share/doc/x/README && echo man > .deps/usr/share/man/man1/x.1
echo lib > .deps/usr/lib/x86_64-linux-gnu/libgtest.a && echo cfg > .deps/usr/share/eigen3/cmake/Eigen3Config.cmake
echo '#include <Eigen/Dense>' > kernels/a.cpp
bash "$src/tools/device_pack_deps.sh" > out.txt 2>&1 || fail "pack failed: $(cat out.txt)"
tar tzf .deps.tgz > list.txt || fail ".deps.tgz unreadable"
for f in .deps/usr/include/eigen3/Eigen/Dense .deps/usr/lib/x86_64-linux-gnu/libgtest.a \
  .deps/usr/share/eigen3/cmake/Eigen3Config.cmake; do
  grep -qx "$f" list.txt || fail "the archive lacks $f"
done
grep -q 'unsupported\|share/doc\|share/man' list.txt && fail "the archive holds what it leaves out: $(grep 'unsupported\|share/doc\|share/man' list.txt)"
cp .deps.tgz kept.tgz
echo '#include <unsupported/Eigen/FFT>' > kernels/b.cu
bash "$src/tools/device_pack_deps.sh" > out.txt 2>&1
[ $? = 2 ] || fail "a source including unsupported/Eigen: exit 2 expected"
cmp -s .deps.tgz kept.tgz || fail "a refused run changed .deps.tgz"
# A tar that fails (a read error): exit 1, the earlier archive kept, no temp file left (the
# failure on the left of && went past set -e, and the old size was printed as the new).
mkdir -p bin && printf '#!/bin/sh\necho "tar: simulated read error" >&2\nexit 2\n' > bin/tar && chmod +x bin/tar
rm -f kernels/b.cu
PATH="$t/bin:$PATH" bash "$src/tools/device_pack_deps.sh" > out.txt 2>&1
[ $? = 1 ] || fail "a failing tar: exit 1 expected ($(cat out.txt))"
cmp -s .deps.tgz kept.tgz || fail "a failed pack changed .deps.tgz"
[ ! -e .deps.tgz.tmp ] || fail "a failed pack left .deps.tgz.tmp"
echo "device_pack_deps_test: ok"
