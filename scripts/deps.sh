#!/bin/sh
# Installs what a make target needs on Debian, then fetches libev and cJSON
# from Debian source packages at pinned versions and builds them with
# musl-gcc into build/deps (once per version).
#
#   scripts/deps.sh            build toolchain + test tools + libraries
#   scripts/deps.sh --build    the build toolchain + libraries (make, make all)
#   scripts/deps.sh --test     also the test tools (make test), the kernel and
#                              E2B's SDK from npm (build/node)
#   scripts/deps.sh --image    also the image tools (make image, make run) and the kernel
#   scripts/deps.sh --bench    also the benchmark peers (make bench) and the kernel
#   scripts/deps.sh --soak     also what make soak runs (namespaces, QEMU) and the kernel
#   scripts/deps.sh --oci      also the OCI image tools (make oci): umoci, busybox-static
#   scripts/deps.sh --libs     only build the libraries (tools already there)
#   scripts/deps.sh --kernel   also the guest kernel and its modules for the
#                              image (Debian's linux-image package, cached)
#
# Each package set is checked once: when it is installed, a stamp
# build/deps/.pkgs-SET holding the list is written, and a later run with the
# same list skips the check. As non-root with packages missing it stops with
# one line naming the command to run as root.
set -eu

LIBEV_VERSION=4.33
CJSON_VERSION=1.7.15
# E2B's SDK from npm, which tests/integration/test_envd.py drives hearth's
# envd endpoint with (installed into build/node, never committed).
E2B_VERSION=2.51.0

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEPS=${HEARTH_DEPS:-$ROOT/build/deps}

# dpkg-dev: apt-get source unpacks with dpkg-source; file: make check-static.
BUILD_PKGS="build-essential musl-tools make file dpkg-dev"
TEST_PKGS="python3-pytest iproute2 nftables util-linux procps kmod cpio e2fsprogs \
qemu-system-x86 libclang-rt-14-dev clang valgrind python3-prometheus-client \
podman runc umoci busybox-static"
IMAGE_PKGS="kmod cpio e2fsprogs qemu-system-x86"
# make oci: umoci writes the image; busybox-static is the image's shell.
OCI_PKGS="umoci busybox-static"
# make soak: hearth in fresh namespaces (unshare, ip, nft for the egress
# policy), and the VM image and QEMU (tests/vm's fixtures, which import
# pytest).
SOAK_PKGS="python3-pytest util-linux iproute2 nftables procps kmod cpio e2fsprogs qemu-system-x86"
BENCH_PKGS="qemu-guest-agent tini dumb-init s6 nftables bubblewrap python3-pytest iproute2 util-linux procps \
podman runc umoci busybox-static \
kmod cpio e2fsprogs qemu-system-x86"

want_build=1
want_test=0
want_image=0
want_bench=0
want_soak=0
want_oci=0
want_kernel=0
libs_only=0
[ $# -eq 0 ] && want_test=1
for a in "$@"; do
    case "$a" in
        --build) ;;
        --test) want_test=1; want_kernel=1 ;;
        --image) want_image=1; want_kernel=1 ;;
        --bench) want_bench=1; want_kernel=1 ;;
        --soak) want_soak=1; want_kernel=1 ;;
        --oci) want_oci=1 ;;
        --libs) libs_only=1 ;;
        --kernel) want_kernel=1 ;;
        *) echo "deps.sh: unknown option $a" >&2; exit 2 ;;
    esac
done
ARGS="$*"

log() { printf 'deps: %s\n' "$*"; }

missing_pkgs() {
    out=""
    for p in "$@"; do
        st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
        case "$st" in *"install ok installed"*) ;; *) out="$out $p" ;; esac
    done
    echo "$out"
}

apt_updated=0
apt_update() {
    [ "$apt_updated" = 1 ] && return 0
    apt-get update -qq
    apt_updated=1
}

ensure_deb_src() {
    if grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ 2>/dev/null ||
       grep -qs '^deb-src' /etc/apt/sources.list 2>/dev/null; then
        return 0
    fi
    src=/etc/apt/sources.list.d/debian.sources
    if [ -f "$src" ]; then
        log "adding a deb-src entry"
        sed 's/^Types: deb$/Types: deb-src/' "$src" > /etc/apt/sources.list.d/hearth-src.sources
    elif grep -qs '^deb ' /etc/apt/sources.list; then
        log "adding deb-src lines"
        sed -n 's/^deb /deb-src /p' /etc/apt/sources.list > /etc/apt/sources.list.d/hearth-src.list
    else
        echo "deps: no Debian package source found: add a deb-src line for apt-get source" >&2
        return 1
    fi
    apt_updated=0
}

install_pkgs() { # set packages...
    set_name=$1; shift
    stamp="$DEPS/.pkgs-$set_name"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$*" ]; then touch "$stamp"; return 0; fi
    miss=$(missing_pkgs "$@")
    if [ -n "$miss" ]; then
        if [ "$(id -u)" != 0 ]; then
            echo "deps: missing packages ($(echo $miss)); as root, run: scripts/deps.sh${ARGS:+ $ARGS}" >&2
            exit 1
        fi
        log "installing for $set_name:$miss"
        apt_update
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $miss >/dev/null
    fi
    mkdir -p "$DEPS"
    printf "%s\n" "$*" > "$stamp"
}

