#!/usr/bin/env bash
# The GitHub Action's step (action.yml), a script of its own so that it runs, and is tested,
# anywhere: installs ckptlint into a virtual environment of its own and runs
# `ckptlint check --output-format github $CKPTLINT_ARGS $CKPTLINT_SRC`; its exit status is
# ckptlint's (1 when findings remain).
#
#   CKPTLINT_VERSION  checkout (default: the repository holding this script), a version
#                     (0.1.0: that release from the package index), or a pip requirement,
#                     path or wheel
#   CKPTLINT_ARGS     arguments before the paths (split on blanks)
#   CKPTLINT_SRC      the paths to lint (split on blanks; default .)
#   CKPTLINT_PYTHON   an interpreter ckptlint is installed in already: nothing is installed
set -euo pipefail

checkout="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="${CKPTLINT_VERSION:-checkout}"
python="${CKPTLINT_PYTHON:-}"

if [ -z "$python" ]; then
  case "$version" in
    checkout | "") requirement="$checkout" ;;
    latest) requirement="ckptlint" ;;
    [0-9]*) requirement="ckptlint==$version" ;;
    *) requirement="$version" ;;
  esac
  environment="$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/ckptlint-action.XXXXXX")"
  python3 -m venv "$environment"
  echo "::group::Install ckptlint ($requirement)"
  "$environment/bin/python" -m pip install --quiet --disable-pip-version-check "$requirement"
  echo "::endgroup::"
  python="$environment/bin/python"
fi

read -r -a args <<< "${CKPTLINT_ARGS:-}"
read -r -a paths <<< "${CKPTLINT_SRC:-.}"
exec "$python" -m ckptlint check --output-format github ${args[@]+"${args[@]}"} ${paths[@]+"${paths[@]}"}
