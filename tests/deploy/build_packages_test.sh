#!/usr/bin/env bash
# The agent image builds: every library CMake requires has its package, in scripts/install-deps
# (Debian) and in the Dockerfile's agent-build stage (Ubuntu 24.04), through the one table
# below; and the cuzk daemon the image carries is the one the pinned curio commit installs.
#   1. The REQUIRED find_package and pkg_check_modules / pkg_search_module calls of
#      CMakeLists.txt and of every file it include()s (QUIET and optional ones left out).
#   2. Each must be in DEPS below; a dependency CMake requires that DEPS lacks fails, named, and
#      so does a DEPS row CMake no longer requires.
#   3. Each row's Debian packages must be in install-deps' PACKAGES, its Ubuntu packages in
#      agent-build's `apt-get install`.
#   4. The Dockerfile's curio pins against the facts read at that commit (constants below).
# Needs no network, container engine or curio checkout.
# Usage: build_packages_test.sh SOURCE_DIR
set -uo pipefail

src=$(realpath "${1:?usage: build_packages_test.sh SOURCE_DIR}")
dockerfile="$src/deploy/agent-image/Dockerfile"
install_deps="$src/scripts/install-deps"
self="tests/deploy/build_packages_test.sh"
failures=0
check() {
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what" >&2; failures=$((failures + 1)); fi
}
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# --- the table -------------------------------------------------------------------------------
# What CMake asks for -> the Debian packages scripts/install-deps installs for it -> the Ubuntu
# 24.04 packages agent-build installs for it (comma-separated, no spaces). A CMake package is
# named as find_package names it; a pkg-config module as pkg:MODULE.
DEPS=$(cat <<'TABLE'
PkgConfig         pkg-config                    pkg-config
pkg:cpp-httplib   libcpp-httplib-dev            libcpp-httplib-dev
nlohmann_json     nlohmann-json3-dev            nlohmann-json3-dev
spdlog            libspdlog-dev,libfmt-dev      libspdlog-dev,libfmt-dev
CLI11             libcli11-dev                  libcli11-dev
tomlplusplus      libtomlplusplus-dev           libtomlplusplus-dev
CURL              libcurl4-openssl-dev          libcurl4-openssl-dev
SQLite3           libsqlite3-dev                libsqlite3-dev
tl-expected       libexpected-dev               libexpected-dev
Threads           build-essential               build-essential
OpenSSL           libssl-dev                    libssl-dev
GTest             libgtest-dev,libgmock-dev     libgtest-dev,libgmock-dev
pkg:libpq         libpq-dev                     libpq-dev
Boost             libboost1.81-dev              libboost-dev
Protobuf          libprotobuf-dev,protobuf-compiler  libprotobuf-dev,protobuf-compiler
gRPC              libgrpc++-dev,protobuf-compiler-grpc  libgrpc++-dev,protobuf-compiler-grpc
pkg:libb2         libb2-dev                     libb2-dev
TABLE
)
# What the configure and build steps run, whatever CMake finds: the compiler, cmake, and the
# generator agent-build's cmake line names (-G Ninja).
TOOLS_DEBIAN="build-essential cmake ninja-build pkg-config"
TOOLS_UBUNTU="build-essential cmake ninja-build pkg-config"

# --- curio at the pinned commit ----------------------------------------------------------------
# Read in curio's repository at 0ba6cbcae0348ad781973bbd65faaa90fdcb6be1 (git show):
#   Makefile:12                      include scripts/makefiles/30-build.mk
#   scripts/makefiles/30-build.mk:62-63  CUZK_PATH := extern/cuzk,
#                                    CUZK_BIN := $(CUZK_PATH)/target/release/cuzk-daemon
#   scripts/makefiles/30-build.mk:65-82  `cuzk:` checks cargo and nvcc, runs `cargo build
#                                    --release --bin cuzk-daemon` in extern/cuzk (:81), copies
#                                    the binary to ./cuzk (:82)
#   scripts/makefiles/30-build.mk:84-85  `install-cuzk:` install -C ./cuzk /usr/local/bin/cuzk
#   extern/cuzk (a folder there, not a submodule): cuzk-daemon/src/main.rs:19-22 takes
#                                    `#[arg(short, long)] config` (-c/--config FILE, default
#                                    /data/zk/cuzk.toml); :24-26 -l/--listen overrides
#                                    [daemon] listen; :29-30 --log-level
CURIO_COMMIT=0ba6cbcae0348ad781973bbd65faaa90fdcb6be1
CUZK_MAKE_TARGETS="make cuzk && make install-cuzk"
CUZK_INSTALLED=/usr/local/bin/cuzk

