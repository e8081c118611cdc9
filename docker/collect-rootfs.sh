#!/bin/sh
# Assembles the runtime image's file tree from a build tree: the tfserve binaries, every shared
# library they load (as ldd resolves them, at the same paths, so the dynamic loader finds them
# without any configuration), the bundled demo model, /etc/passwd and /etc/group with the
# unprivileged user 10001 "tfserve", and a writable /tmp.
#
# With --gpu (the GPU image, docker/Dockerfile.gpu) it adds the CUDA module beside tfserve, where
# tfserve looks for it first, and the CUDA runtime libraries the module loads: what ldd resolves
# for it (cudart, cuBLAS, cuBLASLt, cuDNN) plus the cuDNN libraries libcudnn.so.9 opens itself
# (libcudnn_ops, _cnn, _graph, _engines_*, ...; ldd cannot see those) and what they need. The
# toolkit lives outside the loader's default directories (/usr/local/cuda/lib64), so its libraries
# go to /usr/lib/<multiarch>/, found there without an ld.so.cache (the image has none). Never the
# driver (libcuda.so.1): it must match the host's kernel module, so the container runtime mounts
# the host's (CDI or the NVIDIA container toolkit).
#
#   collect-rootfs.sh [--gpu] BUILD_DIR ROOTFS_DIR
set -eu
gpu=0
if [ "${1:-}" = --gpu ]; then
  gpu=1
  shift
fi
build=$1
root=$2

mkdir -p "$root/usr/bin" "$root/etc" "$root/tmp" "$root/models"
chmod 1777 "$root/tmp"
for b in server/tfserve savedmodel/tfserve-inspect docker/tfserve-entrypoint docker/tfserve-probe; do
  install -m 0755 "$build/$b" "$root/usr/bin/"
done
if [ "$gpu" = 1 ]; then
  [ -e "$build/server/libtfserve-cuda.so" ] || {
    echo "collect-rootfs.sh: no $build/server/libtfserve-cuda.so (a build without CUDA?)" >&2
    exit 1
  }
  install -m 0755 "$build/server/libtfserve-cuda.so" "$root/usr/bin/"
fi

# The shared libraries the files named on stdin load: the "=> /path" entries plus the dynamic
# loader (the line without "=>"). A library ldd cannot find would fail at run time: stop here.
needed() {
  while read -r f; do
    out=$(ldd "$f")
    if printf '%s\n' "$out" | grep -q 'not found'; then
      printf 'collect-rootfs.sh: %s: %s\n' "$f" "$(printf '%s\n' "$out" | grep 'not found')" >&2
      exit 1
    fi
    printf '%s\n' "$out" | awk '/=> \// {print $3} /^[[:space:]]*\/[^ ]*ld-linux/ {print $1}'
  done
}

ls "$root"/usr/bin/* | needed | sort -u > "$root/.libs"
if [ "$gpu" = 1 ]; then
  # cuDNN's own libraries are opened from the directory libcudnn.so.9 was found in.
  cudnn=$(echo "$root/usr/bin/libtfserve-cuda.so" | needed | grep '/libcudnn\.so\.' || true)
  [ -n "$cudnn" ] || { echo "collect-rootfs.sh: the CUDA module does not load libcudnn" >&2; exit 1; }
  ls "$(dirname "$cudnn")"/libcudnn_*.so.* | grep -E '\.so\.[0-9]+$' | tee "$root/.cudnn" | needed >> "$root/.libs"
  cat "$root/.cudnn" >> "$root/.libs"
  sort -u -o "$root/.libs" "$root/.libs"
  rm "$root/.cudnn"
fi
# Debian's libraries keep their paths (the loader's default directories, or a RUNPATH such as
# OpenBLAS's openblas-pthread/). One found elsewhere (/usr/local/cuda/lib64) goes to the
# multiarch directory libc came from, /usr/lib/x86_64-linux-gnu on x86-64.
multiarch=/usr/lib/$(basename "$(dirname "$(grep '/libc\.so\.6$' "$root/.libs")")")
while read -r lib; do
  case $lib in
    /lib/* | /usr/lib/* | /lib64/*) dest=$lib ;;
    *) dest=$multiarch/$(basename "$lib") ;;
  esac
  mkdir -p "$root$(dirname "$dest")"
  cp -L "$lib" "$root$dest"
done < "$root/.libs"
rm "$root/.libs"
# The loader is also reached through /lib64 on x86-64.
if [ -e "$root/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" ] && [ ! -e "$root/lib64/ld-linux-x86-64.so.2" ]; then
  mkdir -p "$root/lib64"
  ln -s /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$root/lib64/ld-linux-x86-64.so.2"
fi
cp -r "$build/models/half_plus_two" "$root/models/"
printf 'root:x:0:0:root:/:/sbin/nologin\ntfserve:x:10001:10001:tfserve:/tmp:/sbin/nologin\n' > "$root/etc/passwd"
printf 'root:x:0:\ntfserve:x:10001:\n' > "$root/etc/group"
