"""The HTTP engine family: the model behind OpenAI-compatible servers (SGLang, vLLM).

``engine`` drives the conversation, ``wire`` holds the request and response bodies, ``routing`` pins each
inspection to one replica and tracks health, ``retry`` is the retry policy as constants and pure functions.
"""
