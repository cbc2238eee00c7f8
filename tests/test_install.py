"""Install: `make demo` needs no torch; `make setup` takes torch's CPU build from PyTorch's CPU index when it
answers, and falls back quickly (a short timeout, not a hang) to pip's default indexes when it does not."""

from __future__ import annotations

import http.server
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tools" / "install-torch.sh"


def _make_n(target: str) -> str:
    """Every command `make TARGET` would run on a fresh checkout (-B: as if nothing were built yet)."""
    if shutil.which("make") is None:
        pytest.skip("make not installed")
    return subprocess.run(["make", "-n", "-B", target], cwd=REPO, capture_output=True, text=True, check=True,
                          timeout=60).stdout


def test_demo_installs_the_base_package_without_torch():
    cmds = _make_n("demo")
    assert "pip install -e ." in cmds and "spec-vet run" in cmds
    assert "torch" not in cmds and "[local" not in cmds


def test_setup_and_test_install_torch_through_the_cpu_index_script():
    cmds = _make_n("test")
    assert "tools/install-torch.sh" in cmds and "pip install -e '.[local,dev,docs]'" in cmds
    assert cmds.index("install-torch.sh") < cmds.index("[local,dev,docs]")  # torch first: the extra finds it installed
    assert "pip install torch" not in cmds  # never the bare PyPI line (CUDA build on a stock Linux machine)


def test_make_test_builds_the_docs_with_warnings_as_errors_before_the_suite():
    cmds = _make_n("test")
    assert "-m sphinx -W" in cmds and cmds.index("-m sphinx -W") < cmds.index("-m pytest")


def _dry(index: str, timeout_s: str = "2") -> tuple[str, str, float]:
    t0 = time.monotonic()
    res = subprocess.run(["bash", str(SCRIPT), sys.executable, "2.13.0", "--dry-run"], capture_output=True,
                         text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "TORCH_INDEX_URL": index,
                                                     "TORCH_INDEX_TIMEOUT": timeout_s})
    assert res.returncode == 0, res.stderr
    return res.stdout.strip(), res.stderr, time.monotonic() - t0


def test_cpu_index_used_when_it_answers(tmp_path):
    (tmp_path / "whl" / "cpu" / "torch").mkdir(parents=True)
    (tmp_path / "whl" / "cpu" / "torch" / "index.html").write_text("<a href='torch-2.13.0+cpu.whl'>torch</a>")
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp_path), **k)  # noqa: E731
    http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        index = f"http://127.0.0.1:{server.server_address[1]}/whl/cpu"
        out, err, _ = _dry(index)
    finally:
        server.shutdown()
        server.server_close()
    assert out.split() == [sys.executable, "-m", "pip", "install", "--index-url", index, "--timeout", "2",
                           "torch==2.13.0"]
    assert "CPU build" in err


def test_unreachable_index_falls_back_at_once():
    with socket.socket() as s:  # a port nobody listens on: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out, err, elapsed = _dry(f"http://127.0.0.1:{port}/whl/cpu")
    assert out.split() == [sys.executable, "-m", "pip", "install", "torch==2.13.0"]
    assert "did not answer" in err and elapsed < 10


def test_silent_index_falls_back_after_the_short_timeout():
    """A server that accepts and never answers (a firewall that swallows packets looks the same to the client)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)  # never accepted: connect succeeds, the read waits
        t0 = time.monotonic()
        out, err, elapsed = _dry(f"http://127.0.0.1:{s.getsockname()[1]}/whl/cpu", timeout_s="1")
    assert out.split()[-1] == "torch==2.13.0" and "--index-url" not in out
    assert 0.9 < elapsed < 8, elapsed
    assert time.monotonic() - t0 < 10


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed (apt-get install shellcheck)")
def test_install_script_is_shellcheck_clean():
    res = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout
