# hearth build. Everything lands in build/; dependencies come from
# scripts/deps.sh (Debian source packages built with musl-gcc).

VERSION     := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
BUILD       := build
DEPS        := $(BUILD)/deps
PREFIX      ?= /usr
DESTDIR     ?=
STRICT      ?= 0

MUSLCC      ?= musl-gcc
CC_UNIT     ?= gcc
CLANG       ?= clang

WARN        := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -Wno-format-truncation
EV_DEFS     := $(shell cat scripts/libev-features)
CFLAGS_COMMON := $(EV_DEFS) -std=gnu11 $(WARN) -D_GNU_SOURCE -DHEARTH_VERSION='"$(VERSION)"' -Iinit -Iagent
# Static objects over 2 KiB (rings, tables, per-service arrays) go to
# .lbss/.ldata, after every small variable (x86-64's medium code model:
# only the accesses to those objects take 64-bit addresses). Interleaved
# with them, the few small variables an idle hearth writes each dirtied a
# page of their own; grouped, they share a handful.
ifneq ($(findstring x86_64,$(shell $(MUSLCC) -dumpmachine 2>/dev/null)),)
CFLAGS_LAYOUT := -mcmodel=medium -mlarge-data-threshold=2048
endif
# Link-time optimisation: inlining and dead-code removal across files,
# some 4 KiB of hearth. "auto" runs its link-time jobs in parallel (on
# make's job server when there is one) instead of one after another.
# -Oz (GCC 12) picks the shorter of two encodings where -Os picks the
# faster, another 4 KiB; a ping's CPU time and SHA-256's throughput
# measured the same under both.
CFLAGS      ?= -Oz -flto=auto -ffunction-sections -fdata-sections -fno-asynchronous-unwind-tables $(CFLAGS_LAYOUT)
# noseparate-code: no page-aligned padding between the read-only and code
# segments, which a static binary of this size would spend ~8 KiB on.
LDFLAGS_STATIC := -static -Wl,--gc-sections -Wl,-z,noseparate-code -s

