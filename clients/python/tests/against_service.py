"""The client against a running persona-prefs (run by tests/python_client.rs): every call's
effect through the service, the errors with their codes, the 503 retry, and the JSON Schemas
of docs/ checked against real events and real replies with the `jsonschema` package.

    NATS_URL=... PERSONA_PREFS_SUBJECT_PREFIX=... PERSONA_PREFS_EVENTS_PREFIX=... \\
        python3 against_service.py REPOSITORY_ROOT

Exits non-zero saying what failed; prints "ok" when everything held.
"""

import asyncio
import json
import os
import sys
import time
import uuid

import jsonschema

from persona_prefs_client import (
    InvalidRequest,
    NoService,
    NotFound,
    PersonaPrefs,
    PersonaPrefsError,
    ServiceError,
    Unavailable,
)

ROOT = sys.argv[1]


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def schema(name):
    with open(os.path.join(ROOT, "docs", name)) as f:
        return json.load(f)


def valid(instance, name):
    validator = jsonschema.Draft202012Validator(schema(name), format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(instance), key=str)
    check(not errors, f"{name}: {[e.message for e in errors]} in {json.dumps(instance)[:400]}")


def invalid(instance, name):
    validator = jsonschema.Draft202012Validator(schema(name), format_checker=jsonschema.FormatChecker())
    check(any(True for _ in validator.iter_errors(instance)), f"{name} accepted {instance}")


async def the_schemas_describe_real_events():
    count = 0
    for example in ("sample_conversation.jsonl", "changes_of_mind.jsonl"):
        with open(os.path.join(ROOT, "examples", example)) as f:
            for line in f:
                if line.strip():
                    valid(json.loads(line), "conversation_event.schema.json")
                    count += 1
    check(count > 30, f"the example events were read ({count})")
    # And it refuses what the service refuses.
    invalid({"event_id": "e", "persona_id": "has space", "platform": "p", "channel_id": "c", "messages": []},
            "conversation_event.schema.json")


async def the_calls_work(prefs, persona):
    added = await prefs.add(persona, "green tea", "I love green tea.", stance="for", strength=0.7)
    check(added["name"] == "green tea" and added["persona_id"] == persona, f"add: {added}")
    got = await prefs.get(persona, added["id"])
    check(got["opinion"] == "I love green tea.", f"get: {got}")
    reinforced = await prefs.reinforce(persona, added["id"])
    check(reinforced["reinforcement_count"] == 1, f"reinforce: {reinforced}")
    listed = await prefs.list(persona)
    check([p["name"] for p in listed] == ["green tea"], f"list: {listed}")
    stats = await prefs.stats(persona)
    check(stats["active"] == 1 and stats["total"] == 1, f"stats: {stats}")
    found = await prefs.search(persona, "tea")
    check(found and found[0]["name"] == "green tea", f"search: {found}")

    injected = await prefs.inject(persona, "what should we drink this morning?", fmt="xml")
    check([p["name"] for p in injected["preferences"]] == ["green tea"], f"inject: {injected}")
    check("<persona_preferences" in injected["rendered"], f"rendered: {injected['rendered']}")
    valid(injected, "inject_reply.schema.json")

    checked = await prefs.check(persona, "Honestly, green tea is disgusting.",
                                conversation=[{"role": "user", "user_id": "u1", "content": "Tea?"}])
    check([c["name"] for c in checked["contradicts"]] == ["green tea"], f"check: {checked}")
    valid(checked, "check_reply.schema.json")
    fresh = await prefs.check(persona, "I adore thunderstorms.")
    check([n["topic"] for n in fresh["new"]] == ["thunderstorms"], f"check, new: {fresh}")
    valid(fresh, "check_reply.schema.json")

    evolved = await prefs.evolve(persona, added["id"], "Green tea tastes of grass to me now.",
                                 reason="a bad cup", new_stance="against")
    check(evolved["new_opinion"] == "Green tea tastes of grass to me now.", f"evolve: {evolved}")
    retracted = await prefs.retract(persona, added["id"], "test")
    check(retracted["active"] is False, f"retract: {retracted}")
    check((await prefs.stats(persona))["retracted"] == 1, "retracted in stats")

    # A user erased from every persona; a persona deleted whole, once its id is repeated.
    other = persona + "-other"
    await prefs.add(other, "films", "Films sam-42 picks are the best.")
    erased = await prefs.purge_user_everywhere("sam-42", max_personas=1)
    check(erased["done"] is True and erased["personas_touched"] >= 1, f"purge everywhere: {erased}")
    check("sam-42" not in json.dumps(await prefs.list(other)), "the text no longer quotes them")
    try:
        await prefs.delete_persona(other, confirm=persona)
        check(False, "a deletion with the wrong confirmation went through")
    except InvalidRequest as error:
        check(error.kind == "invalid" and "confirm" in error.message, f"confirm: {error}")
    deleted = await prefs.delete_persona(other, confirm=other)
    check(deleted["preferences_deleted"] == 1, f"delete: {deleted}")
    check((await prefs.stats(other))["total"] == 0, "nothing left of the deleted persona")


