//! `prefs …`: a persona's preferences through the running service, typed end to end.

use std::io::Write;
use std::process::ExitCode;

use persona_prefs::client::{
    AddRequest, ConsolidateRequest, DeletePersonaRequest, Endpoint, EvolveRequest, ListRequest,
    PersonaRequest, PersonasRequest, PreferenceRef, PurgeUserRequest, RestoreRequest,
    RetractRequest, SearchRequest, SetBasesRequest,
};
use persona_prefs::config::Config;
use persona_prefs::store::Preference;

use super::{PrefsCommand, answered, print_json, print_preferences, service_client, truncate};

pub(super) async fn prefs(command: PrefsCommand, config: &Config) -> anyhow::Result<ExitCode> {
    let client = match service_client(config).await {
        Ok(client) => client,
        Err(code) => return Ok(code),
    };
    let mut out = std::io::stdout().lock();
    // `--json` prints the reply whole; otherwise the typed reply is read and printed.
    macro_rules! reply {
        ($json:expr, $endpoint:expr, $request:expr, $typed:expr) => {{
            if $json {
                return print_json(client.request_json($endpoint, &$request).await);
            }
            match answered($typed.await) {
                Ok(reply) => reply,
                Err(code) => return Ok(code),
            }
        }};
    }
    match command {
        PrefsCommand::List {
            persona,
            category,
            all,
            limit,
            json,
        } => {
            let request = ListRequest {
                persona_id: persona,
                category,
                include_retracted: all,
                limit,
            };
            let list = reply!(json, Endpoint::List, request, client.list(&request));
            print_preferences(&mut out, &list);
        }
        PrefsCommand::Search {
            persona,
            query,
            top_k,
            mode,
            json,
        } => {
            let request = SearchRequest {
                persona_id: persona,
                query,
                top_k,
                include_retracted: false,
                mode,
            };
            let hits = reply!(json, Endpoint::Search, request, client.search(&request));
            writeln!(
                out,
                "  {:>9} {:>10} {:>7}  {:<24} opinion",
                "relevance", "similarity", "keyword", "topic"
            )?;
            for hit in hits {
                writeln!(
                    out,
                    "  {:>9.3} {:>10.3} {:>7}  {:<24} {}",
                    hit.relevance,
                    hit.similarity,
                    hit.keyword.map_or("-".to_string(), |k| format!("{k:.3}")),
                    truncate(&hit.preference.name, 24),
                    hit.preference.opinion
                )?;
            }
        }
        PrefsCommand::Stats { persona, json } => {
            let request = PersonaRequest {
                persona_id: persona.clone(),
            };
            let stats = reply!(json, Endpoint::Stats, request, client.stats(&persona));
            writeln!(out, "persona    {}", stats.persona_id)?;
            writeln!(out, "total      {}", stats.total)?;
            writeln!(out, "active     {}", stats.active)?;
            writeln!(out, "retracted  {}", stats.retracted)?;
            for (category, count) in &stats.by_category {
                writeln!(out, "  {category:<16} {count}")?;
            }
        }
        PrefsCommand::Get { persona, id, json } => {
            let request = PreferenceRef {
                persona_id: persona.clone(),
                preference_id: id.clone(),
            };
            let preference = reply!(json, Endpoint::Get, request, client.get(&persona, &id));
            print_preference(&mut out, &preference)?;
        }
        PrefsCommand::Add {
            persona,
            name,
            opinion,
            category,
            stance,
            strength,
            json,
        } => {
            let request = AddRequest {
                persona_id: persona,
                name,
                opinion,
                category,
                stance,
                strength,
                ..AddRequest::default()
            };
            let preference = reply!(json, Endpoint::Add, request, client.add(&request));
            print_preference(&mut out, &preference)?;
        }
        PrefsCommand::PurgeUser {
            persona: None,
            user,
            pseudonym,
            page,
            json,
        } => {
            if pseudonym.is_some() {
                eprintln!(
                    "persona-prefs: --pseudonym needs --persona: every persona gets one random pseudonym (a chosen one could name a user of some persona)"
                );
                return Ok(ExitCode::from(2));
            }
            // Progress on stderr, page by page; the summary (or the JSON) on stdout.
            let purged = match answered(
                client
                    .purge_user_everywhere_all(&user, page, |page| {
                        eprintln!(
                            "visited {} personas ({} touched): {} rewritten, {} retracted, {} events and {} dead letters erased{}",
                            page.personas_visited,
                            page.personas_touched,
                            page.preferences_rewritten,
                            page.preferences_retracted,
                            page.events_erased,
                            page.dead_letters_erased,
                            if page.done { "; done" } else { "; continuing" }
                        )
                    })
                    .await,
            ) {
                Ok(purged) => purged,
                Err(code) => return Ok(code),
            };
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&purged)?)?;
                return Ok(ExitCode::SUCCESS);
            }
            writeln!(out, "replaced with     {}", purged.pseudonym)?;
            writeln!(out, "personas visited  {}", purged.personas_visited)?;
            writeln!(out, "personas touched  {}", purged.personas_touched)?;
            for touched in &purged.personas {
                writeln!(
                    out,
                    "  {:<24} {} rewritten, {} retracted, {} events erased, {} pending",
                    touched.memory.persona_id,
                    touched.memory.rewritten.len(),
                    touched.memory.retracted.len(),
                    touched.stored_events.events_erased,
                    touched.stored_events.events_pending
                )?;
            }
            writeln!(out, "rewritten         {}", purged.preferences_rewritten)?;
            writeln!(out, "retracted         {}", purged.preferences_retracted)?;
            writeln!(
                out,
                "events erased     {} ({} not yet processed: the worker erases them once done)",
                purged.events_erased, purged.events_pending
            )?;
            writeln!(
                out,
                "dead letters      {} erased",
                purged.dead_letters_erased
            )?;
        }
        PrefsCommand::DeletePersona {
            persona,
            confirm,
            json,
        } => {
            let request = DeletePersonaRequest {
                persona_id: persona.clone(),
                confirm: confirm.clone(),
            };
            if confirm != persona {
                eprintln!(
                    "persona-prefs: --confirm must repeat the persona id ({persona}): a deletion cannot be undone"
                );
                return Ok(ExitCode::from(2));
            }
            let deleted = reply!(
                json,
                Endpoint::DeletePersona,
                request,
                client.delete_persona(&persona)
            );
            let stored = &deleted.stored_events;
            writeln!(out, "deleted        {}", deleted.persona_id)?;
            writeln!(out, "as of          {}", deleted.deleted_at)?;
            writeln!(out, "preferences    {}", deleted.preferences_deleted)?;
            writeln!(out, "keys           {}", deleted.keys_deleted)?;
            writeln!(
                out,
                "events erased  {} ({} not yet processed: the worker refuses and erases them)",
                stored.events_erased, stored.events_pending
            )?;
            writeln!(out, "dead letters   {} erased", stored.dead_letters_erased)?;
        }
        PrefsCommand::PurgeUser {
            persona: Some(persona),
            user,
            pseudonym,
            page: _,
            json,
        } => {
            let request = PurgeUserRequest {
                persona_id: persona,
                user_id: user,
                pseudonym,
            };
            let purged = reply!(
                json,
                Endpoint::PurgeUser,
                request,
                client.purge_user(&request)
            );
            let stored = &purged.stored_events;
            writeln!(out, "replaced with  {}", purged.memory.pseudonym)?;
            writeln!(out, "rewritten      {}", purged.memory.rewritten.len())?;
            writeln!(out, "retracted      {}", purged.memory.retracted.len())?;
            writeln!(
                out,
                "events erased  {} ({} not yet processed: the worker erases them once done)",
                stored.events_erased, stored.events_pending
            )?;
            writeln!(out, "dead letters   {} erased", stored.dead_letters_erased)?;
        }
        PrefsCommand::Reinforce { persona, id, json } => {
            let request = PreferenceRef {
                persona_id: persona.clone(),
                preference_id: id.clone(),
            };
            let done = reply!(
                json,
                Endpoint::Reinforce,
                request,
                client.reinforce(&persona, &id)
            );
            writeln!(out, "id                   {}", done.id)?;
            writeln!(out, "name                 {}", done.name)?;
            writeln!(out, "strength             {}", done.strength)?;
            writeln!(out, "reinforcement_count  {}", done.reinforcement_count)?;
            writeln!(out, "applied              {}", done.applied)?;
        }
        PrefsCommand::Evolve {
            persona,
            id,
            opinion,
            reason,
            stance,
            json,
        } => {
            let request = EvolveRequest {
                persona_id: persona,
                preference_id: id,
                new_opinion: opinion,
                reason,
                new_stance: stance,
            };
            let done = reply!(json, Endpoint::Evolve, request, client.evolve(&request));
            writeln!(out, "id                   {}", done.id)?;
            writeln!(out, "name                 {}", done.name)?;
            writeln!(out, "new_opinion          {}", done.new_opinion)?;
            writeln!(out, "strength             {}", done.strength)?;
            writeln!(out, "evolutions           {}", done.evolutions)?;
            writeln!(out, "applied              {}", done.applied)?;
        }
        PrefsCommand::Retract {
            persona,
            id,
            reason,
            json,
        } => {
            let request = RetractRequest {
                persona_id: persona,
                preference_id: id,
                reason,
            };
            let done = reply!(json, Endpoint::Retract, request, client.retract(&request));
            writeln!(out, "id                   {}", done.id)?;
            writeln!(out, "name                 {}", done.name)?;
            writeln!(out, "active               {}", done.active)?;
        }
        PrefsCommand::Personas {
            limit,
            offset,
            json,
        } => {
            let request = PersonasRequest { limit, offset };
            let directory = reply!(json, Endpoint::Personas, request, client.personas(&request));
            writeln!(
                out,
                "  {:<24} {:>6} {:>6}  {:<20}  strongest",
                "persona", "active", "all", "last activity"
            )?;
            for persona in &directory.personas {
                writeln!(
                    out,
                    "  {:<24} {:>6} {:>6}  {:<20}  {}",
                    truncate(&persona.persona_id, 24),
                    persona.active,
                    persona.total,
                    if persona.last_activity.is_empty() {
                        "-"
                    } else {
                        &persona.last_activity
                    },
                    persona.strongest.join(", ")
                )?;
            }
            writeln!(out, "{} personas in all", directory.total)?;
        }
        PrefsCommand::Bases {
            persona,
            set,
            clear,
            json,
        } => {
            let bases = if set.is_some() || clear {
                let request = SetBasesRequest {
                    persona_id: persona,
                    bases: set.unwrap_or_default(),
                };
                reply!(
                    json,
                    Endpoint::SetBases,
                    request,
                    client.set_bases(&request)
                )
            } else {
                let request = PersonaRequest {
                    persona_id: persona.clone(),
                };
                reply!(json, Endpoint::Bases, request, client.bases(&persona))
            };
            writeln!(out, "persona  {}", bases.persona_id)?;
            if bases.bases.is_empty() {
                writeln!(out, "bases    none")?;
            } else {
                writeln!(out, "bases    {}", bases.bases.join(", "))?;
            }
            for layer in &bases.layers {
                writeln!(out, "  layer {}  {}", layer.depth, layer.persona_id)?;
            }
        }
        PrefsCommand::Restore {
            persona,
            id,
            version,
            reason,
            json,
        } => {
            let request = RestoreRequest {
                persona_id: persona,
                preference_id: id,
                version,
                reason,
            };
            let done = reply!(json, Endpoint::Restore, request, client.restore(&request));
            writeln!(out, "id                   {}", done.id)?;
            writeln!(out, "name                 {}", done.name)?;
            writeln!(out, "opinion              {}", done.opinion)?;
            writeln!(out, "active               {}", done.active)?;
            writeln!(out, "version              {}", done.version)?;
            writeln!(out, "applied              {}", done.applied)?;
        }
        PrefsCommand::Consolidate {
            persona,
            threshold,
            apply,
            json,
        } => {
            let request = ConsolidateRequest {
                persona_id: persona,
                threshold,
                apply,
            };
            let report = reply!(
                json,
                Endpoint::Consolidate,
                request,
                client.consolidate(&request)
            );
            let merged: usize = report.groups.iter().map(|g| g.merged.len()).sum();
            writeln!(
                out,
                "{} active preferences looked at, threshold {:.2}: {} near-duplicates in {} groups{}",
                report.examined,
                report.threshold,
                merged,
                report.groups.len(),
                if report.dry_run {
                    " (dry run: nothing merged; --apply merges)"
                } else {
                    ", merged"
                }
            )?;
            for group in &report.groups {
                writeln!(out, "  keep {}  {}", group.survivor_id, group.survivor_name)?;
                for duplicate in &group.merged {
                    writeln!(
                        out,
                        "    merge {}  {} ({:.3}): {}",
                        duplicate.id, duplicate.name, duplicate.similarity, duplicate.opinion
                    )?;
                }
            }
            for (a, b) in &report.contradictions {
                writeln!(out, "  contradiction (left apart): {a} and {b}")?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One preference whole: provenance, reinforcements and history.
fn print_preference(out: &mut impl Write, preference: &Preference) -> std::io::Result<()> {
    writeln!(out, "id            {}", preference.id)?;
    writeln!(out, "topic         {}", preference.name)?;
    writeln!(out, "opinion       {}", preference.opinion)?;
    writeln!(
        out,
        "stance        {}",
        preference.stance.map(|s| s.as_str()).unwrap_or("-")
    )?;
    writeln!(
        out,
        "strength      {:.3} ({} reinforcements){}",
        preference.strength,
        preference.reinforcement_count,
        preference
            .decayed_strength
            .map(|decayed| format!(", {decayed:.3} after decay"))
            .unwrap_or_default()
    )?;
    writeln!(out, "version       {}", preference.version)?;
    if !preference.inherited_from.is_empty() {
        writeln!(out, "inherited     {}", preference.inherited_from)?;
    }
    writeln!(out, "category      {}", preference.category)?;
    writeln!(out, "active        {}", preference.active)?;
    writeln!(
        out,
        "from          user {} message {} on {} {}",
        preference.provenance.triggering_user_id,
        preference.provenance.triggering_message_id,
        preference.provenance.source_platform,
        preference.provenance.source_channel_id
    )?;
    writeln!(out, "created       {}", preference.created_at)?;
    for reinforcement in &preference.reinforcements {
        let from = &reinforcement.provenance;
        if from.persona_message_id.is_empty() {
            writeln!(out, "reinforced    {} (by hand)", reinforcement.timestamp)?;
        } else {
            writeln!(
                out,
                "reinforced    {} by message {} (user {} message {} on {} {})",
                reinforcement.timestamp,
                from.persona_message_id,
                from.triggering_user_id,
                from.triggering_message_id,
                from.source_platform,
                from.source_channel_id
            )?;
        }
    }
    let dropped = preference.history_entries_dropped;
    for (position, entry) in preference.evolution_history.iter().enumerate() {
        writeln!(
            out,
            "history       v{} {} {}: {:?} -> {:?} ({})",
            entry.version.unwrap_or(dropped + position as u64 + 1),
            entry.timestamp,
            entry.action.as_deref().unwrap_or("evolution"),
            entry.old_opinion.as_deref().unwrap_or(""),
            entry.new_opinion.as_deref().unwrap_or(""),
            entry.reason
        )?;
    }
    Ok(())
}
