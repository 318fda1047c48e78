"""The fenced code blocks of the repository's Markdown files, and a shell to run them in.

Shared by the tests that run the docs' examples as written (test_readme, test_sql_cli,
test_docs_examples).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def code_blocks(doc: str, lang: str) -> list[str]:
    """The ```` ```lang ```` blocks of ``doc`` (a path from the repository root), in order."""
    return re.findall(rf"```{lang}\n(.*?)```", (ROOT / doc).read_text(), flags=re.S)


def run_shell(code: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``code`` with ``bash -e -o pipefail`` in ``cwd``, where ``oop`` is this checkout's
    command line (``python -m oop.cli``, this checkout first on ``PYTHONPATH``)."""
    env = {**os.environ,
           "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    script = f'oop() {{ "{sys.executable}" -m oop.cli "$@"; }}\n{code}'
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