async def errors_carry_the_services_codes(prefs, persona):
    try:
        await prefs.get(persona, "0123456789abcdef0123456789abcdef")
        check(False, "get of an unknown id succeeded")
    except NotFound as error:
        check(error.code == 404 and error.kind == "not_found", f"not found: {error}")
    try:
        await prefs.add(persona, "tea", "")
        check(False, "an empty opinion was added")
    except InvalidRequest as error:
        check(error.code == 400 and error.kind == "invalid" and "opinion" in error.message, f"invalid: {error}")
    try:
        await prefs.check("no such persona!", "I love tea.")
        check(False, "a bad persona id was checked")
    except InvalidRequest as error:
        check("persona_id" in error.message, f"persona id: {error}")
    # The raw error body is what docs/error_reply.schema.json says.
    reply = await prefs.nc.request(prefs.subject("get", "x"), b'{"persona_id": "x", "preference_id": "0123456789abcdef0123456789abcdef"}', timeout=5)
    valid(json.loads(reply.data), "error_reply.schema.json")
    check(reply.headers.get("Nats-Service-Error-Code") == "404", f"the header: {reply.headers}")
    reply = await prefs.nc.request(prefs.subject("inject", "x"), b'{"persona_id": "x", "nonsense": 1}', timeout=5)
    body = json.loads(reply.data)
    valid(body, "error_reply.schema.json")
    check(body["error"]["kind"] == "malformed", f"malformed: {body}")
    # A body naming another persona than its subject is refused by the service.
    reply = await prefs.nc.request(prefs.subject("stats", "ada"), b'{"persona_id": "bob"}', timeout=5)
    check(reply.headers.get("Nats-Service-Error-Code") == "400", f"another persona in the body: {reply.data}")
    # Nothing answering: NoService, at once.
    nobody = PersonaPrefs(prefs.nc, subject_prefix=f"nobody{uuid.uuid4().hex[:8]}")
    try:
        await nobody.stats(persona)
        check(False, "a request without a service succeeded")
    except NoService:
        pass


async def a_503_is_retried_then_raised(prefs):
    """A stand-in service on the same NATS answers 503 twice, then succeeds."""
    prefix = f"standin{uuid.uuid4().hex[:8]}"
    attempts = []

    async def answer(msg):
        attempts.append(time.monotonic())
        if len(attempts) <= 2:
            body = {"error": {"code": 503, "kind": "unavailable", "message": "redis unreachable"}}
            await prefs.nc.publish(msg.reply, json.dumps(body).encode(), headers={
                "Nats-Service-Error": "redis unreachable", "Nats-Service-Error-Code": "503"})
        else:
            await msg.respond(json.dumps({"persona_id": "p", "total": 0, "active": 0, "retracted": 0, "by_category": {}}).encode())

    sub = await prefs.nc.subscribe(f"{prefix}.read.stats.default.p", cb=answer)
    try:
        patient = PersonaPrefs(prefs.nc, subject_prefix=prefix, retries=3, backoff=0.05)
        stats = await patient.stats("p")
        check(stats["total"] == 0 and len(attempts) == 3, f"two 503s then the answer: {len(attempts)} attempts")
        check(attempts[2] - attempts[1] >= 0.09, "the wait doubles")
        attempts.clear()
        hasty = PersonaPrefs(prefs.nc, subject_prefix=prefix, retries=1, backoff=0.01)
        try:
            await hasty.stats("p")
            check(False, "a 503 past the retries was swallowed")
        except Unavailable as error:
            check(error.code == 503 and isinstance(error, ServiceError) and isinstance(error, PersonaPrefsError),
                  f"unavailable: {error}")
        check(len(attempts) == 2, f"one retry: {len(attempts)} attempts")
    finally:
        await sub.unsubscribe()


async def an_event_published_is_remembered(prefs, persona):
    event = {
        "event_id": f"client-{uuid.uuid4().hex}",
        "persona_id": persona,
        "platform": "python",
        "channel_id": "c1",
        "messages": [
            {"message_id": "m1", "role": "user", "user_id": "u1", "content": "What about the sea?",
             "timestamp": "2026-11-25T10:00:00Z"},
            {"message_id": "m2", "role": "persona", "content": "I adore the sea.",
             "timestamp": "2026-11-25T10:00:01Z"},
        ],
    }
    valid(event, "conversation_event.schema.json")
    first = await prefs.publish_event(event)
    again = await prefs.publish_event(event)
    check(not first["duplicate"] and again["duplicate"] and again["seq"] == first["seq"], f"{first} {again}")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        names = [p["name"] for p in await prefs.list(persona)]
        if "sea" in names:
            return
        await asyncio.sleep(0.2)
    check(False, f"the published opinion never reached memory: {names}")


async def main():
    prefs = await PersonaPrefs.connect(
        os.environ["NATS_URL"],
        subject_prefix=os.environ["PERSONA_PREFS_SUBJECT_PREFIX"],
        events_prefix=os.environ["PERSONA_PREFS_EVENTS_PREFIX"],
        timeout=10.0,
    )
    try:
        await the_schemas_describe_real_events()
        await the_calls_work(prefs, "ada")
        await errors_carry_the_services_codes(prefs, "ada")
        await a_503_is_retried_then_raised(prefs)
        await an_event_published_is_remembered(prefs, "pub")
    finally:
        await prefs.close()
    print("ok")


if __name__ == "__main__":
    asyncio.run(main())
