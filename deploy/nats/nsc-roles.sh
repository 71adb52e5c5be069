#!/usr/bin/env bash
# The users of deploy/nats/authorization.conf for decentralised (JWT) auth, with nsc: one
# account for persona-prefs and one user per role, with the same permissions. Writes a .creds
# file per user into ./creds/; give each to its role (the worker's as nats.credentials_file).
#
#   OPERATOR=my-operator ACCOUNT=PERSONA_PREFS deploy/nats/nsc-roles.sh
#
# Not run on these machines (nsc is not in a reachable registry); tests/deploy.rs holds its
# permission lists to authorization.conf's, which tests/nats_auth.rs runs. Names are the
# defaults of config/default.toml; change them together.
set -euo pipefail
account="${ACCOUNT:-PERSONA_PREFS}"
mkdir -p creds

# role: publish allow list; subscribe allow list; "responses" if it answers requests
producer_pub="persona.messages.>"
producer_sub="_INBOX.>"

# The deployment's tenant ("default", serve.tenant); hold a builder to one persona with
# persona.prefs.read.*.default.<persona_id>.
prompt_builder_pub="persona.prefs.read.*.default.>,persona.prefs.read.personas.default"
prompt_builder_sub="_INBOX.>"

admin_pub="persona.prefs.read.>,persona.prefs.write.>,persona.prefs.erase.>,\$SRV.>,persona.messages.>,\
\$JS.API.INFO,\$JS.API.STREAM.INFO.PERSONA_MESSAGES,\
\$JS.API.CONSUMER.INFO.PERSONA_MESSAGES.persona-prefs-ingest,\
\$JS.API.STREAM.INFO.PERSONA_DLQ,\$JS.API.STREAM.MSG.GET.PERSONA_DLQ,\$JS.API.STREAM.MSG.DELETE.PERSONA_DLQ,\
\$JS.API.CONSUMER.CREATE.PERSONA_DLQ,\$JS.API.CONSUMER.CREATE.PERSONA_DLQ.>,\
\$JS.API.CONSUMER.MSG.NEXT.PERSONA_DLQ.>,\$JS.API.CONSUMER.DELETE.PERSONA_DLQ.>"
admin_sub="_INBOX.>"

worker_pub="persona.dlq.>,\$JS.API.INFO,\
\$JS.API.STREAM.INFO.PERSONA_MESSAGES,\$JS.API.STREAM.CREATE.PERSONA_MESSAGES,\$JS.API.STREAM.UPDATE.PERSONA_MESSAGES,\
\$JS.API.STREAM.INFO.PERSONA_DLQ,\$JS.API.STREAM.CREATE.PERSONA_DLQ,\$JS.API.STREAM.UPDATE.PERSONA_DLQ,\
\$JS.API.CONSUMER.INFO.PERSONA_MESSAGES.>,\
\$JS.API.CONSUMER.CREATE.PERSONA_MESSAGES,\$JS.API.CONSUMER.CREATE.PERSONA_MESSAGES.>,\
\$JS.API.CONSUMER.DURABLE.CREATE.PERSONA_MESSAGES.persona-prefs-ingest,\
\$JS.API.CONSUMER.MSG.NEXT.PERSONA_MESSAGES.>,\$JS.API.CONSUMER.DELETE.PERSONA_MESSAGES.>,\
\$JS.API.CONSUMER.CREATE.PERSONA_DLQ,\$JS.API.CONSUMER.CREATE.PERSONA_DLQ.>,\
\$JS.API.CONSUMER.MSG.NEXT.PERSONA_DLQ.>,\$JS.API.CONSUMER.DELETE.PERSONA_DLQ.>,\
\$JS.API.STREAM.MSG.DELETE.PERSONA_MESSAGES,\$JS.API.STREAM.MSG.DELETE.PERSONA_DLQ,\
\$JS.ACK.PERSONA_MESSAGES.>"
worker_sub="persona.prefs.>,\$SRV.>,_INBOX.>"

nsc add account --name "$account" 2>/dev/null || true
nsc edit account --name "$account" --js-mem-storage -1 --js-disk-storage -1 --js-streams -1 --js-consumer -1

add_user() { # add_user NAME PUB SUB [responses]
  local extra=()
  if [ "${4:-}" = responses ]; then extra=(--allow-pub-response); fi
  nsc add user --account "$account" --name "$1" --allow-pub "$2" --allow-sub "$3" "${extra[@]}"
  nsc generate creds --account "$account" --name "$1" > "creds/$1.creds"
}
add_user producer "$producer_pub" "$producer_sub"
add_user prompt_builder "$prompt_builder_pub" "$prompt_builder_sub"
add_user admin "$admin_pub" "$admin_sub"
add_user worker "$worker_pub" "$worker_sub" responses
echo "creds written to ./creds/; push the account: nsc push --account $account"
