#!/usr/bin/env bash
# Creates .venv with Python >= 3.12 and installs the pinned dependencies of pyproject.toml.
# Re-running is cheap: nothing is installed again while pyproject.toml is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
STAMP="$VENV/.parley-deps"

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
    echo "bootstrap: creating $VENV with $PY"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
fi

want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
    echo "bootstrap: installing dependencies from pyproject.toml"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    "$VENV/bin/python" - <<'PY' > "$VENV/requirements.txt"
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
for requirement in project["dependencies"] + project["optional-dependencies"]["dev"]:
    print(requirement)
PY
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$VENV/requirements.txt"
    echo "$want" > "$STAMP"
fi

if ! command -v msgfmt >/dev/null 2>&1; then
    echo "bootstrap: 'msgfmt' (GNU gettext) is needed to compile translations: apt-get install -y gettext" >&2
    exit 1
fi
