"""The HTTP engine family: the model behind OpenAI-compatible servers (SGLang, vLLM).

``engine`` drives the conversation, ``wire`` holds the request and response bodies, ``routing`` pins each
inspection to one replica and tracks health, ``retry`` is the retry policy as constants and pure functions.

The defaults a job file, ``spec-vet inspect`` and ``spec-vet endpoints check`` share live here, so reading them
imports no HTTP client.
"""

#: the environment variable holding the API key, if any (never logged)
DEFAULT_API_KEY_ENV = "SPEC_VETTING_API_KEY"
#: one assistant turn (2048 tokens at >= 20 tokens/s under load); the loop's time budget caps the whole inspection
DEFAULT_TIMEOUT_S = 120.0
