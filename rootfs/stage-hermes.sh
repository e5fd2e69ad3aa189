# Sourced by rootfs/build-image.sh and rootfs/build-oci.sh: the part of a
# Hermes sandbox's tree both images carry, laid out in the current
# directory. Needs ROOT (the source tree) and BUILD (build/ with hearth).
#
#   stage_hermes CONFIG   /sbin/hearth, the stand-in agent as hermes and
#                         hermes-web-ui, CONFIG as /etc/hearth/hearth.json,
#                         passwd and group (root, hermes, nobody), /root
#                         mode 0711, the home template and the
#                         sample public skills in /usr/share/hearth

# The agent's uid and gid (fixed: a home on a host share keeps its
# numeric owner across image rebuilds).
HERMES_UID=10000

# The stand-in agent, static like hearth.
build_standin() {
    mkdir -p "$BUILD/standin"
    musl-gcc -static -Os -s -std=gnu11 -Wall -Wextra -Werror -Wno-format-truncation \
        -o "$BUILD/standin/hermes" "$ROOT/rootfs/standin/hermes.c"
}

stage_hermes() {
    build_standin
    mkdir -p sbin bin usr/bin usr/share/hearth etc/hearth proc sys dev run tmp \
        root workspace data opt/hermes-common-skills var/lib/hearth mnt
    chmod 1777 tmp
    install -m 0755 "$BUILD/hearth" sbin/hearth
    install -m 0755 "$BUILD/standin/hermes" usr/bin/hermes
    # One program, two names: it is hermes-web-ui when called so.
    ln -sf hermes usr/bin/hermes-web-ui
    install -m 0644 "$1" etc/hearth/hearth.json
    # The agent's own user and group (docs/image.md): Hermes runs as
    # hermes, uid and gid HERMES_UID, its home the path the platform mounts.
    printf 'root:x:0:0:root:/root:/sbin/nologin\nhermes:x:%s:%s:Hermes Agent:/root/.hermes:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' \
        "$HERMES_UID" "$HERMES_UID" > etc/passwd
    printf 'root:x:0:\nhermes:x:%s:\nnogroup:x:65534:\n' "$HERMES_UID" > etc/group
    # /root/.hermes stays where the platform mounts the home: hermes may
    # pass through /root but not list it.
    chmod 0711 root
    : > etc/resolv.conf

    # The home template: the files in rootfs/hermes/home and the layout
    # Hermes keeps in HERMES_HOME (home/ is the HOME of its tool subprocesses
    # and of hermes-web-ui, whose state is home/.hermes-web-ui). No .env: its
    # secrets are the operator's.
    tpl=usr/share/hearth/hermes-home
    mkdir -p "$tpl"
    cp -a "$ROOT/rootfs/hermes/home/." "$tpl/"
    mkdir -p "$tpl/memories" "$tpl/skills" "$tpl/sessions" "$tpl/logs" "$tpl/home" "$tpl/cron" \
        "$tpl/hooks"
    mkdir -p usr/share/hearth/skills
    cp -a "$ROOT/rootfs/skills/." usr/share/hearth/skills/
}
