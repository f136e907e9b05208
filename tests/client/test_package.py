"""The client is a package of its own: its wheel builds (offline, with the hatchling of this
environment), installs into a fresh virtualenv and works there against a live server."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

from tests.conftest import Api

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "python"
PROBE = """
import sys, ctxc_client
from ctxc_client import Client
assert ctxc_client.__file__.startswith(sys.prefix), ctxc_client.__file__
with Client(sys.argv[1], api_key=sys.argv[2]) as ctxc:
    print(ctxc.create_session(provider="gpt-4o").encoding)
"""


def run(*command: str | Path) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_wheel_installs_into_a_fresh_environment_and_works(api: Api, tmp_path: Path) -> None:
    pip = (sys.executable, "-m", "pip")
    run(*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", PACKAGE, "-w", tmp_path)
    [wheel] = tmp_path.glob("ctxc_client-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "ctxc_client/py.typed" in names and "ctxc_client/client.py" in names
    assert not [n for n in names if n.startswith(("app/", "tests/"))]
    metadata = next(n for n in names if n.endswith("METADATA"))
    requires = [
        line.split()[1]
        for line in zipfile.ZipFile(wheel).read(metadata).decode().splitlines()
        if line.startswith("Requires-Dist:")
    ]
    assert requires == ["httpx<1,>=0.27", "pydantic<3,>=2.7"]

    env = tmp_path / "venv"
    venv.create(env, with_pip=False)
    python = env / "bin" / "python"
    site = Path(
        run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    )
    # Its dependencies come from this environment's site-packages, appended after its own (the
    # editable install of this checkout is in a .pth there, which a path entry does not read).
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(*pip, "--python", python, "install", "--no-deps", "--no-index", wheel)
    assert run(python, "-c", PROBE, api.url, api.key_a).strip() == "o200k_base"