fetch_source() { # name version orig-tarball
    name=$1 ver=$2 tarball=$3
    dl="$DEPS/src"
    mkdir -p "$dl"
    if [ -f "$dl/$tarball" ]; then return 0; fi
    if [ "$(id -u)" = 0 ]; then ensure_deb_src; fi
    apt_update
    log "fetching $name $ver source"
    (cd "$dl" && apt-get source -qq --download-only "$name=$ver"* >/dev/null 2>&1) ||
        (cd "$dl" && apt-get source -qq --download-only "$name" >/dev/null)
    if [ ! -f "$dl/$tarball" ]; then
        echo "deps: $tarball not found after apt-get source $name" >&2
        exit 1
    fi
}

# libev's features, one line shared with the Makefile and the fuzz build
# (ev.h must be read with the same switches the library was built with).
# Only what hearth uses is compiled in: io, timer and prepare watchers on
# the epoll backend. Periodic watchers are out, so libev never wakes up to
# look for wall-clock jumps; child and signal watchers are out because
# hearth reaps children itself through a signalfd; the select and poll
# backends, inotify, eventfd, async, fork, idle, check, cleanup and embed
# are out because nothing here needs them and each costs binary size.
LIBEV_DEFS=$(cat "$ROOT/scripts/libev-features")
# How the libraries are compiled; part of the stamps, so a change rebuilds.
# No unwind tables, as for hearth's own code: nothing unwinds through C
# here, and the tables were 3 KiB of the static binary.
DEP_CFLAGS="-Os -ffunction-sections -fdata-sections -fno-asynchronous-unwind-tables"
# The release build leaves libev's asserts out (NDEBUG): each guards
# against a misuse of its API (a negative fd, a watcher started twice),
# and in PID 1 the abort that follows one ends the VM (the kernel panics
# when init dies); their texts were 2 KiB of the binary. The glibc build
# below, which the unit tests and the debug build link, keeps them, so a
# misuse still fails a test.
LIBEV_RECIPE="$DEP_CFLAGS -fno-strict-aliasing -DNDEBUG $LIBEV_DEFS"
CJSON_RECIPE="$DEP_CFLAGS"

