"""Where a claim lives: one store per kind of filesystem, each creating the claim file
atomically where the filesystem allows it (pipeline/common/run_folder/claim.py says what a claim
is).

Every store has create(data) -> token | None (None: the claim exists), read() -> (data, token)
| None, replace(data, token) -> token | None (None: it is no longer the claim read) and
delete(token); a token is what the store compares before it replaces or deletes a claim.
"""

from __future__ import annotations

import errno
import os
import uuid

from apache_beam.io.filesystems import FileSystems

from beam_embed.models.hub_loader import is_remote

CLAIM = ".beam-embed-claim.json"


class _LocalStore:
    """The claim file on a local disk. A lock on the folder serializes take-overs and releases
    on this host, so a claim is only ever replaced or deleted by content its caller read."""

    atomic = True

    def __init__(self, folder: str):
        self.folder, self.path = folder, os.path.join(folder, CLAIM)

    def create(self, data: bytes):
        """Written in full to a private file, then linked to the claim's name: link() fails
        when the name exists, so the claim appears atomically and never half-written."""
        tmp = f"{self.path}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, self.path)
        except FileExistsError:
            return None
        except OSError:  # a filesystem without hard links: exclusive create instead
            return self._create_exclusive(data)
        finally:
            os.remove(tmp)
        return data

    def _create_exclusive(self, data: bytes):
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return None
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return data

    def read(self):
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        return data, data

    def _locked(self, action):
        import fcntl

        fd = os.open(self.folder, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            return action()
        finally:
            os.close(fd)  # closing releases the lock

    def replace(self, data: bytes, token):
        def swap():
            found = self.read()
            if found is None or found[1] != token:
                return None
            tmp = f"{self.path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, self.path)
            return data
        return self._locked(swap)

    def delete(self, token) -> None:
        def remove():
            found = self.read()
            if found is not None and found[1] == token:
                os.remove(self.path)
        self._locked(remove)


class _GcsStore:
    """The claim object on gs://; the object's generation is the token of every precondition."""

    atomic = True

    def __init__(self, folder: str, client=None, options=None):
        from apache_beam.io.gcp.gcsio import parse_gcs_path

        bucket, prefix = parse_gcs_path(folder.rstrip("/") + "/", object_optional=True)
        if client is None:  # the credentials and project the run's own options name
            from apache_beam.io.gcp.gcsio import create_storage_client
            from apache_beam.options.pipeline_options import PipelineOptions

            client = create_storage_client(options or PipelineOptions())
        self.bucket = client.bucket(bucket)
        self.name = prefix + CLAIM

    def _upload(self, data: bytes, generation: int):
        from google.api_core.exceptions import Forbidden, PreconditionFailed

        blob = self.bucket.blob(self.name)
        try:
            blob.upload_from_string(data, content_type="application/json",
                                    if_generation_match=generation)
        except PreconditionFailed:
            return None
        except Forbidden as e:  # said as a local disk says it: the folder is not writable
            raise PermissionError(errno.EACCES, f"permission denied: {e.message}") from e
        return blob.generation

    def create(self, data: bytes):
        return self._upload(data, 0)  # 0: only if no live object exists

    def read(self):
        from google.api_core.exceptions import NotFound, PreconditionFailed

        blob = self.bucket.get_blob(self.name)
        if blob is None:
            return None
        try:
            return blob.download_as_bytes(if_generation_match=blob.generation), blob.generation
        except (NotFound, PreconditionFailed):  # replaced or released while we looked
            return None

    def replace(self, data: bytes, token):
        return self._upload(data, token)

    def delete(self, token) -> None:
        from google.api_core.exceptions import NotFound, PreconditionFailed

        try:
            self.bucket.delete_blob(self.name, if_generation_match=token)
        except (NotFound, PreconditionFailed):
            pass


class _OtherStore:
    """Any other Beam filesystem: no atomic create is known, so a check, then a write."""

    atomic = False

    def __init__(self, folder: str):
        self.path = FileSystems.join(folder, CLAIM)

    def read(self):
        if not FileSystems.exists(self.path):
            return None
        with FileSystems.open(self.path) as f:
            data = f.read()
        return data, data

    def _write(self, data: bytes):
        with FileSystems.create(self.path) as f:
            f.write(data)
        return data

    def create(self, data: bytes):
        return None if FileSystems.exists(self.path) else self._write(data)

    def replace(self, data: bytes, token):
        found = self.read()
        return self._write(data) if found is not None and found[1] == token else None

    def delete(self, token) -> None:
        found = self.read()
        if found is not None and found[1] == token:
            FileSystems.delete([self.path])


def store_for(folder: str, options=None):
    if not is_remote(folder):
        return _LocalStore(folder)
    if folder.startswith("gs://"):
        return _GcsStore(folder, options=options)
    return _OtherStore(folder)
