#!/usr/bin/env bash
# Creates .venv with Python >= 3.12 and installs exactly the versions in uv.lock (every
# transitive dependency, with hashes), using the uv version that pyproject.toml requires.
# Re-running is cheap: nothing is installed again while pyproject.toml and uv.lock are unchanged.
# What it says goes to stderr: `TOKEN=$(make -s token NAME=demo)` captures the token alone.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
STAMP="$VENV/.parley-deps"
# uv lives in a small venv of its own: `uv sync` makes .venv match uv.lock exactly, which
# would remove a uv installed there.
UV_VENV=.tools/uv
UV="$UV_VENV/bin/uv"
# Python comes from this script (below), never from a download of uv's.
export UV_PYTHON_DOWNLOADS=never

python_ok() {
    "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1
}

find_python() {
    local candidates=()
    [ -n "${PYTHON:-}" ] && candidates+=("$PYTHON")
    candidates+=(python3.13 python3.12 python3)
    local root
    root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
    local p
    for p in "$root"/versions/3.1[2-9]*/bin/python; do
        [ -x "$p" ] && candidates+=("$p")
    done
    for p in "${candidates[@]}"; do
        if command -v "$p" >/dev/null 2>&1 && python_ok "$p"; then
            command -v "$p"
            return 0
        fi
    done
    return 1
}

if [ ! -x "$VENV/bin/python" ] || ! python_ok "$VENV/bin/python"; then
    if ! PY=$(find_python); then
        echo "bootstrap: Parley needs Python >= 3.12, and none was found." >&2
        echo "  Looked at \$PYTHON, python3.13, python3.12, python3 and \$(pyenv root)/versions/3.1[2-9]*." >&2
        echo "  Install one (for example 'pyenv install 3.13') or set PYTHON=/path/to/python3.13." >&2
        exit 1
    fi
    echo "bootstrap: creating $VENV with $PY" >&2
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
fi

uv_version=$("$VENV/bin/python" - <<'PY'
import tomllib

required = tomllib.load(open("pyproject.toml", "rb"))["tool"]["uv"]["required-version"]
print(required.removeprefix("=="))
PY
)
# `uv --version` prints "uv 0.13.9 (x86_64-unknown-linux-gnu)".
if [ "$("$UV" --version 2>/dev/null | cut -d' ' -f2)" != "$uv_version" ]; then
    echo "bootstrap: installing uv $uv_version into $UV_VENV" >&2
    rm -rf "$UV_VENV"
    "$VENV/bin/python" -m venv "$UV_VENV"
    "$UV_VENV/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$uv_version"
fi

# The optional dependency groups of pyproject.toml to install (`make bench` adds "bench").
EXTRAS=${PARLEY_EXTRAS:-dev}
# --frozen: install uv.lock as it is, without resolving again (`make test` checks that it still
# matches pyproject.toml). Packages the lock does not list are removed. --compile-bytecode:
# each process would otherwise compile every module it imports from source where Python may
# not write the .pyc files (PYTHONDONTWRITEBYTECODE, as container images often set, or a
# read-only install): measured on a 2-core machine, `manage.py check` took 3.7-4.1 s
# instead of 1.3 s, and the first turn after a start ~350 ms instead of ~150.
SYNC="sync --quiet --frozen --compile-bytecode"
want=$( (cat pyproject.toml uv.lock; echo "$EXTRAS $SYNC") | sha256sum | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
    echo "bootstrap: installing the dependencies locked in uv.lock (extras: $EXTRAS)" >&2
    # shellcheck disable=SC2046,SC2086
    "$UV" $SYNC $(printf -- '--extra %s ' $EXTRAS) --python "$VENV/bin/python"
    echo "$want" > "$STAMP"
fi

if ! command -v msgfmt >/dev/null 2>&1; then
    echo "bootstrap: 'msgfmt' (GNU gettext) is needed to compile translations: apt-get install -y gettext" >&2
    exit 1
fi
