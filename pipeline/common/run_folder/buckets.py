"""A gs:// path whose bucket does not exist, said as such (a bad configuration, exit 2).

Beam lists the objects of a missing bucket with "Match operation failed ... NotFound" (an
OSError: the run stopped as if a disk had failed), and a missing bucket holds no manifest.json
as an empty folder does. Listing a bucket's objects is NotFound only when the bucket does not
exist, so a failed listing says it; a read that found nothing asks for the bucket once. Either
way a working command makes no extra request.
"""

from __future__ import annotations


class MissingBucket(ValueError):
    """A path's bucket does not exist."""

    def __init__(self, path: str, bucket: str, flag: str = ""):
        named = f"{flag} {path!r}" if flag else repr(path)
        super().__init__(f"{named}: the bucket {bucket!r} does not exist; check its name")


def bucket_of(path: str) -> str:
    from apache_beam.io.gcp.gcsio import parse_gcs_path

    return parse_gcs_path(path, object_optional=True)[0]


def refuse_if_listing_found_no_bucket(path: str, error: OSError, flag: str = "") -> None:
    """A MissingBucket for the gs:// `path` when `error` (a failed Beam match) came from Cloud
    Storage answering NotFound to a listing: the bucket does not exist. Any other failure is
    left to the caller."""
    if path.startswith("gs://") and _not_found(error):
        raise MissingBucket(path, bucket_of(path), flag) from None


def refuse_missing_bucket(path: str, flag: str = "") -> None:
    """A MissingBucket when the gs:// `path`'s bucket does not exist; nothing when it exists, or
    when Cloud Storage will not say (no permission to look at the bucket: what the caller says
    next stands)."""
    if not path.startswith("gs://"):
        return
    from apache_beam.io.gcp.gcsio import GcsIO
    from google.api_core.exceptions import GoogleAPIError

    bucket = bucket_of(path)
    try:
        found = GcsIO().get_bucket(bucket)
    except GoogleAPIError:  # Forbidden, a retry given up
        return
    if found is None:
        raise MissingBucket(path, bucket, flag)


def _not_found(error: BaseException) -> bool:
    """Whether Cloud Storage's NotFound is among the causes of a Beam IO error (BeamIOError keeps
    each path's exception in `exception_details`, nested for a match of several prefixes)."""
    from google.api_core.exceptions import NotFound

    if isinstance(error, NotFound):
        return True
    details = getattr(error, "exception_details", None)
    return isinstance(details, dict) and any(_not_found(e) for e in details.values()
                                             if isinstance(e, BaseException))
