#!/bin/sh
# Builds the Hermes sandbox as an OCI image with umoci (no daemon, no
# registry): hearth as the entrypoint (container mode), hearthctl, the
# container config rootfs/oci/hearth.json, the home template, the sample
# public skills, the stand-in agent and busybox (a shell and tools for
# `podman exec` and for test services).
#
#   rootfs/build-oci.sh [--config FILE] [--out DIR]
#
# Output (default --out build/oci):
#   DIR/hearth-hermes.tar   an oci-archive (a tar of the OCI layout):
#                           podman load -i, skopeo copy oci-archive:...
#   DIR/layout              the OCI image layout it was made from
# The layout holds one image, named hearth-hermes:VERSION (podman load
# names it localhost/hearth-hermes:VERSION).
# OCI_SOURCE sets the org.opencontainers.image.source label (default: the
# git remote "origin", when there is one).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
config=$ROOT/rootfs/oci/hearth.json
out=$BUILD/oci
while [ $# -gt 0 ]; do
    case "$1" in
        --config) config=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "build-oci: unknown option $1" >&2; exit 2 ;;
    esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
name=hearth-hermes
version=$(cat "$ROOT/VERSION")
# The tag is the whole reference: podman load takes the ref.name
# annotation as the image name, and refuses a layout with two of them.
ref=$name:$version

log() { printf 'oci: %s\n' "$*"; }

for b in hearth hearthctl; do
    [ -x "$BUILD/$b" ] || { echo "build-oci: build/$b missing: run make" >&2; exit 1; }
done
command -v umoci >/dev/null || { echo "build-oci: umoci missing: scripts/deps.sh --oci" >&2; exit 1; }
bb=$(command -v busybox || true)
[ -n "$bb" ] && file -b "$bb" | grep -Eq 'statically linked|static-pie linked' ||
    { echo "build-oci: a static busybox is missing: scripts/deps.sh --oci (busybox-static)" >&2; exit 1; }
"$BUILD/hearth" --check-config "$config" >/dev/null

source=${OCI_SOURCE:-$(git -C "$ROOT" config --get remote.origin.url 2>/dev/null || true)}
revision=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)

# The tree: what the VM image carries (rootfs/stage-hermes.sh) minus the
# kernel's part, plus hearthctl and busybox. The sample skills are also
# the public skills, so the image runs without a volume there.
stage=$out/root
rm -rf "$stage"
mkdir -p "$stage"
cd "$stage"
. "$ROOT/rootfs/stage-hermes.sh"
stage_hermes "$config"
install -m 0755 "$BUILD/hearthctl" usr/bin/hearthctl
cp -a "$ROOT/rootfs/skills/." opt/hermes-common-skills/
install -m 0755 "$bb" bin/busybox
for a in $(bin/busybox --list); do
    [ -e "bin/$a" ] || [ -e "usr/bin/$a" ] || ln -s busybox "bin/$a"
done
# E2B's SDK runs every command as `/bin/bash -l -c CMD` (docs/envd.md).
# busybox has no bash applet (a link named bash is "applet not found"):
# here bash is its ash under that name.
printf '#!/bin/sh\n# busybox ash, for callers that ask for bash by path\nexec /bin/sh "$@"\n' > bin/bash
chmod 0755 bin/bash
# No hearth mounts in a container: the home and the workspace are the
# image's own directories, the agent's (the services list them in
# writable). As root they are chowned; a rootless umoci records owners
# from the user.rootlesscontainers xattr (a protobuf: 1: uid, 2: gid).
mkdir -p root/.hermes
if [ "$(id -u)" = 0 ]; then
    chown "$HERMES_UID:$HERMES_UID" root/.hermes workspace
else
    /usr/bin/python3 -c '
import os, sys
def varint(n):
    out = b""
    while True:
        b, n = n & 0x7f, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out
uid = int(sys.argv[1])
v = b"\x08" + varint(uid) + b"\x10" + varint(uid)
for p in sys.argv[2:]:
    os.setxattr(p, "user.rootlesscontainers", v)' "$HERMES_UID" root/.hermes workspace
fi

# umoci builds the layout: an empty image, its bundle, the tree copied in,
# one layer repacked, then the configuration. As non-root the bundle is
# unpacked rootless (files recorded as owned by root all the same).
layout=$out/layout
bundle=$out/bundle
rm -rf "$layout" "$bundle"
rootless=""
[ "$(id -u)" = 0 ] || rootless=--rootless
umoci init --layout "$layout"
umoci new --image "$layout:$ref"
umoci unpack $rootless --image "$layout:$ref" "$bundle" >/dev/null
cp -a "$stage/." "$bundle/rootfs/"
umoci repack --image "$layout:$ref" --history.created_by "rootfs/build-oci.sh" "$bundle"
umoci config --image "$layout:$ref" --no-history \
    --config.entrypoint /sbin/hearth --config.entrypoint=--mode --config.entrypoint container \
    --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.workingdir / \
    --config.stopsignal SIGTERM \
    --config.label "org.opencontainers.image.title=$name" \
    --config.label "org.opencontainers.image.version=$version" \
    --config.label "org.opencontainers.image.source=${source:-unknown}" \
    --config.label "org.opencontainers.image.revision=$revision" \
    --config.label "org.opencontainers.image.description=hearth as PID 1 of a Hermes sandbox (container mode)"

umoci gc --layout "$layout"
rm -rf "$bundle"
# An oci-archive is the layout as one tar.
tmp=$out/$name.tar.tmp
tar -C "$layout" --sort=name --owner=0 --group=0 --numeric-owner -cf "$tmp" .
mv "$tmp" "$out/$name.tar"
log "$out/$name.tar ($(stat -c %s "$out/$name.tar") bytes, $ref)"
