#!/usr/bin/env bash
# What can be checked of the agent image without building it (no container engine, no CUDA
# images here): the Dockerfile's pins and layout, and scripts/build-agent-image against a fake
# docker (the command it runs) and without any engine (a clear error).
# Usage: agent_image_test.sh SOURCE_DIR
set -uo pipefail

src=$(realpath "${1:?usage: agent_image_test.sh SOURCE_DIR}")
dockerfile="$src/deploy/agent-image/Dockerfile"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
check() {
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what" >&2; failures=$((failures + 1)); fi
}
has() { grep -qE -- "$2" "$1"; }

# --- the Dockerfile ----------------------------------------------------------------------------
check "the Dockerfile exists" test -f "$dockerfile"
# Every base image is an ARG default with an exact CUDA version and Ubuntu release, or a stage.
bases_pinned=1
while read -r base; do
  # shellcheck disable=SC2016  # the Dockerfile's own text, not ours to expand
  case "$base" in
    '${CUDA_DEVEL_IMAGE}' | '${RUNTIME_IMAGE}') ;;
    *) echo "unpinned FROM $base" >&2; bases_pinned=0 ;;
  esac
done < <(awk '/^FROM /{ print $2 }' "$dockerfile")
check "every FROM names a pinned ARG" test "$bases_pinned" = 1
check "the devel image is pinned to a CUDA release" \
  has "$dockerfile" '^ARG CUDA_DEVEL_IMAGE=nvidia/cuda:[0-9]+\.[0-9]+\.[0-9]+-devel-ubuntu[0-9.]+$'
check "the runtime image is pinned to a CUDA release" \
  has "$dockerfile" '^ARG RUNTIME_IMAGE=nvidia/cuda:[0-9]+\.[0-9]+\.[0-9]+-(base|runtime)-ubuntu[0-9.]+$'
check "no image is taken at :latest" bash -c "! grep -q ':latest' '$dockerfile'"
check "curio is pinned to a full commit id" has "$dockerfile" '^ARG CURIO_COMMIT=[0-9a-f]{40}$'
check "the checkout is verified to be that commit" has "$dockerfile" 'git rev-parse HEAD.*CURIO_COMMIT'
check "rustup is pinned and its digest checked" has "$dockerfile" 'sha256sum -c'
check "cuzk is built with curio's make targets" has "$dockerfile" 'make cuzk && make install-cuzk'
check "cuzk lands at /usr/local/bin/cuzk" \
  has "$dockerfile" '^COPY --from=cuzk-build /usr/local/bin/cuzk /usr/local/bin/cuzk$'
check "the agent lands at /usr/local/bin/proverfleet" \
  has "$dockerfile" '^COPY --from=agent-build /build/proverfleet /usr/local/bin/proverfleet$'
check "the agent is built on the runtime image's distribution" \
  has "$dockerfile" '^FROM \$\{RUNTIME_IMAGE\} AS agent-build$'
check "CA certificates are installed" has "$dockerfile" 'ca-certificates'
check "the entrypoint is the image's ENTRYPOINT" \
  has "$dockerfile" '^ENTRYPOINT \["/usr/local/bin/proverfleet-entrypoint"\]$'
entry_src=$(awk '$1 == "COPY" && $3 == "/usr/local/bin/proverfleet-entrypoint" { print $2 }' \
  "$dockerfile")
check "the entrypoint copied is the tested one" test "$entry_src" = deploy/agent-image/entrypoint.sh
check "the entrypoint script exists and is executable" test -x "$src/$entry_src"
check "the build context leaves build trees out" has "$src/.dockerignore" '^build$'
check "the build context leaves git out" has "$src/.dockerignore" '^\.git$'

# --- scripts/build-agent-image -----------------------------------------------------------------
mkdir -p "$scratch/bin" "$scratch/none"
cat >"$scratch/bin/docker" <<'FAKE'
#!/bin/sh
# Records every call; `info` answers as a running daemon does.
printf '%s\n' "$*" >>"$FAKE_LOG"
exit 0
FAKE
chmod +x "$scratch/bin/docker"
ln -s "$(command -v git)" "$scratch/bin/git"
ln -s "$(command -v dirname)" "$scratch/bin/dirname"
ln -s "$(command -v sed)" "$scratch/bin/sed"

FAKE_LOG="$scratch/calls" PATH="$scratch/bin" /bin/bash "$src/scripts/build-agent-image" \
  --tag registry.example/proverfleet-agent:test --push -- --build-arg X=1 >"$scratch/out" 2>&1
check "build-agent-image with docker exits 0" test $? = 0
check "it asks the daemon first" has "$scratch/calls" '^info$'
check "it builds the Dockerfile from the repository root with the tag" has "$scratch/calls" \
  '^build -f deploy/agent-image/Dockerfile -t registry.example/proverfleet-agent:test --build-arg X=1 \.$'
check "--push pushes the tag" has "$scratch/calls" '^push registry.example/proverfleet-agent:test$'
check "it says what to set in the config" has "$scratch/out" 'deploy.image = "registry.example/proverfleet-agent:test"'

: >"$scratch/calls"
FAKE_LOG="$scratch/calls" PATH="$scratch/bin" /bin/bash "$src/scripts/build-agent-image" \
  >"$scratch/out" 2>&1
version=$(sed -n 's/^project(proverfleet VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
check "the default tag is deploy.image's default, proverfleet-agent:$version" \
  has "$scratch/calls" "^build -f deploy/agent-image/Dockerfile -t proverfleet-agent:$version \\.\$"
check "the default image constant names the same tag" \
  has "$src/src/manager/deploy_defaults.h" "kDefaultImage = \"proverfleet-agent:$version\";"

PATH="$scratch/none" /bin/bash "$src/scripts/build-agent-image" >"$scratch/out" 2>&1
check "without docker or podman it exits 1" test $? = 1
check "saying so" has "$scratch/out" 'neither docker nor podman is installed'

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all agent image checks passed"
