#!/usr/bin/env bash
# deploy/prometheus: the rules load (promtool check rules), every alert fires and stays quiet as
# proverfleet.rules.test.yml says (promtool test rules), and every proverfleet_* series the
# rules read is one that serve writes (a renamed metric must not leave an alert that can never
# fire). promtool comes from Debian's `prometheus` package (scripts/install-deps).
# Usage: prometheus_rules_test.sh SOURCE_DIR
set -euo pipefail

src=$(realpath "${1:?usage: prometheus_rules_test.sh SOURCE_DIR}")
rules="$src/deploy/prometheus/proverfleet.rules.yml"
if ! command -v promtool >/dev/null 2>&1; then
  echo "promtool is not installed: run scripts/install-deps (Debian's prometheus package)" >&2
  exit 1
fi

promtool check rules "$rules"
(cd "$src/deploy/prometheus" && promtool test rules proverfleet.rules.test.yml)

# Series names (recording rules' names have a colon and are left out), each looked for as the
# start of a string literal in what renders /metrics.
missing=()
while IFS= read -r name; do
  if ! grep -q "\"${name}[ {\"]\|\"${name}\"\|\"# HELP ${name} \|\"${name}_bucket" \
      "$src"/src/manager/metrics.cpp "$src"/src/manager/leadership.cpp; then
    missing+=("$name")
  fi
done < <(grep -v '^\s*#' "$rules" | grep -o 'proverfleet_[a-z_]*' | sort -u)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "the rules read series that serve does not write: ${missing[*]}" >&2
  exit 1
fi
echo "prometheus rules: checked, tested, and every series they read is written by serve"
