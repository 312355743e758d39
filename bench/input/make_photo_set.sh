#!/usr/bin/env bash
# Makes the photo input benchmark's data set (bench/input/make_photo_set.py): 640
# real photographs at ImageNet-like sizes (500x375, 500x333, portraits, ...;
# JPEG quality 90, 4:2:0), cropped from the photographs of Debian's
# desktop-background packages mate-backgrounds and plasma-workspace-wallpapers,
# as files (OUT/files/<class>/*.jpg) and as TF-Slim TFRecords
# (OUT/tfrecord/photos-NNNNN-of-00004.tfrecord).
#
#   bench/input/make_photo_set.sh [OUT]      # OUT default: build/bench_data/photos
#
# Environment: PHOTO_COUNT (640), PHOTO_DEB_DIR (where the .deb files are kept
# between runs; default OUT/../photo_debs; put the two .deb files there by hand
# on a machine without Debian's archive), TF_PYTHON (/opt/tfenv/bin/python).
# Idempotent: a complete OUT (it has README) is left as it is; the set is
# written to OUT.tmp and renamed, so OUT is never half-written. Deterministic:
# the same packages give the same bytes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
OUT=${1:-$root/build/bench_data/photos}
COUNT=${PHOTO_COUNT:-640}
TF_PYTHON=${TF_PYTHON:-/opt/tfenv/bin/python}
PACKAGES=(mate-backgrounds plasma-workspace-wallpapers)

if [[ -f "$OUT/README" ]]; then
  echo "make_photo_set: $OUT is complete; nothing to do"
  exit 0
fi
DEBS=${PHOTO_DEB_DIR:-$(dirname "$OUT")/photo_debs}
mkdir -p "$DEBS"
for pkg in "${PACKAGES[@]}"; do
  if ! compgen -G "$DEBS/${pkg}_*.deb" >/dev/null; then
    (cd "$DEBS" && apt-get download "$pkg") ||
      { echo "make_photo_set: cannot download $pkg; put its .deb in $DEBS" >&2; exit 1; }
  fi
done

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
note=""
for pkg in "${PACKAGES[@]}"; do
  deb=$(ls "$DEBS/${pkg}"_*.deb | sort | tail -n 1)
  mkdir -p "$TMP/$pkg"
  dpkg-deb -x "$deb" "$TMP/$pkg"
  note+="$pkg=$(dpkg-deb -f "$deb" Version) "
done
rm -rf "$OUT.tmp"
"$TF_PYTHON" "$here/make_photo_set.py" --source_root="$TMP" \
  --sources_note="${note% }" --out="$OUT" --count="$COUNT"
