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
# norelro: musl applies no PT_GNU_RELRO in a static binary (the data stay
# writable either way), and its alignment padded the file by up to 4 KiB.
# common-page-size=64: the data segment starts where the code ends in the
# file, instead of on the next page boundary (ld's choice whenever that
# saved a page of address space), another 0-4 KiB of padding.
LDFLAGS_STATIC := -static -Wl,--gc-sections -Wl,-z,noseparate-code -Wl,-z,norelro \
	-Wl,-z,common-page-size=64 -s

# Which code runs where. Guest: hearth, PID 1 inside the sandbox, is
# init/ and the control server in agent/, in every folder below them but
# agent/hearthctl/. Host: hearthctl is agent/hearthctl/, linked with the
# guest's library, from which the linker takes only the members it needs
# (the protocol's framing and its byte buffer, the encoders, the digest):
# no list of shared files to keep. Sources are found at any depth, so a
# file added to any folder is built without an edit here.
HOST_DIR    := agent/hearthctl
# Host code outside agent/hearthctl/ would be linked into hearth: refuse it.
ifneq ($(wildcard agent/hearthctl*.c agent/hearthctl*.h),)
$(error $(wildcard agent/hearthctl*.c agent/hearthctl*.h): hearthctl's files belong in agent/hearthctl/ (see agent/hearthctl/ctl.h))
endif
GUEST_SRCS  := $(sort $(shell find init agent -name '*.c' -not -path '$(HOST_DIR)/*'))
HOST_SRCS   := $(sort $(shell find $(HOST_DIR) -name '*.c'))
MAIN_SRC    := init/main.c
LIB_SRCS    := $(filter-out $(MAIN_SRC),$(GUEST_SRCS))
# Every guest folder is on the include path: a header is named by its file
# alone (#include "mounts.h"), wherever its folder is.
INC_DIRS    := $(sort $(shell find init agent -type d -not -path '$(HOST_DIR)' -not -path '$(HOST_DIR)/*'))
INCLUDES    := $(addprefix -I,$(INC_DIRS))
CFLAGS_COMMON := $(EV_DEFS) -std=gnu11 $(WARN) -D_GNU_SOURCE -DHEARTH_VERSION='"$(VERSION)"' $(INCLUDES)

DEPS_STAMP  := $(DEPS)/.libev-4.33 $(DEPS)/.cjson-1.7.15
DEP_INC     := -isystem $(DEPS)/include -isystem $(DEPS)/kinclude
DEP_LIBS    := $(DEPS)/lib/libev.a $(DEPS)/lib/libcjson.a -lm

UNIT_SRCS   := $(sort $(wildcard tests/unit/*.c))
UNIT_FLAGS  := $(EV_DEFS) -std=gnu11 $(WARN) -D_GNU_SOURCE -DHEARTH_VERSION='"$(VERSION)"' -DHEARTH_UNIT=1 \
               $(INCLUDES) -Itests/unit -isystem $(DEPS)/glibc/include \
               -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
UNIT_LIBS   := $(DEPS)/glibc/lib/libev.a $(DEPS)/glibc/lib/libcjson.a -lm

# The libFuzzer targets (tests/fuzz/fuzz_<name>.c, run by tests/fuzz/run.sh):
# no recovery from UBSan reports (a report must end the run so it is saved
# as an artifact), frame pointers for readable stacks, cJSON compiled from
# its source with the same sanitizers so its overreads are seen too.
FUZZ_SRCS   := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_BASE   := -g -O1 $(FUZZ_SAN) -fno-omit-frame-pointer -std=gnu11 -D_GNU_SOURCE $(EV_DEFS)
FUZZ_FLAGS  := $(FUZZ_BASE) -fsanitize=fuzzer-no-link -Wall -Wextra -Wno-unused-parameter \
               -DHEARTH_VERSION='"fuzz"' $(INCLUDES) -Itests/fuzz \
               -isystem $(DEPS)/cjson-src -isystem $(DEPS)/glibc/include
CJSON_SRC   := $(DEPS)/cjson-src

# Objects: one per source and way of compiling it, under
# $(OBJ)/<variant>/<source path>.o, each with the list of headers it read
# (-MMD; -MP: a header since removed is no error), so a one-file change
# recompiles one object, then relinks. The variants:
#   release          hearth and hearthctl: musl, -Oz, LTO (the objects hold
#                    GIMPLE and the link optimises across them, so gcc-ar
#                    writes their archive: its index needs the LTO plugin)
#   mutant-nolimits  the same with the cgroup limit writes left out
#   debug            hearth-debug: glibc, -g -O1, for valgrind
#   unit             build/unit: glibc, ASan + UBSan, HEARTH_UNIT
#   fuzz             the libFuzzer targets: clang, ASan + UBSan, coverage
# Each variant's shared code is one static library, libhearth.a (all but
# init/main.c), that hearth, hearthctl, the unit tests and the fuzz targets
# link.
OBJ         := $(BUILD)/obj
GCC_AR      ?= gcc-ar
AR          := ar
REL_FLAGS   := $(CFLAGS_COMMON) $(CFLAGS) $(DEP_INC)
DEBUG_FLAGS := $(CFLAGS_COMMON) -DJSONALLOC_KEEP=0 -g -O1 -fno-omit-frame-pointer -isystem $(DEPS)/glibc/include

objs_of     = $(patsubst %.c,$(OBJ)/$(1)/%.o,$(2))

# $(1) variant, $(2) compiler, $(3) flags, $(4) archiver. A variant's flags
# are written to $(OBJ)/$(1)/flags when they differ from the last build's
# (checked as the Makefile is read, so make -n shows the truth): every
# object depends on that file, so new flags (or a new VERSION) recompile
# the variant and nothing else does.
define VARIANT
$$(shell mkdir -p $(OBJ)/$(1) && printf '%s\n' '$$(subst ','\'',$(2) $(3))' >$(OBJ)/$(1)/flags.new && \
	{ cmp -s $(OBJ)/$(1)/flags.new $(OBJ)/$(1)/flags && rm -f $(OBJ)/$(1)/flags.new || \
	  mv -f $(OBJ)/$(1)/flags.new $(OBJ)/$(1)/flags; })

$(OBJ)/$(1)/%.o: %.c $(OBJ)/$(1)/flags $(DEPS_STAMP)
	@mkdir -p $$(@D)
	$(2) $(3) -MMD -MP -c -o $$@ $$<

# Made afresh each time: a member of a source since removed must not stay.
$(OBJ)/$(1)/libhearth.a: $$(call objs_of,$(1),$$(LIB_SRCS))
	@rm -f $$@
	$(4) qcs $$@ $$^
endef

ifeq ($(filter clean distclean,$(MAKECMDGOALS)),)
$(eval $(call VARIANT,release,$(MUSLCC),$(REL_FLAGS),$(GCC_AR)))
$(eval $(call VARIANT,mutant-nolimits,$(MUSLCC),$(REL_FLAGS) -DHEARTH_MUTANT_NO_LIMITS,$(GCC_AR)))
$(eval $(call VARIANT,debug,$(CC_UNIT),$(DEBUG_FLAGS),$(AR)))
$(eval $(call VARIANT,unit,$(CC_UNIT),$(UNIT_FLAGS),$(AR)))
$(eval $(call VARIANT,fuzz,$(CLANG),$(FUZZ_FLAGS),$(AR)))
endif

-include $(patsubst %.o,%.d,$(foreach v,release mutant-nolimits debug unit fuzz, \
	$(call objs_of,$(v),$(GUEST_SRCS))) $(call objs_of,release,$(HOST_SRCS)) \
	$(call objs_of,unit,$(UNIT_SRCS)) $(call objs_of,fuzz,$(FUZZ_SRCS)))

.PHONY: fuzz-build objects check all deps test unit distclean integration vm valgrind runtime bench soak fuzz image oci run install clean check-static

all: $(BUILD)/hearth $(BUILD)/hearthctl

# A stamp older than the script or the feature list means the libraries
# may have been built another way; deps.sh rebuilds only what differs. The
# build toolchain is installed first where it is missing, so any target
# works as the first command on a fresh machine. The two stamps are one
# recipe (a grouped target), so make -j runs deps.sh once, not twice.
$(DEPS_STAMP) &: scripts/deps.sh scripts/libev-features
	scripts/deps.sh --build

# What each entry point needs beyond the toolchain (test tools, image
# tools, benchmark peers, the guest kernel), one stamp per package set;
# deps.sh checks a set once and says what it installs.
$(DEPS)/.pkgs-test $(DEPS)/.pkgs-image $(DEPS)/.pkgs-bench $(DEPS)/.pkgs-soak $(DEPS)/.pkgs-oci: $(DEPS)/.pkgs-%: scripts/deps.sh
	scripts/deps.sh --$*

$(BUILD)/hearth: $(call objs_of,release,$(MAIN_SRC)) $(OBJ)/release/libhearth.a
	$(MUSLCC) $(REL_FLAGS) -o $@ $^ $(LDFLAGS_STATIC) $(DEP_LIBS)

# hearth with every cgroup limit write left out: tests/vm/test_limits.py
# boots it and expects the limit checks to fail (a mutation check).
$(BUILD)/hearth-mutant-nolimits: $(call objs_of,mutant-nolimits,$(MAIN_SRC)) $(OBJ)/mutant-nolimits/libhearth.a
	$(MUSLCC) $(REL_FLAGS) -DHEARTH_MUTANT_NO_LIMITS -o $@ $^ $(LDFLAGS_STATIC) $(DEP_LIBS)

# hearth's library after hearthctl's own objects: the linker takes the
# members they call and what those call, nothing else; one that called
# into libev would fail this link.
$(BUILD)/hearthctl: $(call objs_of,release,$(HOST_SRCS)) $(OBJ)/release/libhearth.a
	$(MUSLCC) $(REL_FLAGS) -o $@ $^ $(LDFLAGS_STATIC) $(DEPS)/lib/libcjson.a -lm

# The same hearth linked dynamically against glibc, with debug info, for
# valgrind: memcheck replaces malloc through the dynamic loader, so in the
# static musl binary it would see no heap at all.
$(BUILD)/hearth-debug: $(call objs_of,debug,$(MAIN_SRC)) $(OBJ)/debug/libhearth.a
	$(CC_UNIT) $(DEBUG_FLAGS) -o $@ $^ $(UNIT_LIBS)

$(BUILD)/unit: $(call objs_of,unit,$(UNIT_SRCS)) $(OBJ)/unit/libhearth.a
	$(CC_UNIT) $(UNIT_FLAGS) -o $@ $^ $(UNIT_LIBS)

# cJSON for the fuzz targets, instrumented like them; warnings from code
# that is not ours are off. An archive too, so a target that parses no
# JSON links none of it.
$(OBJ)/fuzz/cjson/cJSON.o: $(CJSON_SRC)/cJSON.c $(CJSON_SRC)/cJSON.h $(OBJ)/fuzz/flags
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_BASE) -fsanitize=fuzzer-no-link -w -I$(CJSON_SRC) -c -o $@ $<

$(OBJ)/fuzz/libcjson.a: $(OBJ)/fuzz/cjson/cJSON.o
	@rm -f $@
	$(AR) qcs $@ $^

# libev (the glibc build, not instrumented) only resolves the loop calls
# of a module a harness pulls in for something else; no harness runs a loop.
$(BUILD)/fuzz/fuzz_%: $(OBJ)/fuzz/tests/fuzz/fuzz_%.o $(OBJ)/fuzz/libhearth.a $(OBJ)/fuzz/libcjson.a
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_BASE) -fsanitize=fuzzer -o $@ $^ $(DEPS)/glibc/lib/libev.a -lm

fuzz-build: $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRCS))

# Every release object, hearth's and hearthctl's: the layer check reads
# their symbols (tests/static/layers.py).
objects: $(call objs_of,release,$(GUEST_SRCS) $(HOST_SRCS))

# bench_contain.sh's writer of hearth's seccomp program.
$(BUILD)/bench/seccomp_dump: tests/bench/seccomp_dump.c $(OBJ)/debug/libhearth.a
	@mkdir -p $(@D)
	$(CC_UNIT) -O2 $(INCLUDES) -o $@ $^

deps:
	scripts/deps.sh

# The static checks (tests/static/): the layers of docs/architecture.md
# against every file's includes and, from the objects, its calls.
check: $(DEPS)/.pkgs-test
	$(MAKE) objects
	tests/run-layer.sh static

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
	rm -rf $(OBJ) $(BUILD)/fuzz/fuzz_* $(BUILD)/bench/seccomp_dump $(BUILD)/hearth $(BUILD)/hearth-mutant-nolimits $(BUILD)/hearth-debug $(BUILD)/hearthctl $(BUILD)/unit $(BUILD)/test $(BUILD)/image $(BUILD)/vmtest $(BUILD)/oci

distclean:
	rm -rf $(BUILD)
