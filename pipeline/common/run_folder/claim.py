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

from beam_embed.pipeline.common.run_folder.claim_stores import CLAIM, store_for
from beam_embed.pipeline.common.settings.errors import CommandError
from beam_embed.process import exits
from beam_embed.process.log import log


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
    def this_process(cls, command: list[str], run_id: str | None = None) -> Holder:
        """`run_id`: the run's own when it has one already (a writer that named its staging
        folder before it claimed the output); a new one otherwise."""
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # no user name in a bare container
            user = str(os.getuid())
        return cls(run_id or uuid.uuid4().hex[:12], socket.gethostname(), os.getpid(),
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


class Claim:
    """Held while a run writes; a context manager that releases it (even on errors).
    `taken_over`: the run id of the killed run whose claim this one replaced, if any (that run's
    staging folder is provably a run's to remove: beam_embed.pipeline.common.run_folder.staging)."""

    def __init__(self, store, token, holder: Holder, taken_over: str | None = None):
        self._store, self._token, self.holder = store, token, holder
        self.taken_over = taken_over

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


def _create(store, me: Holder, folder: str):
    """The store's create, a folder nothing can be written to said as such (exit 2), not as
    the claim's own temporary file."""
    try:
        return store.create(me.to_bytes())
    except OSError as e:
        raise CommandError(f"--output {folder!r} is not writable ({e.strerror or e})",
                           exits.BAD_CONFIG) from e


def claim_output(folder: str, overwrite: bool, command: list[str], store=None,
                 options=None, run_id: str | None = None, resumable: bool = False) -> Claim:
    """Takes the claim on `folder` (which must exist) or raises OutputBusy naming its holder.
    `options`: the run's PipelineOptions (gs:// credentials and project); `run_id`: see
    Holder.this_process; `resumable`: a dead claim's message names --resume beside
    --overwrite."""
    store = store or store_for(folder, options)
    me = Holder.this_process(command, run_id)
    if not store.atomic:
        log(f"warning: {folder} is on a filesystem without atomic creates: two runs started at "
            "the same moment into it are not reliably told apart")
    for _ in range(3):  # a holder may release between our create and our read
        token = _create(store, me, folder)
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
            choice = ("pass --resume to continue it (the shards it committed are kept) or "
                      "--overwrite to discard its work" if resumable else
                      "pass --overwrite to take it over")
            raise OutputBusy(f"--output {folder} is claimed by {other.describe()}, which "
                             f"{state}; if no run is writing there, {choice} (the claim is "
                             f"{FileSystems.join(folder, CLAIM)})")
        token = store.replace(me.to_bytes(), found[1])
        if token is not None:
            log(f"took over the claim of {other.describe()} on {folder}")
            return Claim(store, token, me, taken_over=other.run_id)
    raise OutputBusy(f"--output {folder} is being claimed by another run at the same moment; "
                     "choose another --output or retry")


def release_held(folder: str, holder: Holder, options=None) -> None:
    """Releases the claim on `folder` if `holder` still holds it, from a process other than the
    one that took it (a pipeline's last step): the store compares the token it read, so a
    claim taken over since is left alone."""
    store = store_for(folder, options)
    found = store.read()
    if found is not None and Holder.parse(found[0]).run_id == holder.run_id:
        Claim(store, found[1], holder).release()
