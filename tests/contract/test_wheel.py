"""A wheel built from the committed tree installs (not editable) into a fresh virtualenv and, from
a directory far from any source tree, reports its version, migrates, creates a key and serves."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest

from app.storage.migrate import head_revision
from tests.conftest import free_port, fresh_database
from tests.processes import serving

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Installed:
    venv: Path

    def ctxc(self, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.venv / "bin" / "ctxc"), *args],
            cwd=cwd,
            env=clean_env(**env),
            capture_output=True,
            text=True,
            timeout=120,
        )


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without ctxc settings or import paths that could reach the source tree."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXC_") and k != "PYTHONPATH"}
    return env | extra


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel of HEAD (`git archive`, so uncommitted files play no part), installed without
    its dependencies into a new virtualenv that borrows them from this one: this venv's
    site-packages is added by a path line, whose own .pth files Python does not process, so the
    editable install of the source tree (a .pth file there) stays invisible."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: there is no committed tree to build from")
    work = tmp_path_factory.mktemp("wheel")
    archive = work / "head.zip"
    subprocess.run(
        ["git", "archive", "--format=zip", "-o", str(archive), "HEAD"], cwd=ROOT, check=True
    )
    with zipfile.ZipFile(archive) as tree:
        tree.extractall(work / "src")
    pip = [sys.executable, "-m", "pip", "--quiet", "--disable-pip-version-check"]
    build = ["wheel", "--no-deps", "--no-build-isolation", "-w", str(work / "dist")]
    subprocess.run(
        [*pip, *build, str(work / "src")],
        check=True,
        timeout=300,
    )
    (wheel,) = (work / "dist").glob("ctxc-*.whl")
    with zipfile.ZipFile(wheel) as contents:
        names = set(contents.namelist())
    assert {"app/migrations/env.py", "app/migrations/script.py.mako"} <= names
    assert not any(name.startswith(("migrations/", "tests/")) for name in names)

    env_dir = work / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    borrowed = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    Path(site, "borrowed-dependencies.pth").write_text("\n".join(sorted(borrowed)) + "\n")
    subprocess.run(
        [*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
        check=True,
        timeout=300,
    )
    return Installed(env_dir)


def test_the_wheel_is_what_runs_not_the_source_tree(installed: Installed, tmp_path: Path) -> None:
    probe = "import app, app.storage.migrate as m; print(app.__file__); print(m.migrations_dir())"
    result = subprocess.run(
        [str(installed.venv / "bin" / "python"), "-c", probe],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    package, migrations = (Path(line) for line in result.stdout.split())
    assert package.is_relative_to(installed.venv), package
    assert migrations == package.parent / "migrations"
    version_line = installed.ctxc("--version", cwd=tmp_path)
    assert version_line.stdout == f"ctxc {version('ctxc')}\n", version_line.stderr


def serve_until_ready(installed: Installed, cwd: Path, key: str, env: dict[str, str]) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = cwd / "serve.log"
    with (
        log.open("w") as out,
        serving(
            [str(installed.venv / "bin" / "ctxc"), "serve", "--port", str(port)],
            base,
            log=log.read_text,
            cwd=cwd,
            env=clean_env(CTXC_AUTH="keys", **env),
            stdout=out,
            stderr=out,
        ),
    ):
        listed = httpx.get(f"{base}/v1/sessions", headers={"Authorization": f"Bearer {key}"})
        assert listed.status_code == 200, listed.text


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_installed_wheel_migrates_creates_a_key_and_serves(
    kind: str, installed: Installed, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # SQLite: the default database, ./data/ctxc.db of the current directory.
    env = {} if kind == "sqlite" else {"CTXC_DATABASE_URL": fresh_database(kind, tmp_path, request)}
    migrated = installed.ctxc("migrate", cwd=elsewhere, **env)
    assert migrated.returncode == 0, migrated.stderr
    assert migrated.stdout.startswith("created the schema of ")
    assert migrated.stdout.rstrip().endswith(f"at revision {head_revision()}")
    if kind == "sqlite":
        assert (elsewhere / "data" / "ctxc.db").is_file()
    created = installed.ctxc("keys", "create", "--tenant", "x", cwd=elsewhere, **env)
    assert created.returncode == 0, created.stderr
    serve_until_ready(installed, elsewhere, created.stdout.strip(), env)
