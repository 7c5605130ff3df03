"""Errors a user can fix: the CLI prints them as one line naming the file or option, and exits 2."""

from __future__ import annotations


class UsageError(Exception):
    """A bad option, a missing or unreadable file, an unknown name: said in one line, no traceback."""
