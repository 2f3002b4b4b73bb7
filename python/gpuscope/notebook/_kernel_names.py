"""Kernel and operator names as HTA shortens them."""

from __future__ import annotations

__all__ = ["short_name"]


def short_name(name: str) -> str:
    """``name`` without its template arguments, call arguments and return type, as HTA
    shortens kernel and operator names (copies and memsets keep theirs):
    ``void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)`` ->
    ``at::native::vectorized_elementwise_kernel``."""
    if name.startswith(("Memcpy", "Memset", "dma")) or ("<" not in name and "(" not in name):
        return name
    kept: list[str] = []
    for c in name.replace("->", ""):
        opening = {">": "<", ")": "("}.get(c)
        if opening is None:
            kept.append(c)
            continue
        # Drop back to the matching opening bracket, and the bracket itself.
        while kept and kept[-1] != opening:
            kept.pop()
        if kept:
            kept.pop()
    return "".join(kept).split(" ")[-1]
