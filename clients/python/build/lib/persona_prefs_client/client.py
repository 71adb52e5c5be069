"""The client: one NATS connection, one method per endpoint of docs/PROTOCOL.md."""

import asyncio
import json
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, cast

import nats
from nats.aio.client import Client as Nats
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from .errors import InvalidRequest, NoService, Timeout, Unavailable, from_reply
from .types import CheckReply, InjectReply, Preference, PublishAck, Stats

PERSONA_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

#: The role token each endpoint's subject carries (docs/PERMISSIONS.md).
ROLES: Dict[str, str] = {
    "inject": "read",
    "check": "read",
    "get": "read",
    "list": "read",
    "stats": "read",
    "search": "read",
    "bases": "read",
    "personas": "read",
    "add": "write",
    "reinforce": "write",
    "evolve": "write",
    "retract": "write",
    "set_bases": "write",
    "restore": "write",
    "consolidate": "write",
    "purge_user": "erase",
    "purge_user_everywhere": "erase",
    "delete_persona": "erase",
}

#: Endpoints whose subject names the tenant only: they list or walk the personas.
TENANT_WIDE = {"personas", "purge_user_everywhere"}


class PersonaPrefs:
    """A persona-prefs client over a NATS connection.

    Each method sends one request and returns the decoded reply, or raises: `InvalidRequest`
    (400), `NotFound` (404), `InternalError` (500), `Unavailable` (503, after `retries` more
    tries with a doubling wait from `backoff` seconds), `NoService` (nothing answers) or
    `Timeout` (no reply within `timeout` seconds). All are `PersonaPrefsError`s.

    `subject_prefix`, `tenant` and `events_prefix` are the service's `serve.subject_prefix`,
    `serve.tenant` and `ingest.subject_prefix`. Each request goes to the subject of the persona
    it names (`<subject_prefix>.<role>.<endpoint>.<tenant>.<persona_id>`), so NATS permissions
    can hold this client to its personas; a persona id that is no subject token raises
    `InvalidRequest` before anything is sent.
    """

    def __init__(
        self,
        nc: Nats,
        *,
        subject_prefix: str = "persona.prefs",
        tenant: str = "default",
        events_prefix: str = "persona.messages",
        timeout: float = 2.0,
        retries: int = 3,
        backoff: float = 0.1,
    ) -> None:
        self.nc = nc
        self.subject_prefix = subject_prefix
        self.tenant = tenant
        self.events_prefix = events_prefix
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._owns_connection = False

    @classmethod
    async def connect(cls, url: str = "nats://127.0.0.1:4222", **options: Any) -> "PersonaPrefs":
        """Connects to NATS at `url`; `options` are the constructor's keyword arguments."""
        nc = await nats.connect(url)
        client = cls(nc, **options)
        client._owns_connection = True
        return client

    async def close(self) -> None:
        """Closes the connection, if `connect` opened it."""
        if self._owns_connection:
            await self.nc.close()

    def subject(self, endpoint: str, persona_id: Optional[str] = None) -> str:
        """The subject a request to `endpoint` naming `persona_id` goes to."""
        base = f"{self.subject_prefix}.{ROLES[endpoint]}.{endpoint}.{self.tenant}"
        return base if endpoint in TENANT_WIDE else f"{base}.{persona_id}"

    async def request(self, endpoint: str, body: Dict[str, Any]) -> Any:
        """Sends `body` to `endpoint`; the reply's body, or the error it carries raised."""
        if endpoint not in ROLES:
            raise ValueError(f"unknown endpoint {endpoint!r}; known: {', '.join(sorted(ROLES))}")
        persona_id = body.get("persona_id")
        if endpoint not in TENANT_WIDE and not (isinstance(persona_id, str) and PERSONA_ID.match(persona_id)):
            raise InvalidRequest(400, "invalid", f"persona_id {persona_id!r} is not a persona id (1-64 of A-Z a-z 0-9 _ -)")
        subject = self.subject(endpoint, persona_id)
        payload = json.dumps(body).encode()
        wait = self.backoff
        for attempt in range(self.retries + 1):
            try:
                reply = await self.nc.request(subject, payload, timeout=self.timeout)
            except NoRespondersError as error:
                raise NoService(f"no service answered on {subject}: is persona-prefs serve running?") from error
            except NatsTimeout as error:
                raise Timeout(f"no reply on {subject} within {self.timeout} s") from error
            decoded = json.loads(reply.data) if reply.data else {}
            error = from_reply(reply.headers, decoded)
            if error is None:
                return decoded
            if isinstance(error, Unavailable) and attempt < self.retries:
                await asyncio.sleep(wait)
                wait *= 2
                continue
            raise error
        raise AssertionError("unreachable: the last attempt returns or raises")

    # Prompt builders.

    async def inject(
        self,
        persona_id: str,
        query: Optional[str] = None,
        *,
        query_embedding: Optional[Sequence[float]] = None,
        active_user_ids: Iterable[str] = (),
        max_count: Optional[int] = None,
        max_chars: Optional[int] = None,
        fmt: Optional[str] = None,
        resident: bool = False,
        explain: bool = False,
    ) -> InjectReply:
        """The preferences to put into the persona's system prompt for this conversation:
        `query` (text) or `query_embedding`, the users present; `fmt` "json", "xml" or
        "markdown" for `rendered`."""
        body: Dict[str, Any] = {"persona_id": persona_id, "active_user_ids": list(active_user_ids)}
        if query is not None:
            body["query"] = query
        if query_embedding is not None:
            body["query_embedding"] = list(query_embedding)
        for key, value in (("max_count", max_count), ("max_chars", max_chars), ("format", fmt)):
            if value is not None:
                body[key] = value
        if resident:
            body["resident"] = True
        if explain:
            body["explain"] = True
        return cast(InjectReply, await self.request("inject", body))

    async def check(
        self, persona_id: str, draft: str, conversation: Iterable[Dict[str, str]] = ()
    ) -> CheckReply:
        """What a draft persona message would contradict, restate or add, decided as ingest
        decides; nothing is written. `conversation`: the turns before it, oldest first
        (`{"role", "user_id", "content"}`)."""
        body = {"persona_id": persona_id, "draft": draft, "conversation": list(conversation)}
        return cast(CheckReply, await self.request("check", body))

    # Reading.

    async def get(self, persona_id: str, preference_id: str) -> Preference:
        return cast(Preference, await self.request("get", {"persona_id": persona_id, "preference_id": preference_id}))

    async def list(
        self, persona_id: str, *, category: Optional[str] = None, include_retracted: bool = False, limit: int = 50
    ) -> List[Preference]:
        body: Dict[str, Any] = {"persona_id": persona_id, "include_retracted": include_retracted, "limit": limit}
        if category is not None:
            body["category"] = category
        return cast(List[Preference], await self.request("list", body))

    async def stats(self, persona_id: str) -> Stats:
        return cast(Stats, await self.request("stats", {"persona_id": persona_id}))

    async def search(
        self, persona_id: str, query: str, *, top_k: int = 10, mode: str = "semantic", include_retracted: bool = False
    ) -> List[Preference]:
        body = {"persona_id": persona_id, "query": query, "top_k": top_k, "mode": mode, "include_retracted": include_retracted}
        return cast(List[Preference], await self.request("search", body))

    # Curation (the write role).

    async def add(self, persona_id: str, name: str, opinion: str, **fields: Any) -> Preference:
        """A new preference; `fields`: category, stance ("for" / "against"), strength,
        related_user_ids, ... (docs/PROTOCOL.md, "Administration")."""
        body = {"persona_id": persona_id, "name": name, "opinion": opinion, **fields}
        return cast(Preference, await self.request("add", body))

    async def reinforce(self, persona_id: str, preference_id: str) -> Dict[str, Any]:
        return cast(Dict[str, Any], await self.request("reinforce", {"persona_id": persona_id, "preference_id": preference_id}))

    async def evolve(
        self,
        persona_id: str,
        preference_id: str,
        new_opinion: str,
        *,
        reason: Optional[str] = None,
        new_stance: Optional[str] = None,
    ) -> Dict[str, Any]:
        body: Dict[str, Any] = {"persona_id": persona_id, "preference_id": preference_id, "new_opinion": new_opinion}
        if reason is not None:
            body["reason"] = reason
        if new_stance is not None:
            body["new_stance"] = new_stance
        return cast(Dict[str, Any], await self.request("evolve", body))

    async def retract(self, persona_id: str, preference_id: str, reason: str = "") -> Dict[str, Any]:
        body = {"persona_id": persona_id, "preference_id": preference_id, "reason": reason}
        return cast(Dict[str, Any], await self.request("retract", body))

    # Erasure (the erase role).

    async def purge_user(self, persona_id: str, user_id: str) -> Dict[str, Any]:
        """Erases `user_id` from the persona's memory and stored events (it sticks)."""
        return cast(Dict[str, Any], await self.request("purge_user", {"persona_id": persona_id, "user_id": user_id}))

    async def purge_user_everywhere(self, user_id: str, max_personas: int = 100) -> Dict[str, Any]:
        """Erases `user_id` from every persona, page after page of the registry until done;
        returns the last page's reply with the counts summed over all pages."""
        total: Dict[str, Any] = {}
        cursor = 0
        while True:
            page = cast(Dict[str, Any], await self.request(
                "purge_user_everywhere",
                {"user_id": user_id, "cursor": cursor, "max_personas": max_personas},
            ))
            for key, value in page.items():
                if key == "personas":
                    total.setdefault("personas", []).extend(value)
                elif isinstance(value, int) and not isinstance(value, bool):
                    total[key] = total.get(key, 0) + value
                else:
                    total[key] = value
            if page["done"]:
                total["cursor"] = 0
                return total
            cursor = page["cursor"]

    async def delete_persona(self, persona_id: str, confirm: str) -> Dict[str, Any]:
        """Deletes the persona whole; `confirm` must repeat its id (ask a person to type it)."""
        return cast(Dict[str, Any], await self.request("delete_persona", {"persona_id": persona_id, "confirm": confirm}))

    # Chat pipelines.

    async def publish_event(self, event: Dict[str, Any]) -> PublishAck:
        """Publishes a conversation event into JetStream under the persona's subject, with its
        `event_id` as the message id: JetStream drops a re-publish within its duplicate
        window. Returns the stream, sequence and whether it was a duplicate."""
        js = self.nc.jetstream()
        ack = await js.publish(
            f"{self.events_prefix}.{event['persona_id']}",
            json.dumps(event).encode(),
            headers={"Nats-Msg-Id": str(event["event_id"])},
        )
        return {"stream": ack.stream, "seq": ack.seq, "duplicate": bool(ack.duplicate)}
