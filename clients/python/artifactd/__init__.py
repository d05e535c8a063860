"""artifactd: a dependency-free client of the artifactd HTTP API."""

from .canonical import CanonicalError, canonicalize, sha256_digest
from .client import (AnswerTooLarge, ArtifactdError, Client, CommitOutcomeUnknown, FieldError, NotFound, Problem,
                     Quarantined, StaleParent, TransportError)
from .modelcalls import RECORD, REPLAY, ModelRecorder, ReplayMiss, model_request, request_hash

__all__ = [
    "AnswerTooLarge", "ArtifactdError", "CanonicalError", "Client", "CommitOutcomeUnknown", "FieldError", "ModelRecorder",
    "NotFound", "Problem", "Quarantined", "RECORD", "REPLAY", "ReplayMiss", "StaleParent", "TransportError",
    "canonicalize", "model_request", "request_hash", "sha256_digest",
]
__version__ = "0.1.0"
