"""Record model calls into artifactd, and replay them without the model."""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional

from .canonical import sha256_digest
from .client import ArtifactdError, Client, NotFound

RECORD = "record"
REPLAY = "replay"


class ReplayMiss(ArtifactdError):
    """A replayed call that was never recorded. The model was not called."""

    def __init__(self, request_hash: str, context: str):
        self.request_hash, self.context = request_hash, context
        super().__init__(f"replay: no recorded model call {request_hash} in context {context!r}; record it first (the model was not called)")


def model_request(model: str, messages: Any = None, parameters: Any = None, tools: Any = None) -> Dict[str, Any]:
    """The request object that is recorded and hashed: members that are
    None are left out, everything else is hashed as given."""
    req: Dict[str, Any] = {"model": model}
    for k, v in (("parameters", parameters), ("messages", messages), ("tools", tools)):
        if v is not None:
            req[k] = v
    return req


def request_hash(request: Mapping[str, Any]) -> str:
    """"sha256:<hex>" of the RFC 8785 canonical JSON of the request."""
    return sha256_digest(dict(request))


class ModelRecorder:
    """Answers model calls in ``record`` mode (call the model, record the
    call) or ``replay`` mode (answer from the record in ``source``, never
    call the model; a miss raises :class:`ReplayMiss`). Both modes write the
    model_call artifact into ``context``, so a replayed run reaches the same
    context hash as the recorded one."""

    def __init__(self, client: Client, context: str, mode: str = RECORD, source: Optional[str] = None,
                 produced_by: str = "model"):
        if mode not in (RECORD, REPLAY):
            raise ValueError("mode must be 'record' or 'replay'")
        self.client, self.context, self.mode = client, context, mode
        self.source = source or context
        self.produced_by = produced_by

    def call(self, request: Mapping[str, Any], model: Callable[[Mapping[str, Any]], Any]) -> Any:
        """Return the response to ``request``."""
        req = dict(request)
        if not isinstance(req.get("model"), str) or not req["model"]:
            raise ValueError("request needs a model name")
        h = request_hash(req)
        if self.mode == REPLAY:
            try:
                response = self.client.model_call(self.source, h)["response"]
            except NotFound:
                raise ReplayMiss(h, self.source) from None
        else:
            response = model(req)
        self.client.put_artifact(self.context, "model_call", id="model_call:" + h[len("sha256:"):], produced_by=self.produced_by,
                                 data={"model": req["model"], "request_hash": h, "request": req, "response": response})
        return response
