#!/usr/bin/env bash
# ShellCheck over every shell script in the repository: files named *.sh and files whose first
# line runs sh or bash (scripts/, deploy/, .ci/, tests/ ...); build trees, .ccache and
# node_modules left out. Every finding fails, whatever its level; a deliberate exception is a
# `# shellcheck disable=...` next to the line with the reason.
# Usage: shellcheck_test.sh SOURCE_DIR
set -uo pipefail

src=$(realpath "${1:?usage: shellcheck_test.sh SOURCE_DIR}")
if ! command -v shellcheck >/dev/null 2>&1; then
  echo "shellcheck is not installed: run scripts/install-deps" >&2
  exit 1
fi

scripts=()
while IFS= read -r -d '' file; do
  case "$file" in
    *.sh) scripts+=("$file") ;;
    *)
      first=""
      IFS= read -r -n 128 first 2>/dev/null <"$file"
      if [[ "$first" =~ ^\#!(/usr)?/bin/(env[[:space:]]+)?(ba)?sh([[:space:]]|$) ]]; then
        scripts+=("$file")
      fi
      ;;
  esac
done < <(find "$src" \( -name .git -o -name .ccache -o \( -type d -name 'build*' \) -o -name node_modules \) -prune -o \
  -type f -print0)

if [ "${#scripts[@]}" -eq 0 ]; then
  echo "no shell scripts found under $src" >&2
  exit 1
fi
printf 'shellcheck: %s\n' "${scripts[@]#"$src"/}"
shellcheck --external-sources "${scripts[@]}"
