"""The replies' shapes (docs/PROTOCOL.md), for type checkers. Replies are plain dicts."""

import sys
from typing import Dict, List, Optional

if sys.version_info >= (3, 11):
    from typing import NotRequired, TypedDict
else:  # pragma: no cover - older Pythons
    from typing_extensions import NotRequired, TypedDict


class InjectedPreference(TypedDict):
    id: str
    name: str
    opinion: str
    category: str
    strength: float
    decayed_strength: float
    relevance: float
    score: float
    matched_by: List[str]
    inherited_from: NotRequired[str]


class InjectReply(TypedDict):
    persona_id: str
    preferences: List[InjectedPreference]
    rendered: str
    semantic_skipped: NotRequired[str]
    took_ms: float


class DraftOpinion(TypedDict):
    topic: str
    opinion: str
    stance: str
    evidence: str


class CheckFinding(TypedDict):
    preference_id: str
    name: str
    stored_opinion: str
    stored_stance: NotRequired[str]
    inherited_from: NotRequired[str]
    similarity: float
    draft: DraftOpinion


class CheckReply(TypedDict):
    persona_id: str
    contradicts: List[CheckFinding]
    restates: List[CheckFinding]
    new: List[DraftOpinion]
    took_ms: float


class Preference(TypedDict, total=False):
    """A stored preference (`get`, `list`, `add`); the fields of docs/PROTOCOL.md."""

    id: str
    persona_id: str
    name: str
    opinion: str
    category: str
    stance: Optional[str]
    strength: float
    decayed_strength: float
    active: bool
    version: int
    reinforcement_count: int
    created_at: str
    last_reinforced: str
    triggering_user_id: str
    triggering_message_id: str
    related_user_ids: List[str]
    related_kg_uuids: List[str]
    evolution_history: List[Dict[str, object]]
    reinforcements: List[Dict[str, object]]


class Stats(TypedDict):
    persona_id: str
    total: int
    active: int
    retracted: int
    by_category: Dict[str, int]


class PublishAck(TypedDict):
    stream: str
    seq: int
    duplicate: bool