# A stamp holds the recipe it was built with; a matching one means the
# library is current. The stamp is touched either way so make, which
# compares it with this script, does not ask again.
stamp_current() {
    if [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; then
        touch "$1"
        return 0
    fi
    return 1
}

build_libev() {
    stamp="$DEPS/.libev-$LIBEV_VERSION"
    stamp_current "$stamp" "$LIBEV_RECIPE" && return 0
    fetch_source libev "1:$LIBEV_VERSION" "libev_$LIBEV_VERSION.orig.tar.gz"
    b="$DEPS/build-libev"
    rm -rf "$b"; mkdir -p "$b"
    tar -xzf "$DEPS/src/libev_$LIBEV_VERSION.orig.tar.gz" -C "$b" --strip-components=1
    log "building libev $LIBEV_VERSION with musl-gcc"
    (cd "$b" && CC=musl-gcc CFLAGS="$LIBEV_RECIPE" ./configure -q \
        --disable-shared --enable-static --prefix="$DEPS" >/dev/null &&
        make -s >/dev/null 2>&1 && make -s install >/dev/null)
    # A glibc-compiled copy for the sanitizer unit build.
    g="$DEPS/build-libev-glibc"
    rm -rf "$g"; mkdir -p "$g"
    tar -xzf "$DEPS/src/libev_$LIBEV_VERSION.orig.tar.gz" -C "$g" --strip-components=1
    (cd "$g" && CFLAGS="-O1 -g -fno-strict-aliasing $LIBEV_DEFS" ./configure -q --disable-shared \
        --enable-static --prefix="$DEPS/glibc" >/dev/null &&
        make -s >/dev/null 2>&1 && make -s install >/dev/null)
    printf "%s\n" "$LIBEV_RECIPE" > "$stamp"
}

build_cjson() {
    stamp="$DEPS/.cjson-$CJSON_VERSION"
    stamp_current "$stamp" "$CJSON_RECIPE" && return 0
    fetch_source cjson "$CJSON_VERSION" "cjson_$CJSON_VERSION.orig.tar.gz"
    b="$DEPS/build-cjson"
    rm -rf "$b"; mkdir -p "$b"
    # Unpack the .dsc so Debian's security patches are applied on top of
    # the upstream tarball.
    dsc=$(ls "$DEPS"/src/cjson_"$CJSON_VERSION"-*.dsc | head -n1)
    rmdir "$b"
    dpkg-source --no-check -x "$dsc" "$b" >/dev/null
    log "building cJSON $CJSON_VERSION with musl-gcc"
    mkdir -p "$DEPS/include" "$DEPS/lib" "$DEPS/glibc/include" "$DEPS/glibc/lib" "$DEPS/cjson-src"
    musl-gcc $CJSON_RECIPE -c "$b/cJSON.c" -o "$b/cJSON.o"
    ar rcs "$DEPS/lib/libcjson.a" "$b/cJSON.o"
    cp "$b/cJSON.h" "$DEPS/include/"
    gcc -O1 -g -c "$b/cJSON.c" -o "$b/cJSON-glibc.o"
    ar rcs "$DEPS/glibc/lib/libcjson.a" "$b/cJSON-glibc.o"
    cp "$b/cJSON.h" "$DEPS/glibc/include/"
    # Source kept for the fuzz build (clang + sanitizers compile it in).
    cp "$b/cJSON.c" "$b/cJSON.h" "$DEPS/cjson-src/"
    printf "%s\n" "$CJSON_RECIPE" > "$stamp"
}

# musl-gcc does not search /usr/include; kernel uapi headers are exposed
# through a directory of three links so glibc's headers never shadow musl's.
kernel_headers() {
    k="$DEPS/kinclude"
    mkdir -p "$k"
    ln -sfn /usr/include/linux "$k/linux"
    ln -sfn /usr/include/x86_64-linux-gnu/asm "$k/asm"
    ln -sfn /usr/include/asm-generic "$k/asm-generic"
}

# The e2b npm package at its pinned version in build/node; Node.js and
# npm from Debian when the machine has none.
install_e2b_sdk() {
    dir="$ROOT/build/node"
    stamp="$dir/.e2b-$E2B_VERSION"
    [ -f "$stamp" ] && [ -f "$dir/node_modules/e2b/package.json" ] && return 0
    if ! command -v npm >/dev/null 2>&1; then
        if [ "$(id -u)" != 0 ]; then
            echo "deps: npm is missing; as root, run: scripts/deps.sh${ARGS:+ $ARGS}" >&2
            exit 1
        fi
        apt_update
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
    fi
    mkdir -p "$dir"
    printf '{"private": true}\n' > "$dir/package.json"
    log "installing the e2b SDK $E2B_VERSION from npm"
    (cd "$dir" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error \
        "e2b@$E2B_VERSION" >/dev/null)
    touch "$stamp"
}

# The guest kernel: the package linux-image-amd64 currently depends on
# (HEARTH_KERNEL_PKG overrides it), unpacked into build/kernel/VERSION with
# a modules.dep written by depmod. The .deb is kept, so this runs once.
fetch_kernel() {
    kdir=$ROOT/build/kernel
    mkdir -p "$kdir"
    pkg=${HEARTH_KERNEL_PKG:-}
    if [ -z "$pkg" ] && [ -f "$kdir/package" ]; then
        pkg=$(cat "$kdir/package")
    fi
    if [ -z "$pkg" ]; then
        apt_update
        pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
              sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -n1)
        [ -n "$pkg" ] || { echo "deps: no linux-image package found for amd64" >&2; exit 1; }
    fi
    ver=${pkg#linux-image-}
    if [ -f "$kdir/$ver/vmlinuz" ] && [ -f "$kdir/$ver/lib/modules/$ver/modules.dep" ]; then
        echo "$pkg" > "$kdir/package"
        return 0
    fi
    if ! ls "$kdir"/"$pkg"_*.deb >/dev/null 2>&1; then
        log "fetching $pkg"
        (cd "$kdir" && apt-get download -qq "$pkg" >/dev/null 2>&1) ||
            { apt_update; (cd "$kdir" && apt-get download -qq "$pkg" >/dev/null); }
    fi
    deb=$(ls "$kdir"/"$pkg"_*.deb | head -n1)
    rm -rf "$kdir/$ver.tmp"
    mkdir -p "$kdir/$ver.tmp"
    dpkg-deb -x "$deb" "$kdir/$ver.tmp"
    cp "$kdir/$ver.tmp/boot/vmlinuz-$ver" "$kdir/$ver.tmp/vmlinuz"
    depmod -b "$kdir/$ver.tmp" "$ver"
    rm -rf "$kdir/$ver"
    mv "$kdir/$ver.tmp" "$kdir/$ver"
    echo "$pkg" > "$kdir/package"
    log "ok: kernel $ver in $kdir/$ver"
}

if [ "$libs_only" = 0 ]; then
    install_pkgs build $BUILD_PKGS
    [ "$want_test" = 1 ] && install_pkgs test $TEST_PKGS
    [ "$want_image" = 1 ] && install_pkgs image $IMAGE_PKGS
    [ "$want_bench" = 1 ] && install_pkgs bench $BENCH_PKGS
    [ "$want_soak" = 1 ] && install_pkgs soak $SOAK_PKGS
    [ "$want_oci" = 1 ] && install_pkgs oci $OCI_PKGS
fi
mkdir -p "$DEPS"
build_libev
build_cjson
kernel_headers
[ "$want_kernel" = 1 ] && fetch_kernel
[ "$want_test" = 1 ] && [ "$libs_only" = 0 ] && install_e2b_sdk
exit 0
