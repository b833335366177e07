"""One run per output folder: an exclusive claim taken when a run starts, released when it ends.

The claim is a small JSON file in the output folder (`CLAIM`) saying who holds it: a run id,
the host, the process id (and its start time), the user, when it started, the command line. It
is created atomically, so of two runs started at once exactly one gets it:
- local disks: written to a private file, then hard-linked to the claim's name (link() fails
  when the name exists; `open(O_CREAT | O_EXCL)` where links are not supported);
- gs://: an upload with the precondition `if_generation_match=0` (the object must not exist);
- other filesystems: checked, then written (not atomic; a warning says so).
A second run fails at once naming the holder. A claim left by a killed run stays until a run
with `--overwrite` takes it over (replacing exactly the claim it judged stale: a generation
precondition on gs://, a lock and a content check on local disks); a holder on this host whose
process is alive is never taken over.
"""

from __future__ import annotations

import dataclasses
import getpass
import json
import os
import socket
import time
import uuid

from apache_beam.io.filesystems import FileSystems

from pipeline.common import exits
from pipeline.common.errors import CommandError
from pipeline.common.log import log

CLAIM = ".beam-embed-claim.json"


class OutputBusy(CommandError):
    def __init__(self, message: str):
        super().__init__(message, exits.OUTPUT_BUSY)


def _process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


@dataclasses.dataclass(frozen=True)
class Holder:
    run_id: str
    host: str
    pid: int
    process_start: str | None
    user: str
    started_at: str
    command: str

    @classmethod
    def this_process(cls, command: list[str]) -> Holder:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # no user name in a bare container
            user = str(os.getuid())
        return cls(uuid.uuid4().hex[:12], socket.gethostname(), os.getpid(),
                   _process_start(os.getpid()), user,
                   time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), " ".join(command))

    @classmethod
    def parse(cls, data: bytes) -> Holder:
        try:
            fields = json.loads(data)
            return cls(**{f.name: fields.get(f.name) for f in dataclasses.fields(cls)})
        except (ValueError, TypeError):  # an unreadable claim still blocks, and says so
            return cls("unknown", "unknown host", 0, None, "unknown", "unknown time",
                       data[:80].decode("utf-8", "replace"))

    def to_bytes(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), indent=2).encode("utf-8")

    def describe(self) -> str:
        return (f"run {self.run_id} (pid {self.pid} on {self.host}, user {self.user}, started "
                f"{self.started_at}: {self.command})")

    def alive(self) -> bool | None:
        """True/False for a holder on this host; None when it runs elsewhere (unknowable)."""
        if self.host != socket.gethostname() or not self.pid:
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # someone else's live process
            return True
        started = _process_start(self.pid)
        return not (started and self.process_start and started != self.process_start)


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
        from google.api_core.exceptions import PreconditionFailed

        blob = self.bucket.blob(self.name)
        try:
            blob.upload_from_string(data, content_type="application/json",
                                    if_generation_match=generation)
        except PreconditionFailed:
            return None
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
    if "://" not in folder:
        return _LocalStore(folder)
    if folder.startswith("gs://"):
        return _GcsStore(folder, options=options)
    return _OtherStore(folder)


class Claim:
    """Held while a run writes; a context manager that releases it (even on errors)."""

    def __init__(self, store, token, holder: Holder):
        self._store, self._token, self.holder = store, token, holder

    @property
    def run_id(self) -> str:
        return self.holder.run_id

    def release(self) -> None:
        if self._token is not None:
            self._store.delete(self._token)
            self._token = None

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def claim_output(folder: str, overwrite: bool, command: list[str], store=None,
                 options=None) -> Claim:
    """Takes the claim on `folder` (which must exist) or raises OutputBusy naming its holder.
    `options`: the run's PipelineOptions (gs:// credentials and project)."""
    store = store or store_for(folder, options)
    me = Holder.this_process(command)
    if not store.atomic:
        log(f"warning: {folder} is on a filesystem without atomic creates: two runs started at "
            "the same moment into it are not reliably told apart")
    for _ in range(3):  # a holder may release between our create and our read
        token = store.create(me.to_bytes())
        if token is not None:
            return Claim(store, token, me)
        found = store.read()
        if found is None:
            continue
        other = Holder.parse(found[0])
        alive = other.alive()
        if alive:
            raise OutputBusy(f"--output {folder} is in use by {other.describe()}; wait for it "
                             "to finish or choose another --output")
        if not overwrite:
            state = ("is no longer running (killed or crashed)" if alive is False else
                     f"may still be running on {other.host}")
            raise OutputBusy(f"--output {folder} is claimed by {other.describe()}, which "
                             f"{state}; if no run is writing there, pass --overwrite to take "
                             f"it over (the claim is {FileSystems.join(folder, CLAIM)})")
        token = store.replace(me.to_bytes(), found[1])
        if token is not None:
            log(f"took over the claim of {other.describe()} on {folder}")
            return Claim(store, token, me)
    raise OutputBusy(f"--output {folder} is being claimed by another run at the same moment; "
                     "choose another --output or retry")
