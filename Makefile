# TraceML - one non-recursive Makefile.
#
#   make                 engine library, CLI, Python extension, examples, tests
#   make SANITIZE=1      the same with ASan+UBSan into build-asan/
#   make package         what the Python package ships (pip install . runs it
#                        through setup.py): libtraceml.so, traceml, the extension
#   make charts          web/gen/dygraphs.c, the chart library for the sdist
#   make check           every test (tests/run)
#   make install         the C API and the traceml binary into $(PREFIX)
#                        (default /usr/local); Python users: pip install .
#
# Sources are found by folder, so a new .c file in src/<part>/, cli/ or
# cli/run/ is built without touching this file.

# the Python extension is built for this interpreter (setup.py passes its own)
PYTHON  ?= python3
PREFIX  ?= /usr/local
CC      ?= cc
OBJCOPY ?= objcopy

ifeq ($(SANITIZE),1)
B       ?= build-asan
SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else ifeq ($(SANITIZE),undefined)
B       ?= build-ubsan
SANFLAGS = -fsanitize=undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
else ifeq ($(SANITIZE),thread)
B       ?= build-tsan
SANFLAGS = -fsanitize=thread -fno-omit-frame-pointer
else
B       ?= build
SANFLAGS =
endif

WARN    = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Werror
CFLAGS  ?= -O2 -g
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -fPIC -pthread $(WARN) $(CFLAGS) $(SANFLAGS) -Iinclude -Isrc \
             -Ithird_party/sqlite -MMD -MP

# SQLite is the amalgamation in third_party/sqlite/ (its README says which
# and how to update it), compiled here, always: the library, the binary and
# the extension need nothing beyond glibc, so the wheel is manylinux
# (setup.py reads its tag off the binaries) and a build from the sdist
# needs only a C compiler. One object per build tree, made once with plain
# optimisation: the sanitizer and fuzz variants link the normal tree's
# object (build/), as they linked Debian's uninstrumented libsqlite3.a
# before, rather than spending a minute compiling it again each. Its
# symbols are hidden (-fvisibility=hidden): a process that also loads the
# system's SQLite keeps its own. The options drop what TraceML never uses
# (extensions, JSON, shared cache, deprecated calls) and the double-quoted
# string literals SQLite accepts only for compatibility.
SQLITE_DIR = $(if $(SANITIZE),build,$(B))
SQLITE_O   = $(SQLITE_DIR)/obj/third_party/sqlite/sqlite3.o
SQLITE_CFLAGS = -O2 -fPIC -pthread -fvisibility=hidden -DSQLITE_THREADSAFE=1 -DSQLITE_DQS=0 \
                -DSQLITE_DEFAULT_MEMSTATUS=0 -DSQLITE_LIKE_DOESNT_MATCH_BLOBS \
                -DSQLITE_MAX_EXPR_DEPTH=0 -DSQLITE_OMIT_DEPRECATED -DSQLITE_OMIT_DECLTYPE \
                -DSQLITE_OMIT_PROGRESS_CALLBACK -DSQLITE_OMIT_SHARED_CACHE \
                -DSQLITE_OMIT_LOAD_EXTENSION -DSQLITE_OMIT_JSON -DSQLITE_USE_ALLOCA
LDLIBS  = -lpthread -ldl -lm

# The extension uses CPython's stable ABI (Py_LIMITED_API, 3.10, in
# python/_traceml.c): built with the headers of any CPython >= 3.10, the one
# _traceml.abi3.so loads into every CPython from 3.10 on.
PY_INC  := $(shell $(PYTHON) -c 'import sys, sysconfig; sys.version_info >= (3, 10) and print(sysconfig.get_paths()["include"])' 2>/dev/null)
PY_EXT  := .abi3.so