# --- what CMake requires ---------------------------------------------------------------------
# CMakeLists.txt and the files it includes by ${CMAKE_SOURCE_DIR}/path.
cmake_files=("$src/CMakeLists.txt")
# shellcheck disable=SC2016  # CMake's ${CMAKE_SOURCE_DIR}, matched literally
include_pattern='s/^[[:space:]]*include([[:space:]]*\${CMAKE_SOURCE_DIR}\/\([^ )]*\).*/\1/p'
while read -r inc; do
  [ -f "$src/$inc" ] && cmake_files+=("$src/$inc")
done < <(sed -n "$include_pattern" "$src/CMakeLists.txt")

# Prints "file:line<TAB>name" for each required dependency: find_package(NAME ... REQUIRED),
# and every module of pkg_check_modules/pkg_search_module(PREFIX ... REQUIRED ... MODULE[op ver]).
# A call may span lines; comments are dropped.
required_deps() {
  awk '
    function flush(   n, w, i, req, kw, m) {
      n = split(call, w, /[ \t]+/)
      req = 0
      for (i = 1; i <= n; i++) if (w[i] == "REQUIRED") req = 1
      if (!req) return
      if (cmd == "find_package") { print where "\t" w[1]; return }
      kw = " REQUIRED QUIET IMPORTED_TARGET GLOBAL NO_CMAKE_PATH NO_CMAKE_ENVIRONMENT_PATH "
      for (i = 2; i <= n; i++) {
        if (w[i] == "" || index(kw, " " w[i] " ")) continue
        m = w[i]
        sub(/[<>=].*/, "", m)
        print where "\tpkg:" m
      }
    }
    {
      line = $0
      sub(/#.*/, "", line)
      while (line != "") {
        if (cmd == "") {
          if (!match(tolower(line), /(^|[^a-z0-9_])(find_package|pkg_check_modules|pkg_search_module)[ \t]*\(/)) break
          head = substr(line, RSTART, RLENGTH)
          sub(/^[^a-zA-Z]*/, "", head)
          sub(/[ \t]*\($/, "", head)
          cmd = tolower(head)
          where = FILENAME ":" FNR
          call = ""
          line = substr(line, RSTART + RLENGTH)
        }
        p = index(line, ")")
        if (p == 0) { call = call " " line; break }
        call = call " " substr(line, 1, p - 1)
        sub(/^[ \t]+/, "", call)
        flush()
        cmd = ""
        line = substr(line, p + 1)
      }
    }
  ' "$@"
}

# --- the package lists -------------------------------------------------------------------------
# install-deps: the words of its PACKAGES=( ... ) array, comments left out.
debian_packages() {
  awk '/^PACKAGES=\(/ { on = 1; sub(/^PACKAGES=\(/, "") }
       on { line = $0; sub(/#.*/, "", line)
            if (sub(/\).*/, "", line)) { print line; on = 0 } else print line }' "$1" |
    awk '{ for (i = 1; i <= NF; i++) print $i }'
}
# The Dockerfile: the packages of the `apt-get install` in stage $2, continuation lines joined
# and the comment lines Docker drops left out.
stage_apt_packages() {
  awk -v stage="$2" '
    /^FROM / { on = ($NF == stage && $(NF - 1) == "AS"); next }
    !on || /^[ \t]*#/ { next }
    { line = $0
      cont = sub(/\\[ \t]*$/, "", line)
      run = run " " line
      if (cont) next
      if (run ~ /apt-get install/) {
        sub(/.*apt-get install/, "", run)
        sub(/&&.*/, "", run)
        n = split(run, w, /[ \t]+/)
        for (i = 1; i <= n; i++) if (w[i] != "" && w[i] !~ /^-/) print w[i]
      }
      run = "" }' "$1"
}
listed() { grep -qxF -- "$1" <<<"$2"; }

# --- 1 and 2: CMake against the table -----------------------------------------------------------
check "the Dockerfile exists" test -f "$dockerfile"
check "scripts/install-deps exists" test -f "$install_deps"
required=$(required_deps "${cmake_files[@]}")
check "CMake requires something (the parser found find_package calls)" test -n "$required"
table_names=$(awk 'NF { print $1 }' <<<"$DEPS")
while IFS=$'\t' read -r where name; do
  [ -n "$name" ] || continue
  if listed "$name" "$table_names"; then
    echo "ok: $name (${where#"$src"/}) is in the table"
  else
    fail "${where#"$src"/} requires '$name', which the table in $self does not map: add a DEPS" \
      "row naming its Debian package (scripts/install-deps) and its Ubuntu 24.04 package" \
      "(deploy/agent-image/Dockerfile, agent-build)"
  fi
done <<<"$required"
required_names=$(cut -f2 <<<"$required" | sort -u)
while read -r name; do
  listed "$name" "$required_names" ||
    fail "the table in $self maps '$name', which CMake no longer requires: remove its DEPS row"
done <<<"$table_names"

# --- 3: the table against the package lists ------------------------------------------------------
debian=$(debian_packages "$install_deps")
ubuntu=$(stage_apt_packages "$dockerfile" agent-build)
check "install-deps lists packages" test -n "$debian"
check "agent-build runs apt-get install" test -n "$ubuntu"
while read -r name deb ubu; do
  [ -n "$name" ] || continue
  for p in ${deb//,/ }; do
    listed "$p" "$debian" ||
      fail "'$name' needs the Debian package $p, missing from scripts/install-deps (PACKAGES)"
  done
  for p in ${ubu//,/ }; do
    listed "$p" "$ubuntu" ||
      fail "'$name' needs the Ubuntu package $p, missing from deploy/agent-image/Dockerfile" \
        "(agent-build's apt-get install)"
  done
done <<<"$DEPS"
for p in $TOOLS_DEBIAN; do
  check "the build tool $p is in scripts/install-deps" listed "$p" "$debian"
done
for p in $TOOLS_UBUNTU; do
  check "the build tool $p is in agent-build's apt-get install" listed "$p" "$ubuntu"
done
check "agent-build configures with the Ninja generator that ninja-build provides" \
  grep -q -- '-G Ninja' "$dockerfile"

# --- 4: the cuzk daemon of the pinned curio commit -------------------------------------------
has() { grep -qE -- "$2" "$1"; }
check "curio is pinned to $CURIO_COMMIT, the commit these facts were read at" \
  has "$dockerfile" "^ARG CURIO_COMMIT=$CURIO_COMMIT\$"
check "cuzk-build runs curio's targets: $CUZK_MAKE_TARGETS" \
  has "$dockerfile" "^RUN $CUZK_MAKE_TARGETS && test -x $CUZK_INSTALLED\$"
check "the runtime stage copies $CUZK_INSTALLED, where install-cuzk puts it" \
  has "$dockerfile" "^COPY --from=cuzk-build $CUZK_INSTALLED $CUZK_INSTALLED\$"
check "the agent runs the daemon as '${CUZK_INSTALLED##*/}' (src/agent/prover_cuzk.h)" \
  has "$src/src/agent/prover_cuzk.h" "kCuzkProgram = \"${CUZK_INSTALLED##*/}\";"
check "the agent passes its config with -c/--config, the daemon's flag (src/agent/prover_cuzk.cpp)" \
  has "$src/src/agent/prover_cuzk.cpp" 'argv = \{options_\.daemon, "(-c|--config)", options_\.config_path\}'
check "the entrypoint puts ${CUZK_INSTALLED%/*} on PATH" \
  has "$src/deploy/agent-image/entrypoint.sh" "\\*:${CUZK_INSTALLED%/*}:\\*"

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all build package checks passed"
