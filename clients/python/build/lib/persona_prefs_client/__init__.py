"""An async, typed client of persona-prefs over NATS (docs/PROTOCOL.md)."""

from .client import ROLES, PersonaPrefs
from .errors import (
    InternalError,
    InvalidRequest,
    NoService,
    NotFound,
    PersonaPrefsError,
    ServiceError,
    Timeout,
    Unavailable,
)

__all__ = [
    "PersonaPrefs",
    "ROLES",
    "PersonaPrefsError",
    "NoService",
    "Timeout",
    "ServiceError",
    "InvalidRequest",
    "NotFound",
    "Unavailable",
    "InternalError",
]
