#!/usr/bin/env bash
# House rules that a grep can enforce (the style guide's naming and size rules; the dependencies of docs/architecture.md):
#  - an `-impl.h` header is included only from its own folder (and from tests/);
#  - includes follow the dependency direction: runtime <- savedmodel <- loader <- server,
#    runtime <- batching <- loader (batching/ knows nothing of savedmodel, protobuf or HTTP);
#    runtime/ touches no protobuf, JSON, HTTP or gRPC; only savedmodel/ and server/ use proto code;
#    train/ includes only train/, runtime/ and savedmodel/ headers and no JSON, HTTP, gRPC or
#    protobuf library (it reaches the formats through savedmodel/); zlib only in train/gzip.c;
#  - no source file over 1,500 lines.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
bad() { echo "check-layout: $*"; fail=1; }

for f in $(git ls-files 'runtime/*.[ch]' 'savedmodel/*.[ch]' 'loader/*.[ch]' 'server/*.[ch]' 'batching/*.[ch]' 'train/*.[ch]'); do
  dir=${f%%/*}
  while IFS= read -r inc; do
    case "$inc" in
      */*-impl.h) [ "${inc%%/*}" = "$dir" ] || bad "$f includes $inc (internal to ${inc%%/*}/)";;
    esac
    target=${inc%%/*}
    case "$dir:$target" in
      runtime:savedmodel|runtime:loader|runtime:server|runtime:tensorflow|runtime:google) bad "$f: runtime/ must not include $inc";;
      savedmodel:loader|savedmodel:server) bad "$f: savedmodel/ must not include $inc";;
      loader:server|loader:tensorflow|loader:tensorflow_serving) bad "$f: loader/ must not include $inc";;
      batching:savedmodel|batching:loader|batching:server|batching:proto|batching:tensorflow|batching:google) bad "$f: batching/ must not include $inc";;
      train:train|train:runtime|train:savedmodel) ;;
      train:*) bad "$f: train/ may include only train/, runtime/ and savedmodel/ headers, not $inc";;
    esac
  done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
  if [ "$dir" = runtime ] && grep -qE '^#include <(jansson|microhttpd|grpc/|protobuf-c/)' "$f"; then
    bad "$f: runtime/ must not use JSON, HTTP, gRPC or protobuf libraries"
  fi
  if [ "$dir" = train ] && grep -qE '^#include <(jansson|microhttpd|grpc|protobuf-c/)' "$f"; then
    bad "$f: train/ must not use JSON, HTTP, gRPC or protobuf libraries"
  fi
  if [ "$dir" = train ] && [ "$f" != train/gzip.c ] && grep -qE '^#include <zlib' "$f"; then
    bad "$f: zlib is used only in train/gzip.c (tfs_gunzip, tfs_data_file_read)"
  fi
  n=$(wc -l < "$f")
  [ "$n" -le 1500 ] || bad "$f has $n lines (cap 1,500)"
done
[ $fail -eq 0 ] && echo "check-layout: OK"
exit $fail
