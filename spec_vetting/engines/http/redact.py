"""Blanking a secret in text a server sent us, before anything cuts, logs or records it."""

from __future__ import annotations

#: the shortest piece of a secret blanked at the edge of a text (a body the server itself cut inside the key)
MIN_EDGE_PIECE = 6
MASK = "***"


def redact_secret(text: str, secret: str | None) -> str:
    """``text`` with every whole ``secret`` blanked, and a piece of it (at least :data:`MIN_EDGE_PIECE` characters)
    that ends the text (its start) or starts it (its end). A secret under 4 characters is left (it would blank
    ordinary words)."""
    if not secret or len(secret) < 4 or not text:
        return text
    text = text.replace(secret, MASK)
    for n in range(min(len(secret) - 1, len(text)), MIN_EDGE_PIECE - 1, -1):
        if text.endswith(secret[:n]):
            text = text[:-n] + MASK
            break
    for n in range(min(len(secret) - 1, len(text)), MIN_EDGE_PIECE - 1, -1):
        if text.startswith(secret[-n:]):
            text = MASK + text[n:]
            break
    return text
