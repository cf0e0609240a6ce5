"""Parsers of GPU-node tool outputs (work in progress: see the full field list once every tool is in)."""

from __future__ import annotations

from typing import Any, Callable, Dict

from validators.parsers.nccl_tests import parse_nccl_tests

PARSERS: Dict[str, Callable[[str], Dict[str, Any]]] = {
    "nccl-tests": parse_nccl_tests,
}

__all__ = ["PARSERS", "parse_nccl_tests"]
