"""`make upgrade PACKAGE=name`: move one dependency to its newest release that fits the rest.

A dependency pinned in pyproject.toml gets its pin rewritten there and in uv.lock; any other
(transitive) dependency moves in uv.lock only. Every other locked version stays as it is.
Nothing is changed when uv cannot resolve.
"""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UV = str(ROOT / ".tools" / "uv" / "bin" / "uv")  # installed by scripts/bootstrap.sh
PYPROJECT = ROOT / "pyproject.toml"
LOCK = ROOT / "uv.lock"
# A pinned requirement in pyproject.toml: "name==1.2.3" or "name[extra]==1.2.3".
PIN = re.compile(r'"(?P<requirement>(?P<name>[A-Za-z0-9._-]+)(?:\[[^\]]*\])?)==[^"]+"')


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_version(name: str) -> str | None:
    packages = tomllib.loads(LOCK.read_text())["package"]
    return next((p["version"] for p in packages if p["name"] == normalize(name)), None)


def uv_lock(*args: str) -> None:
    # Fixed arguments and a package name the lock resolver validates; no shell.
    subprocess.run([UV, "lock", "--quiet", *args], cwd=ROOT, check=True)  # noqa: S603


def pin(text: str, name: str, version: str | None) -> str:
    """`text` with the pin of `name` set to `version` (None: unpinned)."""

    def replace(match: re.Match) -> str:
        if normalize(match["name"]) != normalize(name):
            return match[0]
        suffix = f"=={version}" if version else ""
        return f'"{match["requirement"]}{suffix}"'

    return PIN.sub(replace, text)


def main(name: str) -> int:
    pyproject, lock = PYPROJECT.read_text(), LOCK.read_text()
    before = locked_version(name)
    if before is None:
        print(f"upgrade: {name} is not in uv.lock", file=sys.stderr)
        return 1
    pinned = any(normalize(m["name"]) == normalize(name) for m in PIN.finditer(pyproject))
    try:
        if pinned:
            # Unpinned for one resolution, so uv may pick its newest release that fits the
            # other pins; then pinned to that release.
            PYPROJECT.write_text(pin(pyproject, name, None))
            uv_lock("--upgrade-package", name)
            PYPROJECT.write_text(pin(pyproject, name, locked_version(name)))
            uv_lock()
        else:
            uv_lock("--upgrade-package", name)
    except (subprocess.CalledProcessError, KeyboardInterrupt):
        PYPROJECT.write_text(pyproject)
        LOCK.write_text(lock)
        print(f"upgrade: {name} stays at {before}; files restored", file=sys.stderr)
        return 1
    after = locked_version(name)
    where = "pyproject.toml and uv.lock" if pinned else "uv.lock"
    if after == before:
        print(f"upgrade: {name} {before} is already the newest release that fits")
    else:
        print(f"upgrade: {name} {before} -> {after} in {where}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2 or not sys.argv[1]:
        sys.exit("usage: make upgrade PACKAGE=name")
    sys.exit(main(sys.argv[1]))
