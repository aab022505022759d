#!/bin/sh
# extract_media.sh: fetch the third-party media of data/make_clips.py from Debian packages and
# unpack them into data/media/ (git-ignored: third-party media is never committed).
#
#   data/extract_media.sh [DIR]        default DIR: data/media (next to this script)
#
# Packages (../shared/reference/data.md): python3-imageio (cockatoo.mp4, realshort.mp4),
# opencv-doc (vtest.avi, tree.avi, stills), mate-backgrounds (nature photos). `apt-get download`
# needs no root; the .debs are kept in DIR/debs so a rerun does not download again.
# Megamind.avi (a commercial film clip in opencv-doc) is deleted after extraction: never used.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-$here/media}
mkdir -p "$dir/debs" "$dir/root"
cd "$dir/debs"
for p in python3-imageio opencv-doc mate-backgrounds; do
	ls ${p}_*.deb >/dev/null 2>&1 || apt-get download "$p"
done
for d in *.deb; do
	dpkg -x "$d" "$dir/root"
done
find "$dir/root" -name 'Megamind*' -exec rm -f {} +
# flat copies with stable names for make_clips.py: DIR/clips and DIR/photos (about 20 MB) are
# what the GPU session carries (data/README.md); DIR/root and DIR/debs stay here
rm -rf "$dir/clips" "$dir/photos"
mkdir -p "$dir/clips" "$dir/photos"
img=$(find "$dir/root" -type d -path '*imageio/resources/images' | head -1)
cv=$(find "$dir/root" -type d -path '*opencv-doc/examples/data' | head -1)
for f in "$img/cockatoo.mp4" "$img/realshort.mp4" "$cv/vtest.avi" "$cv/tree.avi"; do
	[ -f "$f" ] && cp "$f" "$dir/clips/$(basename "$f")"
done
# mate-backgrounds: the photos only (nature/), not the abstract and desktop art
for f in $(find "$dir/root/usr/share/backgrounds" -type f -path '*/nature/*' -name '*.jpg' | sort); do
	cp "$f" "$dir/photos/mate-$(basename "$f")"
done
for f in starry_night.jpg building.jpg fruits.jpg baboon.jpg graf1.png aloeL.jpg \
	 orange.jpg messi5.jpg home.jpg leuvenA.jpg; do
	[ -f "$cv/$f" ] && cp "$cv/$f" "$dir/photos/opencv-$f"
done
echo "clips (DIR/clips):"
for f in "$dir"/clips/*; do printf '  %s %s bytes\n' "$(basename "$f")" "$(stat -Lc %s "$f")"; done
echo "photos:"
for f in "$dir"/photos/*; do printf '  %s %s bytes\n' "$(basename "$f")" "$(stat -Lc %s "$f")"; done
du -sh "$dir/clips" "$dir/photos"
