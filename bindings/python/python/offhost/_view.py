"""Memoryviews of shared memory for loans and received messages.

The native module knows the address and length of a pool buffer; this makes a ``memoryview``
of it through a ctypes array that keeps ``owner`` (the Loan or Message, which keeps the
session's mapping) alive for as long as any view of the memory exists.
"""

from __future__ import annotations

import ctypes


def view(addr: int, length: int, owner: object, readonly: bool) -> memoryview:
    """A byte memoryview of ``length`` bytes at ``addr`` that keeps ``owner`` alive."""
    arr = (ctypes.c_ubyte * length).from_address(addr)
    arr._offhost_owner = owner  # type: ignore[attr-defined]
    mv = memoryview(arr).cast("B")
    return mv.toreadonly() if readonly else mv
