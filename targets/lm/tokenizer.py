"""A byte-level tokenizer with reserved token ids for canaries (no download, no vocabulary file).

Ids 0-255 are the bytes of the UTF-8 text, then ``BOS``, ``EOS`` and ``PAD``, then ``n_reserved`` ids
that never occur in encoded text: a canary's secret can be a token of its own (Panda et al. 2025, new-token
canaries; docs/references.md, "Language models"). In a text, ``<|r17|>`` stands for reserved id 17 (the
marker is the only way to write a reserved token; it does not occur in the corpus).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from audit.errors import UserError

__all__ = ["ByteTokenizer", "reserved_marker"]

_MARKER = re.compile(r"<\|r(\d+)\|>")


def reserved_marker(index: int) -> str:
    """The text that encodes reserved token ``index`` (0-based among the reserved ids)."""
    return f"<|r{int(index)}|>"


@dataclass(frozen=True)
class ByteTokenizer:
    """Bytes, three special ids and ``n_reserved`` canary ids; sequences cut to ``max_length`` tokens."""

    n_reserved: int = 1024
    max_length: int = 128

    @property
    def bos(self) -> int:
        return 256

    @property
    def eos(self) -> int:
        return 257

    @property
    def pad(self) -> int:
        return 258

    @property
    def vocab_size(self) -> int:
        return 259 + self.n_reserved

    def reserved_id(self, index: int) -> int:
        """The token id of reserved token ``index``; a one-line error outside ``[0, n_reserved)``."""
        if not 0 <= int(index) < self.n_reserved:
            raise UserError(f"reserved token {index} is out of range: the tokenizer has {self.n_reserved} reserved "
                            "ids; build it with more (n_reserved)")
        return 259 + int(index)

    def encode(self, text: str) -> list[int]:
        """``BOS``, the UTF-8 bytes (``<|rK|>`` as reserved id K), ``EOS``; at most ``max_length`` ids."""
        ids = [self.bos]
        position = 0
        for match in _MARKER.finditer(text):
            ids.extend(text[position:match.start()].encode("utf-8"))
            ids.append(self.reserved_id(int(match.group(1))))
            position = match.end()
        ids.extend(text[position:].encode("utf-8"))
        ids.append(self.eos)
        return ids[: self.max_length]

    def decode(self, ids: list[int]) -> str:
        """The text of ``ids`` (special ids dropped, reserved ids as their markers)."""
        out, pending = [], bytearray()
        for i in ids:
            if i < 256:
                pending.append(i)
            elif i >= 259:
                out.append(pending.decode("utf-8", errors="replace") + reserved_marker(i - 259))
                pending = bytearray()
        return "".join(out) + pending.decode("utf-8", errors="replace")