# Which code runs where. Guest: hearth, PID 1 inside the sandbox, is
# init/ and the control server in agent/ (its top level). Host: hearthctl
# is agent/hearthctl/ and the few guest files it shares, named here (the
# protocol's framing and its byte buffer, the encoders, the digest). A file dropped into
# agent/hearthctl/ is built into hearthctl only.
# Host code at agent/'s top level would be linked into hearth: refuse it.
ifneq ($(wildcard agent/hearthctl*.c agent/hearthctl*.h),)
$(error $(wildcard agent/hearthctl*.c agent/hearthctl*.h): hearthctl's files belong in agent/hearthctl/ (see agent/hearthctl/ctl.h))
endif
INIT_SRCS   := $(sort $(wildcard init/*.c))
AGENT_SRCS  := $(sort $(wildcard agent/*.c))
GUEST_SRCS  := $(INIT_SRCS) $(AGENT_SRCS)
HOST_SRCS   := $(sort $(wildcard agent/hearthctl/*.c))
SHARED_SRCS := agent/rpc.c init/jsonout.c init/bytebuf.c init/utf8.c init/termsafe.c init/sha256.c init/base64.c init/timebase.c
CTL_SRCS    := $(HOST_SRCS) $(SHARED_SRCS)
LIB_SRCS    := $(filter-out init/main.c,$(INIT_SRCS)) $(AGENT_SRCS)
HDRS        := $(wildcard init/*.h agent/*.h)
CTL_HDRS    := $(wildcard agent/hearthctl/*.h) $(HDRS)

DEPS_STAMP  := $(DEPS)/.libev-4.33 $(DEPS)/.cjson-1.7.15
DEP_INC     := -isystem $(DEPS)/include -isystem $(DEPS)/kinclude
DEP_LIBS    := $(DEPS)/lib/libev.a $(DEPS)/lib/libcjson.a -lm

UNIT_SRCS   := $(sort $(wildcard tests/unit/*.c))
UNIT_FLAGS  := $(EV_DEFS) -std=gnu11 $(WARN) -D_GNU_SOURCE -DHEARTH_VERSION='"$(VERSION)"' -DHEARTH_UNIT=1 \
               -Iinit -Iagent -Itests/unit -isystem $(DEPS)/glibc/include \
               -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
UNIT_LIBS   := $(DEPS)/glibc/lib/libev.a $(DEPS)/glibc/lib/libcjson.a -lm

.PHONY: all deps test unit distclean integration vm valgrind runtime bench soak fuzz image oci run install clean check-static

all: $(BUILD)/hearth $(BUILD)/hearthctl

# A stamp older than the script or the feature list means the libraries
# may have been built another way; deps.sh rebuilds only what differs. The
# build toolchain is installed first where it is missing, so any target
# works as the first command on a fresh machine.
$(DEPS_STAMP): scripts/deps.sh scripts/libev-features
	scripts/deps.sh --build

# What each entry point needs beyond the toolchain (test tools, image
# tools, benchmark peers, the guest kernel), one stamp per package set;
# deps.sh checks a set once and says what it installs.
$(DEPS)/.pkgs-test $(DEPS)/.pkgs-image $(DEPS)/.pkgs-bench $(DEPS)/.pkgs-soak $(DEPS)/.pkgs-oci: $(DEPS)/.pkgs-%: scripts/deps.sh
	scripts/deps.sh --$*

$(BUILD)/hearth: $(GUEST_SRCS) $(HDRS) $(DEPS_STAMP) VERSION
	@mkdir -p $(BUILD)
	$(MUSLCC) $(CFLAGS_COMMON) $(CFLAGS) $(DEP_INC) -o $@ $(GUEST_SRCS) $(LDFLAGS_STATIC) $(DEP_LIBS)

# hearth with every cgroup limit write left out: tests/vm/test_limits.py
# boots it and expects the limit checks to fail (a mutation check).
$(BUILD)/hearth-mutant-nolimits: $(GUEST_SRCS) $(HDRS) $(DEPS_STAMP) VERSION
	@mkdir -p $(BUILD)
	$(MUSLCC) $(CFLAGS_COMMON) $(CFLAGS) -DHEARTH_MUTANT_NO_LIMITS $(DEP_INC) -o $@ $(GUEST_SRCS) $(LDFLAGS_STATIC) $(DEP_LIBS)

$(BUILD)/hearthctl: $(CTL_SRCS) $(CTL_HDRS) $(DEPS_STAMP) VERSION
	@mkdir -p $(BUILD)
	$(MUSLCC) $(CFLAGS_COMMON) $(CFLAGS) $(DEP_INC) -o $@ $(CTL_SRCS) $(LDFLAGS_STATIC) $(DEPS)/lib/libcjson.a -lm

# The same hearth linked dynamically against glibc, with debug info, for
# valgrind: memcheck replaces malloc through the dynamic loader, so in the
# static musl binary it would see no heap at all.
$(BUILD)/hearth-debug: $(GUEST_SRCS) $(HDRS) $(DEPS_STAMP) VERSION
	@mkdir -p $(BUILD)
	$(CC_UNIT) $(CFLAGS_COMMON) -DJSONALLOC_KEEP=0 -g -O1 -fno-omit-frame-pointer -isystem $(DEPS)/glibc/include \
		-o $@ $(GUEST_SRCS) $(UNIT_LIBS)

$(BUILD)/unit: $(UNIT_SRCS) $(LIB_SRCS) $(HDRS) $(DEPS_STAMP) $(wildcard tests/unit/*.h)
	@mkdir -p $(BUILD)
	$(CC_UNIT) $(UNIT_FLAGS) -o $@ $(UNIT_SRCS) $(LIB_SRCS) $(UNIT_LIBS)

deps:
	scripts/deps.sh

unit: $(DEPS)/.pkgs-test
	$(MAKE) $(BUILD)/unit
	$(BUILD)/unit

integration: $(DEPS)/.pkgs-test
	$(MAKE) all
	tests/run-layer.sh integration

vm: $(DEPS)/.pkgs-test
	$(MAKE) all
	tests/run-layer.sh vm

# The OCI image under podman (runc), in a private store under build/.
runtime: $(DEPS)/.pkgs-test
	$(MAKE) all
	tests/run-layer.sh runtime

# The integration smoke subset with hearth under valgrind memcheck.
valgrind: $(DEPS)/.pkgs-test
	$(MAKE) $(BUILD)/hearth-debug $(BUILD)/hearthctl
	tests/run-layer.sh valgrind

# All layers; the last line is the total "N passed, N failed". STRICT=1
# (CI) fails on any skip. The
# packages come first, then the builds (a sub-make keeps that order under -j).
test: $(DEPS)/.pkgs-test
	$(MAKE) all $(BUILD)/unit $(BUILD)/hearth-debug
	STRICT=$(STRICT) tests/run-all.sh

bench: $(DEPS)/.pkgs-bench
	$(MAKE) all
	tests/bench/run.sh

# A month of one Hermes sandbox compressed into under an hour, in
# supervisor mode and in a VM (tests/soak/soak.py); outside make test.
# SOAK_SCALE (1) and SOAK_VM_SCALE (0.02) shorten or lengthen it.
soak: $(DEPS)/.pkgs-soak
	$(MAKE) all
	tests/soak/run.sh

fuzz: $(DEPS)/.pkgs-test
	tests/fuzz/run.sh

image: $(DEPS)/.pkgs-image
	$(MAKE) all
	rootfs/build-image.sh

# The Hermes sandbox as an OCI image archive (build/oci/hearth-hermes.tar),
# written by umoci: podman load -i build/oci/hearth-hermes.tar.
oci: $(DEPS)/.pkgs-oci
	$(MAKE) all
	rootfs/build-oci.sh

# Everything from a fresh machine: packages, libraries, kernel, build,
# image, boot, status.
run: $(DEPS)/.pkgs-image
	$(MAKE) all
	scripts/run-vm --demo

# "not stripped" contains "stripped": match the whole word after a comma.
check-static: $(BUILD)/hearth $(BUILD)/hearthctl
	@for b in $(BUILD)/hearth $(BUILD)/hearthctl; do \
		out=$$(file -b $$b); \
		echo "$$out" | grep -q 'statically linked' || { echo "$$b: not static: $$out"; exit 1; }; \
		echo "$$out" | grep -q ', stripped' || { echo "$$b: not stripped: $$out"; exit 1; }; \
	done
	@echo "hearth: static, stripped, $$(stat -c %s $(BUILD)/hearth) bytes"

install: all
	install -D -m 0755 $(BUILD)/hearth $(DESTDIR)$(PREFIX)/sbin/hearth
	install -D -m 0755 $(BUILD)/hearthctl $(DESTDIR)$(PREFIX)/bin/hearthctl
	install -D -m 0644 rootfs/hermes/hearth.json $(DESTDIR)/etc/hearth/hearth.json.example

clean:
	rm -rf $(BUILD)/hearth $(BUILD)/hearth-debug $(BUILD)/hearthctl $(BUILD)/unit $(BUILD)/test $(BUILD)/image $(BUILD)/vmtest $(BUILD)/oci

distclean:
	rm -rf $(BUILD)
