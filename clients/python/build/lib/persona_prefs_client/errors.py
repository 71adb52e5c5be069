"""What can go wrong, as exceptions that say whether to retry.

The service answers every request: success, or `{"error": {"code", "kind", "message"}}` with the
status in the `Nats-Service-Error-Code` header (docs/PROTOCOL.md, "Errors").
"""

from typing import Any, Dict, Optional


class PersonaPrefsError(Exception):
    """Anything this client raises."""


class NoService(PersonaPrefsError):
    """Nothing answers on the subject: no `persona-prefs serve` is running, or NATS is unreachable."""


class Timeout(PersonaPrefsError):
    """No reply within the client's timeout."""


class ServiceError(PersonaPrefsError):
    """The service answered with an error: `code` (HTTP-like status), `kind` (`invalid`,
    `malformed`, `not_found`, `unavailable`, ...) and `message` (which names the field at fault)."""

    def __init__(self, code: int, kind: str, message: str) -> None:
        super().__init__(f"{code} {kind}: {message}")
        self.code = code
        self.kind = kind
        self.message = message


class InvalidRequest(ServiceError):
    """400: the request breaks a limit or the protocol; sending it again will not help."""


class NotFound(ServiceError):
    """404: no such preference for this persona."""


class Unavailable(ServiceError):
    """503: Redis or the embedder unreachable, or the persona busy; worth retrying."""


class InternalError(ServiceError):
    """500: anything else."""


def from_reply(headers: Optional[Dict[str, str]], body: Any) -> Optional[ServiceError]:
    """The error a reply carries, or None for a success."""
    headers = headers or {}
    error = body.get("error") if isinstance(body, dict) else None
    if "Nats-Service-Error-Code" not in headers and not isinstance(error, dict):
        return None
    error = error if isinstance(error, dict) else {}
    code = int(headers.get("Nats-Service-Error-Code", error.get("code", 500)))
    kind = str(error.get("kind", "unknown"))
    message = str(error.get("message", headers.get("Nats-Service-Error", "")))
    if code == 503:
        return Unavailable(code, kind, message)
    if code == 404:
        return NotFound(code, kind, message)
    if 400 <= code < 500:
        return InvalidRequest(code, kind, message)
    return InternalError(code, kind, message)
