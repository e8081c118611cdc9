#!/usr/bin/env bash
# install-example: what a C program embedding tfserve sees. Installs the build into a temporary
# prefix, checks the installed tree (binaries, archives, headers without internal ones, .pc files
# naming that prefix), builds examples/c-api/example.c as its comment says -- cc and pkg-config
# with PKG_CONFIG_PATH only, no path into the source or build tree -- and runs it on the bundled
# half_plus_two model (y = x/2 + 2).
# usage: test_install.sh SOURCE_DIR BUILD_DIR LIBDIR CMAKE (LIBDIR: CMAKE_INSTALL_LIBDIR, relative)
set -euo pipefail
src=$1 build=$2 libdir=$3 cmake=$4
fail() { echo "install-example: FAIL: $*"; exit 1; }

for tool in cc pkg-config; do
  command -v $tool >/dev/null || { echo "install-example: SKIP: no $tool"; exit 77; }
done
model=$build/models/half_plus_two/1
[ -f "$model/saved_model.pb" ] || fail "$model: no saved_model.pb (build the demo-model target)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "cmake --install"; }

for f in bin/tfserve bin/tfserve-train bin/tfserve-inspect; do
  [ -x "$prefix/$f" ] || fail "$f not installed"
done
for f in libtfserve-runtime.a libtfserve-savedmodel.a pkgconfig/tfserve-runtime.pc \
         pkgconfig/tfserve-savedmodel.pc; do
  [ -f "$prefix/$libdir/$f" ] || fail "$libdir/$f not installed"
done
[ -f "$prefix/include/tfserve/savedmodel/savedmodel.h" ] || fail "savedmodel.h not installed"
impl=$(find "$prefix/include" -name '*-impl.h')
[ -z "$impl" ] || fail "internal headers installed: $impl"

export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
# The prefix is the one given to `cmake --install`, not the configured one.
got=$(pkg-config --variable=prefix tfserve-savedmodel)
[ "$got" = "$prefix" ] || fail "tfserve-savedmodel.pc: prefix=$got, expected $prefix"
[ "$(pkg-config --modversion tfserve-runtime)" = "$(pkg-config --modversion tfserve-savedmodel)" ] ||
  fail "the two .pc files disagree on the version"
flags=$(pkg-config --static --cflags --libs tfserve-savedmodel)
case "$flags" in
  *"$src"*|*"$build"*) fail "pkg-config flags point into the source or build tree: $flags";;
esac

# Built the way example.c's comment says, in a folder of its own so no tree header is near.
cp "$src/examples/c-api/example.c" "$tmp/example.c"
(cd "$tmp" && cc -std=c11 -Wall -Wextra -Werror ${EXAMPLE_CFLAGS:-} example.c $flags -o example) ||
  fail "example.c does not build against the installed tree (flags: $flags)"

out=$("$tmp/example" "$model" 1,2,5)
echo "example: $out"
# half_plus_two: y = x/2 + 2 for x = 1, 2, 5.
[ "$out" = "y: 2.5,3,4.5" ] || fail "example printed '$out', expected 'y: 2.5,3,4.5'"
# The signature by name, and a batch of one.
out=$("$tmp/example" "$model" 0 serving_default)
[ "$out" = "y: 2" ] || fail "example printed '$out' for x = 0, expected 'y: 2'"
# Errors name what is at fault and exit 1.
set +e
err=$("$tmp/example" "$model" 1,2,5 no_such_signature 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && [[ $err == *"NOT_FOUND"*"no_such_signature"* ]] ||
  fail "unknown signature: exit $rc, '$err'"
set +e
err=$("$tmp/example" "$tmp/no-model" 1 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && [[ $err == *"NOT_FOUND"* ]] || fail "missing model: exit $rc, '$err'"

# The installed tools run from the prefix: tfserve-inspect reads the same model.
"$prefix/bin/tfserve-inspect" "$model" | grep -q serving_default ||
  fail "installed tfserve-inspect does not show serving_default"
echo "install-example: OK"
