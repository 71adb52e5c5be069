#!/usr/bin/env python3
"""A prompt builder's client for persona-prefs injection, over NATS request-reply (nats-py).

Copy this into a prompt builder: `preferences_block(...)` returns the block to put into the
persona's system prompt, or an empty string when the service has nothing or is unavailable
(a prompt should never fail to build because memory is down).

When the chat pipeline later publishes the persona's reply, put `injected_ids(reply)` on that
persona message as `injected_preference_ids`: the persona restating what it was reminded of is
then not counted as new evidence (docs/PROTOCOL.md, "echo").

Run it directly to try it:
    NATS_URL=nats://127.0.0.1:4222 python3 examples/inject_client.py PERSONA_ID "what we are talking about" [user_id ...]
"""

import asyncio
import json
import os
import re
import sys

import nats
from nats.errors import NoRespondersError, TimeoutError


class InjectionError(Exception):
    """The service answered with an error (400 bad request, 404, 503 ...)."""

    def __init__(self, code, kind, message):
        super().__init__(f"{code} {kind}: {message}")
        self.code, self.kind, self.message = code, kind, message


PERSONA_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


async def inject(nc, persona_id, query, active_user_ids=(), max_count=8, max_chars=2000,
                 fmt="xml", resident=False, subject_prefix="persona.prefs", tenant="default",
                 timeout=0.5):
    """One injection request; returns the decoded reply or raises InjectionError.

    It goes to the persona's own subject, `<subject_prefix>.read.inject.<tenant>.<persona_id>`,
    so NATS permissions can hold a prompt builder to its personas (docs/PERMISSIONS.md)."""
    if not PERSONA_ID.match(persona_id):
        raise InjectionError(400, "invalid", f"persona_id {persona_id!r} is not a persona id (1-64 of A-Z a-z 0-9 _ -)")
    subject = f"{subject_prefix}.read.inject.{tenant}.{persona_id}"
    request = {
        "persona_id": persona_id,
        "query": query,
        "active_user_ids": list(active_user_ids),
        "max_count": max_count,
        "max_chars": max_chars,
        "format": fmt,
        "resident": resident,
    }
    reply = await nc.request(subject, json.dumps(request).encode(), timeout=timeout)
    body = json.loads(reply.data or b"{}")
    headers = reply.headers or {}
    if "Nats-Service-Error-Code" in headers or "error" in body:
        error = body.get("error", {})
        raise InjectionError(int(headers.get("Nats-Service-Error-Code", error.get("code", 500))),
                             error.get("kind", "unknown"), error.get("message", headers.get("Nats-Service-Error", "")))
    return body


def injected_ids(reply):
    """The ids to send back as the persona message's `injected_preference_ids`."""
    return [preference["id"] for preference in reply.get("preferences", [])]


async def preferences_block(nc, persona_id, query, active_user_ids=(), **options):
    """The rendered block for the system prompt; empty when there is nothing to add."""
    try:
        reply = await inject(nc, persona_id, query, active_user_ids, **options)
    except (TimeoutError, NoRespondersError):
        return ""  # memory unavailable: build the prompt without it
    return reply["rendered"] if reply["preferences"] else ""


async def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    persona_id, query, users = argv[1], argv[2], argv[3:]
    prefix = os.environ.get("PERSONA_PREFS_SUBJECT_PREFIX", "persona.prefs")
    tenant = os.environ.get("PERSONA_PREFS_TENANT", "default")
    nc = await nats.connect(os.environ.get("NATS_URL", "nats://127.0.0.1:4222"))
    try:
        reply = await inject(nc, persona_id, query, users, subject_prefix=prefix, tenant=tenant, resident=True)
        print(json.dumps(reply))
        return 0
    except InjectionError as error:
        print(json.dumps({"error": {"code": error.code, "kind": error.kind, "message": error.message}}))
        return 1
    finally:
        await nc.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv)))