LIB_SRC  := $(sort $(wildcard src/*/*.c))
CLI_SRC  := $(sort $(wildcard cli/*.c cli/run/*.c))
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
BENCH_SRC := $(sort $(wildcard bench/*.c))
EX_SRC   := $(sort $(wildcard examples/c/*.c))
PY_SRC   := $(sort $(wildcard python/traceml_ai/*.py python/traceml_ai/integrations/*.py))

LIB_OBJ  := $(LIB_SRC:%.c=$(B)/obj/%.o) $(B)/obj/gen/web_assets.o $(B)/obj/gen/dygraphs.o
CLI_OBJ  := $(CLI_SRC:%.c=$(B)/obj/%.o) $(B)/obj/gen/zero_edit_site.o
TESTS    := $(TEST_SRC:tests/unit/%.c=$(B)/tests/%)
BENCHES  := $(BENCH_SRC:bench/%.c=$(B)/bench/%)
EXAMPLES := $(EX_SRC:examples/c/%.c=$(B)/examples/%)
PYDIR    := $(B)/lib/traceml/python/traceml_ai
INTERNAL_A := $(B)/obj/libtraceml-internal.a
PY_OUT   := $(PY_SRC:python/traceml_ai/%=$(PYDIR)/%) $(PYDIR)/_traceml$(PY_EXT) $(PYDIR)/lib/libtraceml.so

# Fake NVIDIA libraries for the GPU paths' tests (tests/fakes/), loaded
# through TRACEML_LIBCUDA / TRACEML_LIBNVML, and the sleep recorder the
# accuracy tests preload into C trainings, and the wall clock that jumps
# (clockjump.c); never installed.
FAKES    := $(B)/fakes/libcuda.so.1 $(B)/fakes/libnvidia-ml.so.1 $(B)/fakes/libnvidia-ml-min.so.1 \
            $(B)/fakes/libslept.so $(B)/fakes/libclockjump.so

# ROOT/bin/traceml, ROOT/include/traceml/traceml.h, ROOT/lib/libtraceml.so:
# the shape `traceml config` expects, in the build tree as once installed.
PACKAGE  := $(B)/lib/libtraceml.so $(B)/bin/traceml $(B)/include/traceml/traceml.h $(PY_OUT)

all: $(PACKAGE) $(B)/lib/libtraceml.a $(EXAMPLES) $(TESTS) $(BENCHES) $(FAKES)

package: $(PACKAGE)

$(B)/include/traceml/traceml.h: include/traceml/traceml.h
	@mkdir -p $(dir $@)
	cp $< $@

$(B)/fakes/libcuda.so.1: tests/fakes/fake_cuda.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -fPIC -shared $(WARN) -O2 -o $@ $<

$(B)/fakes/libnvidia-ml.so.1: tests/fakes/fake_nvml.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -fPIC -shared $(WARN) -O2 -o $@ $<

$(B)/fakes/libnvidia-ml-min.so.1: tests/fakes/fake_nvml.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -fPIC -shared $(WARN) -O2 -DFAKE_MINIMAL -o $@ $<

$(B)/fakes/libslept.so: tests/fakes/slept.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -fPIC -shared $(WARN) -O2 -o $@ $< -ldl

$(B)/fakes/libclockjump.so: tests/fakes/clockjump.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -fPIC -shared $(WARN) -O2 -o $@ $< -ldl

# The engine's objects hide every symbol but the public API (TML_API in
# include/traceml/traceml.h): libtraceml.so exports tml_* only.
$(LIB_OBJ): VISIBILITY = -fvisibility=hidden

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(VISIBILITY) -c $< -o $@

# The web assets of the HTML report and the dashboard, embedded as C arrays
# by scripts/gen-web-assets so that every report opens offline: web/ (ours,
# into build/gen/) and the chart library, dygraphs, from Debian's
# libjs-dygraphs (or TRACEML_DYGRAPHS_DIR), into web/gen/dygraphs.c: not
# in git, but in the sdist, and regenerated only where the package is
# present, so that a build from the sdist needs no more than a C compiler.
WEB_GEN := build/gen/web_assets.c
$(WEB_GEN): web/report.js web/report.css web/phases.js $(wildcard web/dashboard/*) scripts/gen-web-assets
	scripts/gen-web-assets $@

DYGRAPHS_DIR := $(or $(TRACEML_DYGRAPHS_DIR),/usr/share/javascript/dygraphs)
CHARTS_GEN := web/gen/dygraphs.c
$(CHARTS_GEN): $(wildcard $(DYGRAPHS_DIR)/dygraph.min.js $(DYGRAPHS_DIR)/dygraph.min.css)
	TRACEML_DYGRAPHS_DIR=$(DYGRAPHS_DIR) scripts/gen-web-assets --charts $@

charts: $(CHARTS_GEN)

# The zero-edit sitecustomize (docs/zero-edit.md), a Python file of the
# package, embedded the same way into the binary, which writes it into
# each run folder (build/gen/, regenerated from the sdist's copy too).
SITE_GEN := build/gen/zero_edit_site.c
$(SITE_GEN): python/traceml_ai/_sitecustomize.py scripts/gen-web-assets
	scripts/gen-web-assets --site $@

$(B)/obj/gen/zero_edit_site.o: $(SITE_GEN)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Icli -c $< -o $@

$(B)/obj/gen/web_assets.o: $(WEB_GEN)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(VISIBILITY) -c $< -o $@

$(B)/obj/gen/dygraphs.o: $(CHARTS_GEN)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(VISIBILITY) -c $< -o $@

$(SQLITE_O): third_party/sqlite/sqlite3.c third_party/sqlite/sqlite3.h
	@mkdir -p $(dir $@)
	$(CC) $(SQLITE_CFLAGS) -c $< -o $@

# The static library carries SQLite too, as the shared one does: a program
# linking either needs nothing more. The installed one (lib/libtraceml.a)
# is one relocatable object whose hidden symbols are made local: only the
# C API (tml_*, include/traceml/traceml.h) is global, so a program that
# links its own SQLite beside it keeps its own (tests/e2e/test_install.py).
# The binary, the C tests and the benches link the engine's internals
# (tml__*): obj/libtraceml-internal.a, never installed.
$(B)/obj/libtraceml-internal.a: $(LIB_OBJ) $(SQLITE_O)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(B)/lib/libtraceml.a: $(LIB_OBJ) $(SQLITE_O)
	@mkdir -p $(dir $@) $(B)/obj/public
	$(CC) -r -nostdlib -o $(B)/obj/public/traceml.o $^
	$(OBJCOPY) --localize-hidden $(B)/obj/public/traceml.o
	rm -f $@ && ar rcs $@ $(B)/obj/public/traceml.o

$(B)/lib/libtraceml.so: $(LIB_OBJ) $(SQLITE_O)
	@mkdir -p $(dir $@)
	$(CC) -shared $(SANFLAGS) -o $@ $^ $(LDLIBS)

# Not a PIE: a PIE's relocations cost 50 kB, which once (with Debian's
# SQLite, FTS and R*Tree included, and ncurses inside) took it past the
# 2 MB the wheel allows a binary.
$(B)/bin/traceml: $(CLI_OBJ) $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) $(SANFLAGS) -pthread -no-pie -o $@ $(CLI_OBJ) $(INTERNAL_A) $(LDLIBS)

$(B)/tests/%: tests/unit/%.c $(INTERNAL_A) tests/unit/harness.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests/unit -o $@ $< $(TEST_OBJ) $(INTERNAL_A) $(LDLIBS)

# A unit test of a CLI file links that file's object too: test_config,
# the project file's parser (cli/config_file.c, pure); test_live_lines,
# the live view's output lines (cli/live_lines.c).
$(B)/tests/test_config: TEST_OBJ = $(B)/obj/cli/config_file.o
$(B)/tests/test_config: $(B)/obj/cli/config_file.o
$(B)/tests/test_live_lines: TEST_OBJ = $(B)/obj/cli/live_lines.o
$(B)/tests/test_live_lines: $(B)/obj/cli/live_lines.o

$(B)/bench/%: bench/%.c $(INTERNAL_A)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(INTERNAL_A) $(LDLIBS)

$(B)/examples/%: examples/c/%.c $(B)/lib/libtraceml.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(B)/lib/libtraceml.a $(LDLIBS)

# The Python extension: a client of the same engine, the public API of
# libtraceml.so, found beside it (the package's lib/, as in the wheel; a
# DT_RPATH, which LD_LIBRARY_PATH does not override). One engine per
# process, shared with C code that links -ltraceml, and one copy of it
# (and of SQLite) in the wheel.
$(PYDIR)/_traceml$(PY_EXT): python/_traceml.c $(PYDIR)/lib/libtraceml.so
	@test -n "$(PY_INC)" || { echo "error: $(PYTHON): no CPython >= 3.10 (apt-get install python3-dev)"; exit 1; }
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Wno-missing-prototypes -I$(PY_INC) -shared -o $@ $< \
		-L$(PYDIR)/lib -ltraceml -Wl,--disable-new-dtags,-rpath,'$$ORIGIN/lib'

$(PYDIR)/lib/libtraceml.so: $(B)/lib/libtraceml.so
	@mkdir -p $(dir $@)
	cp $< $@

$(PYDIR)/%.py: python/traceml_ai/%.py
	@mkdir -p $(dir $@)
	cp $< $@

# make check: the quick tier (the inner loop); make check-full: everything
check: all
	tests/run quick

check-full: all
	tests/run

# The code with threads (engine, aggregator, live server, sampler) under
# ThreadSanitizer: make tsan; tests/run runs these when built.
TSAN_TESTS := test_engine test_server test_live test_sample test_store
tsan:
	$(MAKE) SANITIZE=thread $(TSAN_TESTS:%=build-tsan/tests/%)

# Every C test under clang's UBSan, which reports what GCC's does not
# (a zero offset applied to a NULL pointer): make ubsan.
ubsan:
	$(MAKE) SANITIZE=undefined CC=clang $(TESTS:$(B)/tests/%=build-ubsan/tests/%) \
		$(FAKES:$(B)/fakes/%=build-ubsan/fakes/%)

# Fuzz targets, one per parser (tests/fuzz/), with clang's libFuzzer under
# ASan+UBSan: make fuzz; scripts/fuzz runs them (tests/run: a short run).
FUZZ_CC    ?= clang
FUZZ_FLAGS  = -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer \
              -fsanitize=address,undefined -fno-sanitize-recover=undefined -Iinclude -Isrc \
              -Ithird_party/sqlite -MMD -MP
FUZZ_OBJ   := $(LIB_SRC:%.c=build-fuzz/obj/%.o) build-fuzz/obj/gen/web_assets.o \
              build-fuzz/obj/gen/dygraphs.o
FUZZ_BINS  := $(patsubst tests/fuzz/%.c,build-fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
fuzz: $(FUZZ_BINS)

build-fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

build-fuzz/obj/gen/web_assets.o: $(WEB_GEN)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -c $< -o $@

build-fuzz/obj/gen/dygraphs.o: $(CHARTS_GEN)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -c $< -o $@

build-fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJ) $(SQLITE_O)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJ) $(FUZZ_CLI) $(SQLITE_O) $(LDLIBS)

# fuzz_config reads the project file as the CLI does: its parser's object
# (cli/config_file.c, pure) too, as test_config links it.
build-fuzz/fuzz_config: FUZZ_CLI = build-fuzz/obj/cli/config_file.o
build-fuzz/fuzz_config: build-fuzz/obj/cli/config_file.o

install: $(B)/lib/libtraceml.so $(B)/lib/libtraceml.a $(B)/bin/traceml
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include/traceml $(DESTDIR)$(PREFIX)/lib
	install -m 755 $(B)/bin/traceml $(DESTDIR)$(PREFIX)/bin/traceml
	install -m 644 include/traceml/traceml.h $(DESTDIR)$(PREFIX)/include/traceml/
	install -m 644 $(B)/lib/libtraceml.a $(B)/lib/libtraceml.so $(DESTDIR)$(PREFIX)/lib/
	-ldconfig 2>/dev/null

clean:
	rm -rf build build-asan build-tsan build-ubsan build-fuzz

.PHONY: all package charts check check-full install clean tsan ubsan fuzz
.DELETE_ON_ERROR:
.SECONDARY: $(FUZZ_OBJ)

-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)
# the fuzz variant's own (make fuzz), so a changed header rebuilds its objects
-include $(shell find build-fuzz -name '*.d' 2>/dev/null)
