"""torch.distributed.checkpoint (DCP) folders whose pickled parts cannot run foreign code.

A DCP folder has a ``.metadata`` file that torch reads with ``pickle``, and non-tensor
entries (optimizer hyperparameters...) that torch's default load planner reads with
``torch.load(weights_only=False)``. Here:

- the coordinator signs ``.metadata`` after the save (``.metadata.sig`` next to it);
- a load verifies the signature on every rank before DCP starts, and the reader verifies
  the very bytes it unpickles (so a file swapped in between is refused too);
- non-tensor entries are read with ``weights_only=True``.

Tensor data is read by torch with ``weights_only=True`` already.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint._traverse import set_element
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta
from torch.distributed.checkpoint.planner import ReadItem

from infra.checkpoint.signing import sign, verify
from infra.checkpoint.store import CheckpointError

METADATA_FILE = ".metadata"
SIGNATURE_FILE = ".metadata.sig"
#: Signature purpose of DCP metadata.
METADATA_PURPOSE = "dcp-metadata"


def save(state: dict[str, Any], path: Path) -> None:
    """``dcp.save`` into ``path``, then sign its metadata (collective; rank 0 signs)."""
    dcp.save(state, checkpoint_id=str(path))
    if not dist.is_initialized() or dist.get_rank() == 0:
        data = (path / METADATA_FILE).read_bytes()
        signature = json.dumps(sign(data, METADATA_PURPOSE)).encode()
        tmp = path / f"{SIGNATURE_FILE}.tmp"
        tmp.write_bytes(signature)
        tmp.replace(path / SIGNATURE_FILE)


def load(state: dict[str, Any], path: Path, trust: bool = False) -> None:
    """``dcp.load`` from ``path`` into ``state`` once its metadata's signature checks out.

    Args:
        state: The state dict to fill in place (as ``dcp.load`` takes it).
        path: The DCP folder.
        trust: Load metadata without a valid signature of this user's key (logged).

    Raises:
        CheckpointError: The metadata is missing, unsigned, signed with another key or
            modified (and ``trust`` is False); raised on every rank before any collective.
    """
    check_folder(path, trust)
    reader, planner = SignedMetadataReader(path, trust), WeightsOnlyLoadPlanner(path)
    try:
        dcp.load(state, storage_reader=reader, planner=planner)
    except CheckpointException:  # DCP wraps errors (a BaseException); ours say it best
        refusal = reader.refusal or planner.refusal
        if refusal is not None:
            raise refusal from None
        raise


def check_folder(path: Path, trust: bool = False) -> None:
    """Verify the signature of ``path/.metadata`` (what :func:`load` does first).

    Raises:
        CheckpointError: Missing metadata, or no valid signature and ``trust`` is False.
    """
    verify_metadata(path, _metadata_bytes(path), trust)


def verify_metadata(path: Path, data: bytes, trust: bool) -> None:
    """Check ``data`` (the bytes of ``path/.metadata``) against ``path/.metadata.sig``."""
    verify(data, _signature(path), METADATA_PURPOSE, str(path / METADATA_FILE), trust)


def _metadata_bytes(path: Path) -> bytes:
    try:
        return (path / METADATA_FILE).read_bytes()
    except FileNotFoundError:
        raise CheckpointError(
            f"{path / METADATA_FILE} is missing: {path} is not a complete sharded checkpoint"
        ) from None


def _signature(path: Path) -> Any:
    try:
        return json.loads((path / SIGNATURE_FILE).read_bytes())
    except FileNotFoundError:
        return None
    except ValueError:
        return "malformed"


class SignedMetadataReader(FileSystemReader):
    """A DCP file reader that unpickles ``.metadata`` only after verifying those bytes.

    Args:
        path: The DCP folder.
        trust: Read metadata without a valid signature (torch's own reader then).
    """

    def __init__(self, path: Path, trust: bool = False) -> None:
        super().__init__(path)
        self.folder = Path(path)
        self.trust = trust
        #: The first refusal (DCP reports it wrapped in its own exception).
        self.refusal: CheckpointError | None = None

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:  # noqa: D102
        if self.trust:
            return super().read_metadata(*args, **kwargs)
        try:
            if kwargs.get("rank") is not None:  # rlpipe never writes rank-local metadata
                raise CheckpointError(f"{self.folder} has no signed global {METADATA_FILE}")
            data = _metadata_bytes(self.folder)
            verify_metadata(self.folder, data, trust=False)
        except CheckpointError as exc:
            self.refusal = self.refusal or exc
            raise
        metadata = pickle.loads(data)  # noqa: S301 - verified: signed with this user's key
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


class WeightsOnlyLoadPlanner(DefaultLoadPlanner):
    """DCP's default load planner, reading non-tensor entries with ``weights_only=True``.

    Args:
        path: The DCP folder (named in errors).
    """

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.folder = Path(path)
        #: The first refusal (DCP reports it wrapped in its own exception).
        self.refusal: CheckpointError | None = None

    def load_bytes(self, read_item: ReadItem, value: Any) -> None:  # noqa: D102
        value.seek(0)
        try:
            loaded = torch.load(value, weights_only=True)
        except pickle.UnpicklingError:
            self.refusal = self.refusal or CheckpointError(
                f"entry {read_item.dest_index.fqn!r} of {self.folder} is not plain data "
                "(loading it would unpickle objects that can run code); it was not loaded"
            )
            raise self.refusal from None
        if self.flatten_state_dict:
            set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], loaded)
        else:
            self.state_dict[read_item.dest_index.fqn] = loaded
