"""`make run` as a newcomer runs it: what it starts Parley with, read by a stand-in for the
interpreter that prints its environment instead of serving."""

import os
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

STAND_IN = """#!/bin/sh
echo "EMAIL_BACKEND=$EMAIL_BACKEND"
echo "EMAIL_FILE_PATH=$EMAIL_FILE_PATH"
echo "ARGS=$*"
"""


def make_run(tmp_path: Path, **env: str) -> str:
    python = tmp_path / "python"
    python.write_text(STAND_IN)
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EMAIL_")}
    done = subprocess.run(
        ["make", "--no-print-directory", "run", f"PYTHON={python}"],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def test_make_run_writes_mail_to_files_out_of_the_box(tmp_path):
    printed = make_run(tmp_path)
    assert "EMAIL_BACKEND=django.core.mail.backends.filebased.EmailBackend" in printed
    assert f"EMAIL_FILE_PATH={ROOT / 'data' / 'mail'}" in printed
    assert f"mail goes to {ROOT / 'data' / 'mail'}" in printed  # and says where
    assert "ARGS=-m config.serve" in printed


def test_a_mail_backend_of_ones_own_is_kept(tmp_path):
    printed = make_run(tmp_path, EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend")
    assert "EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend" in printed
