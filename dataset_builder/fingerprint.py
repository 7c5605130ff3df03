"""A dataset config's fingerprint: what a run checks on resume, so a folder rebuilt in place is noticed.

It hashes each shard's name, size and parquet footer (row groups, column chunk sizes and statistics), which
change with any change of content, without reading gigabytes of audio on every resume.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

from dataset_builder.schema import SchemaError

_MAGIC = b"PAR1"


def _footer(path: Path) -> bytes:
    with path.open("rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        if size < 12:
            raise SchemaError("not a parquet file (too short); rebuild the dataset", source=str(path))
        fh.seek(size - 8)
        tail = fh.read(8)
        (length,) = struct.unpack("<I", tail[:4])
        if tail[4:] != _MAGIC or length > size - 12:
            raise SchemaError("not a readable parquet file (bad footer); rebuild the dataset", source=str(path))
        fh.seek(size - 8 - length)
        return fh.read(length)


def dataset_fingerprint(shards: list[Path]) -> str:
    """sha256 over every shard's name, size and footer, in order."""
    h = hashlib.sha256()
    for shard in shards:
        h.update(shard.name.encode() + b"\0" + str(shard.stat().st_size).encode() + b"\0")
        h.update(_footer(shard))
    return h.hexdigest()
