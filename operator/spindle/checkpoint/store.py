"""The checkpoint store of one pipeline: the only code that reads or writes checkpoint metadata.

Layout under the pipeline root (`<uri>/<namespace>/<name>/`):

    checkpoints/<id>/manifest.json   one per checkpoint, written create-only
    latest                           {"checkpoint": <id>}: swapped by compare-and-swap
    previews/<change id>.json        a data-diff preview's report (replaced by a newer one)
    state/...                        Delta tables, written by the runtime before a commit

Commit: (1) everything the manifest references is already written; (2) the manifest is written
create-only; (3) `latest` is swapped with `If-Match` on the ETag it had when the parent was read
(or `If-None-Match: *` for the first checkpoint). A lost race is `CheckpointConflict`, naming the
winner; nothing is overwritten. A manifest no pointer reaches is an orphan: readers never see it
and `gc` removes it once it is older than the grace period.
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from spindle.checkpoint.manifest import (
    Manifest,
    PipelineRef,
    load_manifest,
    new_checkpoint_id,
    new_incarnation,
    unreadable,
)
from spindle.checkpoint.objects import (
    Listed,
    NotModified,
    ObjectNotFound,
    ObjectStore,
    PreconditionFailed,
    S3Options,
    invalid_uri,
    join,
    open_objects,
    relative,
)
from spindle.checkpoint.retention import intent_sequence, kept_prefix
from spindle.checkpoint.retry import RetryPolicy
from spindle.errors import SpindleError
from spindle.plan.preview import PreviewReport

LATEST = "latest"
ORPHAN_GRACE = datetime.timedelta(hours=1)
SCRATCH_GRACE = datetime.timedelta(days=1)
"""A preview's scratch (`scratch/<location>/`, which the preview deletes when it ends) whose
newest object is this old was left by a preview that never ended: killed, evicted, its node
lost. Retention deletes it."""
_PROVEN: set[str] = set()
"""Store URIs whose conditional writes were proven in this process."""


def intent_key(sequence: int) -> str:
    """Where step `sequence`'s intent is recorded."""
    return f"intents/{sequence:08d}.json"


def undone_key(sequence: int) -> str:
    """Where step `sequence`'s undone outputs are recorded, beside its intent."""
    return f"intents/{sequence:08d}.undone.json"


INCARNATION = "incarnation"
"""Where a pipeline's storage holds its incarnation id (`CheckpointStore.incarnation`)."""


def manifest_key(checkpoint_id: str) -> str:
    return f"checkpoints/{checkpoint_id}/manifest.json"


def preview_key(change_id: str) -> str:
    return f"previews/{change_id}.json"


def pipeline_root(uri: str, *, namespace: str, name: str) -> str:
    """Where one pipeline's checkpoints and state live under a storage URI (a manifest's:
    a relative local path is refused, as each command would read it from its own directory)."""
    if relative(uri):
        raise invalid_uri(
            uri,
            "a local path must be absolute (file:///path or /path); a relative one would be "
            "read from the directory each command runs in",
        )
    return join(uri, namespace, name)


@dataclass(frozen=True)
class Pointer:
    checkpoint: str
    etag: str


