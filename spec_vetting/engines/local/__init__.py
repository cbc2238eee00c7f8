"""The in-process engine family: Qwen2.5-VL run by transformers in this process (``engine``), fed by ``inputs``
(chat template, image processing, token ids). Importing it needs torch and transformers (the ``local`` extra).
"""
