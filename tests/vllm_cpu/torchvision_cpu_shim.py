"""Lets the CUDA-built torchvision from PyPI import beside the CPU build of torch (the vLLM CPU test venv only).

vLLM's Qwen2-VL code imports transformers' torchvision image processor module, so torchvision must import. On
x86_64 the only torchvision wheels pip can resolve here (PyPI) are CUDA builds: their C extension needs
``libc10_cuda.so`` and does not load beside ``torch==2.13.0+cpu``. torchvision copes with a missing extension
everywhere but in ``torchvision/_meta_registrations.py``, which registers fake kernels for ``torchvision::nms`` and
``torchvision::qnms`` unconditionally and so fails with "operator torchvision::nms does not exist".

This module, loaded by a ``.pth`` file, waits for that one import and, only when the extension did not load,
declares those two operators' schemas (no kernels: calling them still raises). Nothing in the Qwen2.5-VL path calls
torchvision's C ops (images are decoded with PIL and resized with plain torch ops). Nothing happens until
torchvision is imported; with a torchvision whose extension loads, nothing happens at all.
"""

from __future__ import annotations

import importlib.abc
import sys

#: the operators torchvision 0.28 registers fake kernels for without checking that its extension loaded
SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
_libraries = []  # keeps the declarations alive


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torchvision._meta_registrations":
            sys.meta_path.remove(self)
            import torch
            import torchvision.extension

            if not torchvision.extension._has_ops():
                lib = torch.library.Library("torchvision", "FRAGMENT")
                for schema in SCHEMAS.values():
                    try:
                        lib.define(schema)
                    except RuntimeError:  # declared already (by something else): nothing to add
                        pass
                _libraries.append(lib)
        return None  # the regular finders load the module


sys.meta_path.insert(0, _Finder())