@dataclass
class CheckpointStore:
    objects: ObjectStore
    after_commit: list[Callable[[Manifest], None]] = field(default_factory=list, repr=False)
    """Called with each checkpoint once it is the latest (the runtime's retention and vacuum)."""
    _pointer: Pointer | None = field(default=None, repr=False)
    _head: tuple[Pointer, Manifest] | None = field(default=None, repr=False)
    """The latest checkpoint as last read, with the pointer that named it: `latest` asks for
    the pointer only if its ETag moved, and reads the manifest again only then."""
    attempted: str | None = field(default=None, repr=False)
    """The id of the last manifest this process set out to commit, whether or not it was."""

    @property
    def uri(self) -> str:
        return self.objects.uri

    def manifest_uri(self, checkpoint_id: str) -> str:
        return join(self.uri, manifest_key(checkpoint_id))

    # -- reading -----------------------------------------------------------------------------

    def _read_pointer(self, *, unless: Pointer | None = None) -> Pointer | None:
        """The `latest` pointer; `unless` itself (not read again) when its ETag is unchanged."""
        try:
            blob = self.objects.read(LATEST, if_none_match=unless.etag if unless else None)
        except ObjectNotFound:
            return None
        except NotModified:
            return unless
        try:
            checkpoint = str(json.loads(blob.data)["checkpoint"])
        except (ValueError, KeyError, TypeError):
            raise unreadable(join(self.uri, LATEST), "the latest pointer is corrupt") from None
        return Pointer(checkpoint, blob.etag)

    def latest(self) -> Manifest | None:
        """The latest checkpoint, or None when the pipeline has none yet. Asked again, it costs
        one conditional read while the pointer has not moved (manifests never change)."""
        head = self._head
        pointer = self._read_pointer(unless=head[0] if head else None)
        self._pointer = pointer
        if pointer is None:
            self._head = None
            return None
        if head is not None and head[0] == pointer:
            return head[1]
        manifest = self.get(pointer.checkpoint)
        self._head = (pointer, manifest)
        return manifest

    def get(self, checkpoint_id: str) -> Manifest:
        key = manifest_key(checkpoint_id)
        try:
            blob = self.objects.read(key)
        except ObjectNotFound:
            raise SpindleError(
                reason="CheckpointNotFound",
                message=f"Checkpoint {checkpoint_id} does not exist at {self.uri}. List the "
                "checkpoints with `spindle checkpoints list` and pick one that exists.",
                details={"uri": self.uri, "checkpoint": checkpoint_id},
            ) from None
        return load_manifest(blob.data, uri=join(self.uri, key))

    def history(self) -> list[Manifest]:
        """The latest checkpoint and its ancestors, newest first (as far as they still exist)."""
        return list(self._walk())

    def survey(self) -> tuple[list[Manifest], dict[str, str]]:
        """Every checkpoint stored, newest first, and those that cannot be read (id: why):
        one listing of `checkpoints/`, for when `history` cannot walk past a damaged one."""
        readable: list[Manifest] = []
        damaged: dict[str, str] = {}
        for item in self.objects.scan("checkpoints/"):
            parts = item.key.split("/")
            if len(parts) != 3 or parts[2] != "manifest.json":
                continue
            try:
                readable.append(self.get(parts[1]))
            except SpindleError as error:
                if error.reason == "CheckpointNotFound":  # collected meanwhile
                    continue
                damaged[parts[1]] = error.message
        readable.sort(key=lambda m: (m.sequence, m.created_at), reverse=True)
        return readable, damaged

    def _walk(self, start: Manifest | None = None) -> Iterator[Manifest]:
        current = self.latest() if start is None else start
        while current is not None:
            yield current
            if current.parent is None:
                return
            try:
                current = self.get(current.parent)
            except SpindleError as error:
                if error.reason == "CheckpointNotFound":
                    return  # collected by gc
                raise

    # -- writing -----------------------------------------------------------------------------

    def self_test(self) -> None:
        """Prove the store honours create-only and compare-and-swap writes, or refuse it."""
        if self.uri in _PROVEN:
            return
        probe = f".spindle/selftest/{uuid.uuid4().hex}"
        problems = []
        try:
            etag = self.objects.write(probe, b"1", if_none_match=True)
            try:
                self.objects.write(probe, b"2", if_none_match=True)
                problems.append("a create-only write (If-None-Match: *) overwrote an object")
            except PreconditionFailed:
                pass
            try:
                self.objects.write(probe, b"3", if_match='"not-the-etag"')
                problems.append("a compare-and-swap write (If-Match) ignored a wrong ETag")
            except PreconditionFailed:
                pass
            try:
                self.objects.write(probe, b"4", if_match=etag)
            except PreconditionFailed:
                problems.append("a compare-and-swap write (If-Match) refused the right ETag")
        finally:
            self.objects.delete([probe])
        if problems:
            raise SpindleError(
                reason="ConditionalWritesUnsupported",
                message=f"The store at {self.uri} does not honour conditional writes "
                f"({'; '.join(problems)}), so checkpoints could be silently overwritten. Use "
                "an S3 service with conditional writes (AWS S3, MinIO, versitygw, ...).",
                details={"uri": self.uri, "problems": problems},
            )
        _PROVEN.add(self.uri)

    def commit(self, manifest: Manifest) -> Manifest:
        """Publish `manifest` as the new latest checkpoint, if its parent is still the latest.
        Committing it again is a no-op: a write whose answer was lost and that is retried
        (by the store's retries, or a driver's) finds its own manifest and pointer, and is no
        conflict."""
        self.attempted = manifest.id
        self.self_test()
        key = manifest_key(manifest.id)
        text = manifest.to_json()
        try:
            self.objects.write(key, text, if_none_match=True)
        except PreconditionFailed:
            if self.objects.read(key).data != text:
                raise self._conflict(
                    manifest, f"checkpoint id {manifest.id} already exists"
                ) from None
        pointer = self._pointer if self._pointer is not None else self._read_pointer()
        if pointer is not None and pointer.checkpoint == manifest.id:
            pointer = self._read_pointer()  # not the cache's word: is it still the latest?
        current = pointer.checkpoint if pointer else None
        if current != manifest.parent and current != manifest.id:
            raise self._conflict(manifest, f"the latest checkpoint is {current}")
        body = json.dumps({"checkpoint": manifest.id}).encode()
        try:
            if pointer is None:
                etag = self.objects.write(LATEST, body, if_none_match=True)
            elif current == manifest.id:
                etag = pointer.etag  # published already: an earlier answer was lost
            else:
                etag = self.objects.write(LATEST, body, if_match=pointer.etag)
        except PreconditionFailed:
            winner = self._read_pointer()
            if winner is None or winner.checkpoint != manifest.id:
                raise self._conflict(
                    manifest, f"the latest checkpoint is {winner.checkpoint if winner else None}"
                ) from None
            etag = winner.etag  # this commit's own: it landed, and only its answer was lost
        self._pointer = Pointer(manifest.id, etag)
        self._head = (self._pointer, manifest)
        for listener in self.after_commit:
            listener(manifest)
        return manifest

    def _conflict(self, manifest: Manifest, what: str) -> SpindleError:
        winner = self._read_pointer()
        return SpindleError(
            reason="CheckpointConflict",
            message=f"Another writer committed to {self.uri} first ({what}); checkpoint "
            f"{manifest.id} was not published. Make sure only one driver runs for this "
            "pipeline, then restart it from the latest checkpoint.",
            details={
                "uri": self.uri,
                "checkpoint": manifest.id,
                "expected_parent": manifest.parent,
                "winner": winner.checkpoint if winner else None,
            },
        )

    # -- starting from another checkpoint ----------------------------------------------------

    def located(self, checkpoint_id: str) -> Manifest:
        """The checkpoint with its state named by absolute URI: as another pipeline sees it."""
        origin = self.get(checkpoint_id)
        state = {
            name: record.model_copy(
                update={"path": record.path if record.adopted else join(self.uri, record.path)}
            )
            for name, record in origin.state.items()
        }
        return origin.model_copy(update={"state": state})

    def adopt(
        self, source: CheckpointStore, checkpoint_id: str, *, pipeline: PipelineRef
    ) -> Manifest:
        """Start this pipeline from `source`'s checkpoint (another root's: another pipeline's,
        or a backup's; `origin.starting_checkpoint` refuses this pipeline's own): commit a
        manifest that names the source state by absolute URI, so it is read but never written,
        and records where it came from."""
        origin = source.located(checkpoint_id)
        current = self.latest()
        sequence = 0 if current is None else current.sequence + 1
        incarnation = self.incarnation() if current is None else current.incarnation
        adopted = origin.model_copy(
            update={
                "id": new_checkpoint_id(sequence),
                "parent": None if current is None else current.id,
                "sequence": sequence,
                "created_at": datetime.datetime.now(datetime.UTC),
                "pipeline": pipeline,
                "bootstrap": None,
                "origin": f"{source.uri}#{checkpoint_id}",
                "incarnation": incarnation,
            }
        )
        return self.commit(Manifest.model_validate(adopted.model_dump()))

    def incarnation(self) -> str:
        """This storage's incarnation id, made (create-only) the first time it is asked for:
        by a pipeline's first checkpoint, before it writes to an output, so a first start
        that crashed and runs again writes as the same incarnation. Storage made anew (a new
        URI, or deleted with its pipeline) makes another. Only on a store whose create-only
        writes are proven: otherwise two attempts could each make their own."""
        self.self_test()
        made = new_incarnation()
        try:
            self.objects.write(INCARNATION, made.encode(), if_none_match=True)
        except PreconditionFailed:
            made = self.objects.read(INCARNATION).data.decode(errors="replace").strip()
        if not made.isalnum():
            raise SpindleError(
                reason="CheckpointUnreadable",
                message=f"The incarnation id at {join(self.uri, INCARNATION)} is corrupt. "
                "It is read before the pipeline's first checkpoint only: delete it, and the "
                "first start makes another (what an earlier attempt of it wrote to Delta "
                "outputs is then not undone), or restore it from a backup.",
                details={"uri": join(self.uri, INCARNATION)},
            )
        return made

    # -- previews ----------------------------------------------------------------------------

    def write_preview(self, report: PreviewReport) -> str:
        """Keep a preview's report beside the checkpoints (the last one of a change wins);
        returns its URI. Previews of other changes are removed: only the newest matters."""
        key = preview_key(report.change_id)
        self.objects.write(key, json.dumps(report.to_json(), indent=2).encode())
        stale = [i.key for i in self.objects.scan("previews/") if i.key != key]
        self.objects.delete(stale)
        return join(self.uri, key)

    def latest_preview(self) -> PreviewReport | None:
        """The newest preview's report, of whichever change it was (None: never previewed)."""
        found = sorted(self.objects.scan("previews/"), key=lambda i: i.modified)
        for item in reversed(found):
            try:
                body = json.loads(self.objects.read(item.key).data)
                return PreviewReport.from_json(body)
            except ObjectNotFound:
                continue  # replaced meanwhile
            except (ValueError, KeyError, TypeError, AttributeError):  # AttributeError: a list
                where = join(self.uri, item.key)
                raise unreadable(where, "the preview report is corrupt") from None
        return None

    # -- step intents ------------------------------------------------------------------------

    def record_intent(
        self, sequence: int, intent: dict[str, object]
    ) -> tuple[dict[str, object], bool]:
        """Record, create-only, what step `sequence` ingests; a replay after a crash reads the
        same intent back, so the replayed step produces exactly the same state and outputs.
        Returns the intent, and whether it was recorded before (this is a replay)."""
        key = intent_key(sequence)
        try:
            self.objects.write(key, json.dumps(intent, sort_keys=True).encode(), if_none_match=True)
            return intent, False
        except PreconditionFailed:
            try:
                recorded = json.loads(self.objects.read(key).data)
            except ValueError:
                recorded = None
            if not isinstance(recorded, dict) or not all(
                isinstance(recorded.get(field), type(value)) for field, value in intent.items()
            ):
                where = join(self.uri, key)
                raise SpindleError(
                    reason="CheckpointUnreadable",
                    message=f"The intent of step {sequence}, which did not commit, at {where} "
                    "is corrupt. Restore it from a backup; or delete it to run the step afresh "
                    "(a Delta output the interrupted attempt wrote to then keeps that attempt's "
                    "changes for the step, which may differ from the new attempt's).",
                    details={"uri": where},
                ) from None
            return recorded, True

    def has_intent(self, sequence: int) -> bool:
        """Whether step `sequence` recorded its intent: an attempt of it began (and, when no
        checkpoint of that sequence is committed, did not finish)."""
        try:
            self.objects.read(intent_key(sequence))
        except ObjectNotFound:
            return False
        return True

    def undone_outputs(self, sequence: int) -> dict[str, tuple[int, str]]:
        """The Delta outputs whose commit of step `sequence` a bootstrap undid, or set out to
        undo: each output connector's table version and writer of that commit (none: empty).
        Delta keeps an undone commit's writer and sequence (`txnAppId`, `txnVersion`) and skips
        a later write of the same pair, so the step's replay writes to these as another."""
        key = undone_key(sequence)
        try:
            recorded = json.loads(self.objects.read(key).data)["outputs"]
            return {
                str(connector): (int(commit["version"]), str(commit["writer"]))
                for connector, commit in recorded.items()
            }
        except ObjectNotFound:
            return {}
        except (ValueError, KeyError, TypeError, AttributeError):
            where = join(self.uri, key)
            raise unreadable(where, "the record of undone outputs is corrupt") from None

    def record_undone_outputs(self, sequence: int, outputs: Mapping[str, tuple[int, str]]) -> None:
        """Record, before the undo is done, which outputs' commits of step `sequence` are
        being undone (`undone_outputs`): a crash after the undo must not leave the replay
        writing as the undone writer, which Delta would skip, losing the rows."""
        recorded = {key: {"version": v, "writer": w} for key, (v, w) in outputs.items()}
        body = json.dumps({"outputs": recorded}, sort_keys=True).encode()
        self.objects.write(undone_key(sequence), body)

    # -- housekeeping ------------------------------------------------------------------------

    def retire(
        self,
        latest: Manifest,
        *,
        checkpoints: int,
        min_age: datetime.timedelta,
        now: datetime.datetime | None = None,
    ) -> list[Manifest]:
        """Apply retention from `latest` (just committed): delete the manifests of checkpoints
        beyond it, oldest first, so a crash midway leaves an unbroken chain; then orphan
        manifests past the grace period and the intents of steps before the oldest kept one.
        Returns the kept checkpoints, newest first: the state they name is what stays live.
        State is not touched here (the runtime's vacuum removes what no kept one names)."""
        now = now or datetime.datetime.now(datetime.UTC)
        history = list(self._walk(latest))
        kept = history[: kept_prefix(history, checkpoints=checkpoints, min_age=min_age, now=now)]
        for manifest in reversed(history[len(kept) :]):
            self.objects.delete([manifest_key(manifest.id)])
        chain = {m.id for m in history}
        orphans = [
            item.key
            for item in self.objects.scan("checkpoints/")
            if item.key.split("/")[1] not in chain and now - item.modified >= ORPHAN_GRACE
        ]
        oldest = kept[-1].sequence
        done = [
            item.key
            for item in self.objects.scan("intents/")
            if (sequence := intent_sequence(item.key)) is not None and sequence < oldest
        ]
        self.objects.delete(orphans + done + self._abandoned_scratch(now))
        return kept

    def _abandoned_scratch(self, now: datetime.datetime) -> list[str]:
        """The objects of scratch locations no object of which was written for `SCRATCH_GRACE`."""
        locations: dict[str, list[Listed]] = {}
        for item in self.objects.scan("scratch/"):
            locations.setdefault("/".join(item.key.split("/")[:2]), []).append(item)
        return [
            item.key
            for items in locations.values()
            if now - max(i.modified for i in items) >= SCRATCH_GRACE
            for item in items
        ]


def open_store(
    uri: str,
    *,
    namespace: str | None = None,
    name: str | None = None,
    s3: S3Options | None = None,
    retry: RetryPolicy | None = None,
) -> CheckpointStore:
    """The store of one pipeline: `<uri>/<namespace>/<name>/`, or `uri` itself when both are
    omitted (a URI that already names a pipeline root)."""
    root = pipeline_root(uri, namespace=namespace, name=name) if namespace and name else uri
    return CheckpointStore(open_objects(root, s3=s3, retry=retry))
