#!/bin/sh
# Builds a bootable sandbox image around build/hearth:
#   OUT/initramfs.cpio.gz   /sbin/hearth as PID 1 (/init links to it), the
#                           configs, the home template, the stand-in agent
#                           and the kernel modules the configs list
#   OUT/rootfs.ext4         the same tree as an ext4 root filesystem
#   OUT/vmlinuz             the kernel it was built for
#
#   rootfs/build-image.sh [--config FILE] [--extra FILE]... [--file SRC DEST]...
#                         [--out DIR] [--no-ext4]
#
# Defaults: --config rootfs/qemu/hearth.json, --extra rootfs/qemu/disk.json,
# --out build/image/qemu. The main config becomes /etc/hearth/hearth.json;
# each extra one /etc/hearth/NAME.json (chosen with hearth.config= on the
# kernel command line). Each --file installs SRC at DEST (an absolute path)
# with mode 0755: the VM tests add their programs this way.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
config=$ROOT/rootfs/qemu/hearth.json
extras=""
files=""
extras_default=1
out=$BUILD/image/qemu
ext4=1
while [ $# -gt 0 ]; do
    case "$1" in
        --config) config=$2; shift 2 ;;
        --extra) [ "$extras_default" = 1 ] && extras="" && extras_default=0
                 extras="$extras $2"; shift 2 ;;
        --file) case "$3" in /*) ;; *) echo "build-image: --file DEST must be absolute" >&2; exit 2 ;; esac
                [ -f "$2" ] || { echo "build-image: --file $2 missing" >&2; exit 1; }
                files="$files $(cd "$(dirname "$2")" && pwd)/$(basename "$2"):$3"; shift 3 ;;
        --out) out=$2; shift 2 ;;
        --no-ext4) ext4=0; shift ;;
        *) echo "build-image: unknown option $1" >&2; exit 2 ;;
    esac
done
[ "$extras_default" = 1 ] && [ "$config" = "$ROOT/rootfs/qemu/hearth.json" ] &&
    extras=$ROOT/rootfs/qemu/disk.json

log() { printf 'image: %s\n' "$*"; }

[ -x "$BUILD/hearth" ] || { echo "build-image: build/hearth missing: run make" >&2; exit 1; }
"$ROOT/scripts/deps.sh" --libs --kernel >/dev/null
kver=${HEARTH_KERNEL_PKG:-$(cat "$BUILD/kernel/package")}
kver=${kver#linux-image-}
ktree=$BUILD/kernel/$kver
[ -f "$ktree/vmlinuz" ] || { echo "build-image: no kernel in $ktree" >&2; exit 1; }

for c in "$config" $extras; do
    "$BUILD/hearth" --check-config "$c" >/dev/null || exit 1
done

stage=$out/root
rm -rf "$stage"
mkdir -p "$stage"
cd "$stage"
. "$ROOT/rootfs/stage-hermes.sh"
stage_hermes "$config"
mkdir -p lib/modules
ln -s sbin/hearth init
for c in $extras; do install -m 0644 "$c" "etc/hearth/$(basename "$c")"; done
for f in $files; do install -D -m 0755 "${f%%:*}" ".${f#*:}"; done

# Kernel modules: everything each config lists, with its dependencies as
# the kernel's own modules.dep states them; depmod then writes a
# modules.dep for just these.
mods=$(/usr/bin/python3 -c '
import json, sys
seen = []
for f in sys.argv[1:]:
    for m in json.load(open(f)).get("modules", []):
        if m not in seen:
            seen.append(m)
print(" ".join(seen))' "$config" $extras)
kmods=$ktree/lib/modules/$kver
dst=lib/modules/$kver
mkdir -p "$dst"
for f in modules.builtin modules.builtin.modinfo modules.order; do
    [ -f "$kmods/$f" ] && cp "$kmods/$f" "$dst/"
done
n=0
for m in $mods; do
    mm=$(echo "$m" | tr - _)
    line=$(awk -v m="$mm" -F: '{ n = $1; sub(/.*\//, "", n); sub(/\.ko.*/, "", n); gsub(/-/, "_", n);
                                 if (n == m) { print; exit } }' "$kmods/modules.dep")
    if [ -z "$line" ]; then
        if awk -v m="$mm" '{ n = $0; sub(/.*\//, "", n); sub(/\.ko.*/, "", n); gsub(/-/, "_", n);
                             if (n == m) f = 1 } END { exit !f }' "$kmods/modules.builtin"; then
            continue
        fi
        echo "build-image: module $m is not in kernel $kver" >&2
        exit 1
    fi
    for rel in $(echo "$line" | tr -d ':'); do
        if [ ! -f "$dst/$rel" ]; then
            mkdir -p "$dst/$(dirname "$rel")"
            cp "$kmods/$rel" "$dst/$rel"
            n=$((n + 1))
        fi
    done
done
depmod -b "$stage" "$kver"
log "$n module files for: $mods"

# The console must exist before PID 1 runs: the kernel opens it for
# hearth's stdin, stdout and stderr.
if [ "$(id -u)" = 0 ]; then
    mknod -m 0600 dev/console c 5 1
    mknod -m 0666 dev/null c 1 3
fi

mkdir -p "$out"
find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0 | gzip -6 > "$out/initramfs.cpio.gz.tmp"
mv "$out/initramfs.cpio.gz.tmp" "$out/initramfs.cpio.gz"
cp "$ktree/vmlinuz" "$out/vmlinuz.tmp" && mv "$out/vmlinuz.tmp" "$out/vmlinuz"
echo "$kver" > "$out/kernel-version"
log "$out/initramfs.cpio.gz ($(stat -c %s "$out/initramfs.cpio.gz") bytes)"

if [ "$ext4" = 1 ]; then
    kb=$(du -sk . | cut -f1)
    size=$(( (kb + 16384) / 1024 ))M
    rm -f "$out/rootfs.ext4"
    mkfs.ext4 -q -F -L hearth-root -d "$stage" "$out/rootfs.ext4" "$size" >/dev/null
    log "$out/rootfs.ext4 ($size)"
fi
