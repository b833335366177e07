"""Claim -> stage -> publish: the span of one run in its output folder, written once for every
writer of a run's folder (`run`, `pca`, the API's WriteEmbeddings).

    with staged_run(folder, kind, overwrite, command, options) as run:  # claimed, checked
        ...checks that need the claim...           # an error here passes through as it is
        staging = run.stage()                      # leftovers removed, staging folder made
        ...write the whole run into `staging`...
    # left normally: published (run.replaced: the old files); the claim released either way

A block that fails after `stage()` leaves the folder as it was: the staging folder goes
(`StagedRun.abandon`, the one place that decides what of a failed run stays) and the error says
that nothing was published; SIGTERM ends it the same way with the command's STOPPED exit. A
swap cut short (publish's CommandError) keeps the staging folder: its journal tells the next
run which files were a run's (staging.py).

A writer whose steps run apart (a Beam pipeline: one step claims, the last publishes) uses the
StagedRun itself: `StagedRun.open`, `stage`, then `publish` and `release` in the last step,
maybe in another process (the run pickles without its claim's store and releases the claim by
its holder there).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from beam_embed.pipeline.common.run_folder.claim import Claim, Holder, claim_output, release_held
from beam_embed.pipeline.common.run_folder.manifest.folder import OutputKind
from beam_embed.pipeline.common.run_folder.staging import (
    NothingPublished,
    Previous,
    check_output,
    discard,
    make_staging,
    publish,
    remove_leftovers,
    staging_folder,
)
from beam_embed.pipeline.common.settings.errors import CommandError, exit_code, one_line
from beam_embed.process import exits
from beam_embed.process.log import log


class OutputRefused(CommandError):
    """The output folder, checked again under its claim, holds what the run may not replace
    (a run finished there since the first check): bad configuration, said in one line."""

    def __init__(self, message: str):
        super().__init__(message, exits.BAD_CONFIG)


class StagedRun:
    """One run's hold on its output folder: the claim (`holder`), what the run may replace
    there (`previous`, checked under the claim), and its staging folder (`staging`, made by
    `stage`); `replaced`: the old run's files once published."""

    def __init__(self, folder: str, kind: OutputKind, claim: Claim, previous: Previous):
        self.folder, self.kind, self.previous = folder, kind, previous
        self.holder: Holder = claim.holder
        self.taken_over = claim.taken_over
        self.staging = staging_folder(folder, claim.run_id)
        self.staged = False
        self.resumable = kind.resumable
        self.replaced: list[str] | None = None
        self._claim: Claim | None = claim

    @classmethod
    def open(cls, folder: str, kind: OutputKind, overwrite: bool, command: list[str], *,
             options=None, run_id: str | None = None, resume: bool = False,
             resumable: bool | None = None) -> StagedRun:
        """Claims `folder` (OutputBusy names the holder) and checks it again under the claim
        (OutputRefused); `run_id`: the run's own, when its staging folder is named already
        (a resumed run's: the killed run's); `resume`: a killed run's claim is taken over to
        continue it (a live one never is); `resumable`: a failed run's committed work stays
        for a --resume (default: as `kind` says; the Python API's writes have no --resume)."""
        resumable = kind.resumable if resumable is None else resumable
        claim = claim_output(folder, overwrite or resume, command, options=options,
                             run_id=run_id, resumable=resumable)
        try:
            previous = check_output(folder, kind, overwrite)
        except ValueError as e:
            claim.release()
            raise OutputRefused(str(e)) from e
        except BaseException:
            claim.release()
            raise
        run = cls(folder, kind, claim, previous)
        run.resumable = resumable
        return run

    def stage(self, taken_over: str | None = None,
              say: Callable[[str], None] = log, resumed: bool = False) -> str:
        """Removes what killed runs left in the folder (`taken_over`: the run id of a claim
        this run's writer released itself, when its claim took over none), says so, makes the
        run's staging folder; returns it (`resumed`: it is the killed run's this one continues,
        and stays). From here, a failure abandons the run (`abandon`)."""
        keep = self.staging if resumed else None
        for path in remove_leftovers(self.folder, self.taken_over or taken_over, keep):
            say(f"removed {path}, left by a run that did not finish")
        self.staged = True
        make_staging(self.folder, self.holder.run_id)
        return self.staging

    def publish(self) -> list[str]:
        """Swaps the complete run in; a run refused before anything changed is abandoned."""
        try:
            self.replaced = publish(self.staging, self.folder, self.kind, self.previous)
        except NothingPublished:
            self.abandon()
            raise
        return self.replaced

    def abandon(self) -> None:
        """The run failed: its staging folder goes (its id is the run's alone, so whatever is
        there, a Beam step of the run's own may have made it, is the run's), unless the run
        keeps its committed work for a --resume."""
        if not self.keeps_work():
            discard(self.staging)

    def keeps_work(self) -> bool:
        """Whether a failed run's staging folder stays: a job's that committed shard sets,
        which --resume continues (committed_shards.py)."""
        if not (self.resumable and self.staged):
            return False
        from beam_embed.pipeline.common.run_folder.committed_shards import read_commits

        try:
            return bool(read_commits(self.staging))
        except OSError:
            return False

    def release(self) -> None:
        if self._claim is not None:
            self._claim.release()
        else:  # handed to another process: the claim as its holder took it
            release_held(self.folder, self.holder)

    def __getstate__(self) -> dict:
        """Without the claim's store (a Cloud Storage client does not pickle)."""
        return {**self.__dict__, "_claim": None}


@contextlib.contextmanager
def staged_run(folder: str, kind: OutputKind, overwrite: bool, command: list[str],
               options=None, run_id: str | None = None,
               resume: bool = False) -> Iterator[StagedRun]:
    """The run's span in `folder` (see the module's docstring; `run_id`, `resume`: see
    StagedRun.open)."""
    with exits.unwound_on_sigterm() as stopped:
        run = StagedRun.open(folder, kind, overwrite, command, options=options, run_id=run_id,
                             resume=resume)
        try:
            yield run
        except Exception as e:
            if not run.staged:
                raise
            kept = run.keeps_work()
            run.abandon()  # the previous run, if any, is untouched; say where this one stopped
            exits.stopped_by(stopped, e)  # SIGTERM inside a Beam step, which wraps its SystemExit
            then = (f"; the shards it committed are kept in {run.staging}: --resume continues "
                    "the run, --overwrite discards them" if kept else "")
            raise CommandError(f"the run stopped, nothing was published to {folder} (its "
                               f"previous run, if any, is untouched{then}): {one_line(e)}",
                               exit_code(e)) from e
        except BaseException:  # Ctrl-C, SIGTERM: nothing of the run stays behind either
            run.abandon()
            raise
        else:
            if run.staged:
                run.publish()
        finally:
            run.release()
