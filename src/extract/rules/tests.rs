//! The rules extractor's tables: each phrasing and what it reads.

use super::*;

fn read(text: &str) -> Vec<(String, Stance)> {
    RulesExtractor::new(8)
        .extract_text(text)
        .into_iter()
        .map(|o| (o.name, o.stance))
        .collect()
}

/// Each text reads as exactly the opinions listed, in order.
fn assert_reads(cases: &[(&str, &[(&str, Stance)])]) {
    for (text, expected) in cases {
        let expected: Vec<(String, Stance)> =
            expected.iter().map(|(n, s)| (n.to_string(), *s)).collect();
        assert_eq!(read(text), expected, "{text}");
    }
}

#[test]
fn reads_the_common_first_person_forms() {
    use Stance::{Against, For};
    let cases: &[(&str, &[(&str, Stance)])] = &[
        ("I love green tea.", &[("green tea", For)]),
        ("Honestly, jazz is underrated.", &[("jazz", For)]),
        // A topic named as a question, judged by the reply.
        ("Sailing? Love it.", &[("sailing", For)]),
        ("Mornings? Overrated.", &[("mornings", Against)]),
        ("Sushi? I went there last week.", &[]),
        // "it" / "them" is the previous clause's subject; the later view wins.
        (
            "Camping is uncomfortable, but I adore it.",
            &[("camping", For)],
        ),
        (
            "Brussels sprouts get a bad rap but I think they're delicious.",
            &[("brussels sprouts", For)],
        ),
        ("I tried it and I loved it.", &[]),
        (
            "I don't really like horror movies.",
            &[("horror movies", Against)],
        ),
        ("My favourite season is autumn.", &[("autumn", For)]),
        ("I think cilantro is disgusting.", &[("cilantro", Against)]),
        ("I don't think opera is boring at all.", &[("opera", For)]),
        (
            "I love jazz but I hate country music.",
            &[("jazz", For), ("country music", Against)],
        ),
        ("Do you like jazz?", &[]),
        ("I love it!", &[]),
        ("I find rainy days calming.", &[("rainy days", For)]),
        (
            "I don't find small talk very interesting.",
            &[("small talk", Against)],
        ),
        ("I used to love sushi.", &[]),
        ("The meeting is at noon.", &[]),
        ("I'm not a fan of small talk.", &[("small talk", Against)]),
        (
            "Nothing beats a rainy afternoon with a book.",
            &[("rainy afternoon", For)],
        ),
    ];
    assert_reads(cases);
}

#[test]
fn a_question_the_persona_answers_itself_is_read_with_its_answer() {
    use Stance::{Against, For};
    let cases: &[(&str, &[(&str, Stance)])] = &[
        (
            "Coffee or tea? Tea, obviously.",
            &[("tea", For), ("coffee", Against)],
        ),
        (
            "Cats versus dogs? Cats, every time.",
            &[("cats", For), ("dogs", Against)],
        ),
        // The reply names neither side: no choice was made.
        ("Coffee or tea? Tea is ready when you are.", &[]),
        ("Favourite dessert? Mine's tiramisu.", &[("tiramisu", For)]),
        (
            "What's my favourite planet? Saturn, easily.",
            &[("saturn", For)],
        ),
        // The user's favourite is asked for; the persona has not given its own.
        ("What's your favourite film? Tell me more.", &[]),
        ("Ah, fresh bread. Bliss.", &[("fresh bread", For)]),
        // A judgement is not a topic.
        ("Oh, lovely. Great idea.", &[]),
        ("Ugh, mosquitoes.", &[("mosquitoes", Against)]),
        ("Ugh, I forgot my keys.", &[]),
    ];
    assert_reads(cases);
}

#[test]
fn others_views_count_only_through_the_personas_reaction() {
    use Stance::{Against, For};
    let cases: &[(&str, &[(&str, Stance)])] = &[
        (
            "Everyone raves about sushi. I don't get the appeal.",
            &[("sushi", Against)],
        ),
        (
            "People say golf is boring, and they're right.",
            &[("golf", Against)],
        ),
        (
            "Lots of folks hate rain. Not me; I love it.",
            &[("rain", For)],
        ),
        (
            "Some folks love horror films. I'm one of them.",
            &[("horror films", For)],
        ),
        // No reaction: others' view alone is not the persona's.
        (
            "Many people say modern art is meaningless. What do you think?",
            &[],
        ),
        ("Everyone loves the new cafe.", &[]),
    ];
    assert_reads(cases);
}

#[test]
fn openers_roles_and_kinds_of_person() {
    use Stance::{Against, For};
    let cases: &[(&str, &[(&str, Stance)])] = &[
        (
            "Hot take: breakfast for dinner is genius.",
            &[("breakfast for dinner", For)],
        ),
        (
            "Unpopular opinion, but summer is overrated.",
            &[("summer", Against)],
        ),
        (
            "Speaking as a chef, I think truffle oil is a gimmick.",
            &[("truffle oil", Against)],
        ),
        (
            "As a gamer, I'd say speedruns are pure art.",
            &[("speedruns", For)],
        ),
        // A role of the past: that view is not held now.
        ("As a child, I loved trains.", &[]),
        ("I'm not much of a cake person.", &[("cake", Against)]),
        ("I'm a dog person through and through.", &[("dog", For)]),
        (
            "I'm more of a night owl than a morning person.",
            &[("night owl", For), ("morning", Against)],
        ),
        // A trait of the persona is not a liking.
        ("I'm a shy person.", &[]),
        ("I'm a very patient person.", &[]),
        ("Yoga is too slow for me.", &[("yoga", Against)]),
        (
            "Pop music is fine, but it's not really my thing.",
            &[("pop music", Against)],
        ),
        ("I hate to interrupt, but your timer went off.", &[]),
    ];
    assert_reads(cases);
}

#[test]
fn chat_without_a_subject_and_formal_liking_are_read() {
    use Stance::{Against, For};
    let cases: &[(&str, &[(&str, Stance)])] = &[
        ("Absolutely adore hedgehogs.", &[("hedgehogs", For)]),
        (
            "Big fan of handwritten notes.",
            &[("handwritten notes", For)],
        ),
        ("Not a fan of cold pizza, tbh.", &[("cold pizza", Against)]),
        ("So into bouldering right now.", &[("bouldering", For)]),
        (
            "Love love love a good road trip.",
            &[("good road trip", For)],
        ),
        // Imperatives and the conversation are not likings.
        ("Enjoy the show!", &[]),
        ("Love that idea!", &[]),
        ("Done with the report, here it is.", &[]),
        (
            "I hold a particular affection for rainy evenings.",
            &[("rainy evenings", For)],
        ),
        (
            "I harbour no great love for crowded festivals.",
            &[("crowded festivals", Against)],
        ),
        (
            "Modern architecture, in my estimation, lacks warmth.",
            &[("modern architecture", Against)],
        ),
        (
            "I'm team pancakes, not waffles.",
            &[("pancakes", For), ("waffles", Against)],
        ),
        ("I'm over the moon about it.", &[]),
        ("Trust me, the form is easy to fill in.", &[]),
    ];
    assert_reads(cases);
}

#[test]
fn ideals_and_values_are_opinions_too() {
    use Stance::{Against, For};
    let cases: &[(&str, &[(&str, Stance)])] = &[
        ("Honesty is non-negotiable for me.", &[("honesty", For)]),
        ("Loyalty means a lot to me.", &[("loyalty", For)]),
        (
            "Fairness matters to me more than winning.",
            &[("fairness", For), ("winning", Against)],
        ),
        ("I stand for free speech.", &[("free speech", For)]),
        (
            "I refuse to support fast fashion.",
            &[("fast fashion", Against)],
        ),
        (
            "I think people should read more poetry.",
            &[("poetry", For)],
        ),
        ("The world needs less cynicism.", &[("cynicism", Against)]),
        (
            "Lying to children is never okay.",
            &[("lying to children", Against)],
        ),
        (
            "I'm deeply skeptical of astrology.",
            &[("astrology", Against)],
        ),
        // Others' ideals, questions and hypotheticals are not the persona's.
        ("Some say ambition is a vice.", &[]),
        ("Is honesty always the best policy?", &[]),
        ("If I were a politician, I'd fund libraries.", &[]),
        ("I believe in you!", &[]),
    ];
    assert_reads(cases);
}

#[test]
fn another_writers_chatbot_forms() {
    use Stance::{Against, For};
    assert_reads(&[
        // A persona's measured register.
        (
            "I can't say I'm fond of crowded beaches.",
            &[("crowded beaches", Against)],
        ),
        (
            "Few things delight me more than a well-made sandwich.",
            &[("well-made sandwich", For)],
        ),
        (
            "Personally, I'd take a paperback over an e-reader any day.",
            &[("paperback", For), ("e-reader", Against)],
        ),
        (
            "If I'm being honest, I've never understood the appeal of golf.",
            &[("golf", Against)],
        ),
        (
            "I find something deeply comforting about rain on a window.",
            &[("rain", For)],
        ),
        (
            "There's something sad about empty malls.",
            &[("empty malls", Against)],
        ),
        (
            "There's no better sound than a crackling fire.",
            &[("crackling fire", For)],
        ),
        (
            "Modern architecture often strikes me as cold.",
            &[("modern architecture", Against)],
        ),
        ("He strikes me as a decent guy.", &[]),
        (
            "Classical music tends to calm me down.",
            &[("classical music", For)],
        ),
        (
            "I'd rather not spend an evening at a nightclub.",
            &[("spend an evening at a nightclub", Against)],
        ),
        ("I'd rather not say specifically.", &[]),
        (
            "Spreadsheets bring me a strange sense of peace.",
            &[("spreadsheets", For)],
        ),
        (
            "Punctuality matters a great deal to me.",
            &[("punctuality", For)],
        ),
        ("That means a lot to me.", &[]),
        (
            "I lean towards savoury breakfasts.",
            &[("savoury breakfasts", For)],
        ),
        (
            "I've grown quite attached to the ritual of morning coffee.",
            &[("ritual of morning coffee", For)],
        ),
        ("The ocean never fails to humble me.", &[("ocean", For)]),
        (
            "Board games bring out the best in people, I think.",
            &[("board games", For)],
        ),
        ("Poetry is one of my great loves.", &[("poetry", For)]),
        (
            "Science fiction is where my heart lives.",
            &[("science fiction", For)],
        ),
        ("Being outdoors recharges me.", &[("being outdoors", For)]),
        // Contractions the patterns once read as "i 'll", "i 'd".
        (
            "I'll confess that reality TV is my weakness.",
            &[("reality tv", For)],
        ),
        (
            "As a chef, I'd say butter is essential.",
            &[("butter", For)],
        ),
        ("I'd be lost without my notebook.", &[("notebook", For)]),
        // Pairs read one item at a time; "neither" denies both.
        (
            "Neither tea nor coffee appeals to me.",
            &[("tea", Against), ("coffee", Against)],
        ),
        (
            "I love both green tea and black coffee.",
            &[("green tea", For), ("black coffee", For)],
        ),
        (
            "Both jazz and blues move me.",
            &[("jazz", For), ("blues", For)],
        ),
        // Clauses after ", but", ", though" and a subjectless "but hate".
        (
            "I love tea but hate coffee.",
            &[("tea", For), ("coffee", Against)],
        ),
        (
            "I adore autumn, though winter leaves me cold.",
            &[("autumn", For), ("winter", Against)],
        ),
        // Idioms of refusal and impatience.
        (
            "Honestly, winter can't end soon enough.",
            &[("winter", Against)],
        ),
        ("Summer can't come soon enough.", &[("summer", For)]),
        (
            "I wouldn't be caught dead at a nightclub.",
            &[("nightclub", Against)],
        ),
        (
            "You couldn't pay me to go camping.",
            &[("go camping", Against)],
        ),
        ("Camping? No thank you.", &[("camping", Against)]),
        ("My go-to is always a flat white.", &[("flat white", For)]),
        ("I'll pass on the message to her.", &[]),
        (
            "I tried kombucha, and I'd say it's delicious.",
            &[("kombucha", For)],
        ),
        (
            "Jazz, to my ear, is the most wonderful kind of music.",
            &[("jazz", For)],
        ),
        // The liking sits in a relative clause about the subject.
        ("Jazz is a genre I love.", &[("jazz", For)]),
        ("Envy is not a feeling that I enjoy.", &[("envy", Against)]),
        ("The book that I love is on the shelf.", &[]),
        // A question handed back does not make the statement a question.
        ("I'm a Barcelona fan, and you?", &[("barcelona", For)]),
        ("I'm a die-hard fan of the Celtics.", &[("celtics", For)]),
        (
            "I'm very interested in medieval history.",
            &[("medieval history", For)],
        ),
        ("I'm interested in hearing more.", &[]),
        ("I'm not incredibly fond of opera.", &[("opera", Against)]),
        ("I long for quiet evenings.", &[("quiet evenings", For)]),
        ("Linux, always Linux!", &[("linux", For)]),
        ("Money isn't everything.", &[("money", Against)]),
        ("No need for fancy gadgets.", &[("fancy gadgets", Against)]),
        ("Dogs are the life of the party!", &[("dogs", For)]),
        (
            "Frankly, I think cryptocurrency is overhyped.",
            &[("cryptocurrency", Against)],
        ),
        ("The harbour is pretty.", &[("harbour", For)]),
        // Degree, fame, difficulty and parts are not verdicts on the whole.
        ("I think embarrassment is a pretty strange emotion.", &[]),
        ("Chaucer is best known for The Canterbury Tales.", &[]),
        ("Golf is difficult.", &[]),
        ("Some people feel happy, others feel sad.", &[]),
        // Pronouns and possessives name nothing the memory could keep.
        ("I like his older novels more than his newer ones.", &[]),
        ("I wish I was the Mad Hatter.", &[]),
        ("I don't think many of them are practical.", &[]),
    ]);
}

#[test]
fn peoples_chat_forms() {
    use Stance::{Against, For};
    assert_reads(&[
        ("Jazz isn't great.", &[("jazz", Against)]),
        ("Tea isn't better than coffee, it's just different.", &[]),
        (
            "Besides, I've always preferred tea over coffee.",
            &[("tea", For), ("coffee", Against)],
        ),
        (
            "I've always preferred quiet mornings.",
            &[("quiet mornings", For)],
        ),
        (
            "Some of my favorites are old westerns.",
            &[("old westerns", For)],
        ),
        ("One of my favorites is chess.", &[("chess", For)]),
        ("I've started to hate jazz.", &[("jazz", Against)]),
        ("I've come to love long walks.", &[("long walks", For)]),
        (
            "I like hiking, baking, chess and all of that.",
            &[("hiking", For), ("baking", For), ("chess", For)],
        ),
        ("I love poetry, especially haiku.", &[("poetry", For)]),
        (
            "Honestly I'm getting sick of porridge",
            &[("porridge", Against)],
        ),
        ("I haven't really liked opera either", &[("opera", Against)]),
        (
            "I think we can all agree that littering is bad.",
            &[("littering", Against)],
        ),
        ("Patience is key to everything.", &[("patience", For)]),
        ("Money can't buy happiness.", &[("money", Against)]),
        (
            "I'm glad we have public libraries.",
            &[("public libraries", For)],
        ),
        (
            "This reminds me how beautiful the desert is.",
            &[("desert", For)],
        ),
        ("You know what sucks about winter", &[("winter", Against)]),
        ("It's so fun to bake bread.", &[("bake bread", For)]),
        ("It doesn't feel good to be lazy.", &[("be lazy", Against)]),
        ("It's nice to meet you.", &[]),
        ("Cucumbers aren't my favorite.", &[("cucumbers", Against)]),
        (
            "Yeah me too, more sunshine would be nice",
            &[("sunshine", For)],
        ),
        (
            "If we're talking favorite planets, I'd go with Saturn",
            &[("saturn", For)],
        ),
        (
            "That would be sad because I'm a big cheese girl",
            &[("cheese", For)],
        ),
        (
            "Oh gosh, I hate doing laundry they take forever",
            &[("doing laundry", Against)],
        ),
        (
            "I'm super fascinated by geology and it is something I would study forever",
            &[("geology", For)],
        ),
        // Lists of favourites: one liking per item; "rock and roll" stays whole.
        (
            "My favorites are pizza, tacos, or sushi.",
            &[("pizza", For), ("tacos", For), ("sushi", For)],
        ),
        (
            "Some of my favorite bands are Radiohead and the Smiths.",
            &[("radiohead", For), ("smiths", For)],
        ),
        ("My favourite is rock and roll.", &[("rock and roll", For)]),
        (
            "Country music just isn't for me.",
            &[("country music", Against)],
        ),
        ("Golf simply isn't fun.", &[("golf", Against)]),
        ("I'm more of a dog person.", &[("dog", For)]),
        ("Love me some tacos.", &[("tacos", For)]),
        ("I never get tired of the ocean.", &[("ocean", For)]),
        ("Can't beat a good burrito.", &[("good burrito", For)]),
        ("Nothing like a good book.", &[("good book", For)]),
        ("Going hiking is always a blast.", &[("going hiking", For)]),
        ("I highly recommend Dune.", &[("dune", For)]),
        ("I would recommend sand harbor", &[("sand harbor", For)]),
        ("I'd recommend you try the soup.", &[]),
        ("Robots rule.", &[("robots", For)]),
        // Verbs whose stem ends in -ss or -x: "impress me", not only "impresses me".
        ("Grand pianos impress me.", &[("grand pianos", For)]),
        ("Long baths relax me.", &[("long baths", For)]),
        ("Grey skies depress me.", &[("grey skies", Against)]),
        // Conversational words and drawn-out sounds before a topic are left out.
        (
            "sorry okay peanut butter is good tho",
            &[("peanut butter", For)],
        ),
        (
            "noooooo breaking bad seems so dumb.",
            &[("breaking bad", Against)],
        ),
        (
            "I like stuff like kale and almond milk lol",
            &[("kale", For), ("almond milk", For)],
        ),
        ("Oh, thats cool, I actually like r&b too", &[("r&b", For)]),
        (
            "not having groceries stresses me out",
            &[("not having groceries", Against)],
        ),
        // How big a fan, not of what.
        ("Oh my goodness, I'm a huge fan", &[]),
        // The one being talked about, a moment, a childhood: no standing view.
        ("I absolutely cannot stand the movie", &[]),
        ("The weather was terrible yesterday.", &[]),
        (
            "Back when I was in 3rd grade, I loved crayons because they were bright.",
            &[],
        ),
        ("Doesn't sound fun haha", &[]),
        ("Hahaha that is just a funny mental image", &[]),
    ]);
}

#[test]
fn what_people_say_in_passing_is_not_a_preference() {
    use Stance::{Against, For};
    assert_reads(&[
        // Sounds of conversation are not topics, before a topic or instead of one.
        ("oooh! i like that, but they are so expensive!", &[]),
        ("Hm sounds sweet.", &[]),
        ("Mmm nope.", &[]),
        ("oh shoot wikipedia is never wrong", &[("wikipedia", For)]),
        ("Oh. Ironic for sure", &[]),
        ("Pizza, for sure.", &[("pizza", For)]),
        // Pronouns a contraction hides, the rest, someone: nothing the memory can keep.
        ("That'd annoy me to pieces.", &[]),
        ("The rest were just good feelings.", &[]),
        (
            "Someone else is moving in and I am not too excited about that",
            &[],
        ),
        // Cut inside a quotation; a whole one loses its marks.
        (
            "Mantis also goes \"something is wrong\" because she realized.",
            &[],
        ),
        ("I love the song \"Hey Jude\".", &[("song hey jude", For)]),
        (
            "I really like my friend Chloe you know",
            &[("friend chloe", For)],
        ),
        // The ones being talked about, owned or plural.
        ("I do think our class is a huge joke.", &[]),
        ("Maybe, I like my classes so I'm doing pretty good", &[]),
        ("I have never been, but the pictures are amazing", &[]),
        // The "to" of a later clause is no comparison; "I'm done with school" is finished.
        (
            "I prefer in person overall because it pushes me to actually express things",
            &[],
        ),
        ("Computer graphics class and then im done with school.", &[]),
        (
            "And I've put time into this chat research stuff but it'll be over after tomorrow",
            &[],
        ),
        // A number, a bare light verb, an adjective cut from its noun, "wait for me".
        ("oh well 10 is a good number to connect with", &[]),
        ("I like doing a lot of hands-on work", &[]),
        ("I do enjoy a fresh, crisp benjamin.", &[]),
        ("Hold up wait for me!", &[]),
        ("dawg plantains are so GOOD", &[("plantains", For)]),
        ("I hate the cold.", &[("cold", Against)]),
        // Time and degree, a verb in progress: no verdict.
        ("Hezbollah was originally based out of Lebanon", &[]),
        (
            "I guess the script writers were having a hard time making and interesting show.",
            &[],
        ),
        ("Also everyone (understandably) was angry at Star-Lord", &[]),
        ("and got rejected every time", &[]),
        ("But not till next year for sure.", &[]),
        ("I think every part is important", &[]),
        ("so head over heels for her", &[]),
        ("Buuuuut, to kill the suspense, I'm a girl, too.", &[]),
        (
            "Ya I liked the experience but it wasn't anything like I had expected.",
            &[],
        ),
        ("Much like a skunk smells natural", &[]),
        ("the only weird thing is hugging a stranger", &[]),
        ("Me too, I just like the change.", &[]),
        // What the persona met, judged by the next clause or sentence.
        (
            "I went to red house in slc, and it was super good.",
            &[("red house in slc", For)],
        ),
        (
            "We watched Inception last night. It was so boring.",
            &[("inception", Against)],
        ),
        (
            "I tried sushi for the first time. It was amazing!",
            &[("sushi", For)],
        ),
        ("I watched the movie and it was great.", &[]),
        ("I saw some here where I live. It was fun.", &[]),
        // A trait told as a clause is said of its owner; a trait named is the topic.
        (
            "something I don't like about USA is that everyone is too individualistic",
            &[("usa", Against)],
        ),
        (
            "The thing I love about jazz is how free it is.",
            &[("jazz", For)],
        ),
        (
            "My favorite thing about fall is how the leaves turn.",
            &[("fall", For)],
        ),
        (
            "What I don't like about cities is the noise.",
            &[("noise", Against)],
        ),
        (
            "I enjoy talking to new people.",
            &[("talking to new people", For)],
        ),
        (
            "Okay no jokes though pigs are TERRIFYING!!!",
            &[("pigs", Against)],
        ),
        (
            "Ahaha well thats fine, hot dogs are kinda gross",
            &[("hot dogs", Against)],
        ),
        (
            "Napoleon Dynamite is pretty bomb",
            &[("napoleon dynamite", For)],
        ),
        ("Which is definitely better than other ghosts.", &[]),
        ("Nice man that is awesome!", &[]),
        ("I really like chatting with you, too.", &[]),
        ("It never hurts to try.", &[]),
        ("Good. Love the weather today", &[]),
        // People's chat, tuning set 2: moments, talk about the talk, slots and surprise.
        ("Oh man that's too bad! My family loves football!", &[]),
        (
            "Poppy see chicken casserole sounds real good right now!",
            &[],
        ),
        (
            "the weather was heavenly today, I am eternally grateful.",
            &[],
        ),
        ("Trump is a good topic", &[]),
        (
            "The biggest challenge for me was balancing school life and home life.",
            &[],
        ),
        ("seven hour drive? Wow", &[]),
        ("Sailing? Love it.", &[("sailing", For)]),
        ("Tea is a good choice for mornings.", &[("tea", For)]),
        (
            "Green tea for me, I still prefer it over coffee.",
            &[("green tea", For), ("coffee", Against)],
        ),
        ("I dig deeper than most.", &[]),
        ("I like the red ones", &[]),
        ("I agree it is good to bond with.", &[]),
        ("I like just about anything that is baked.", &[]),
        // What was missed in passing, now read.
        (
            "I personally am not a fan of the Lord of the Rings.",
            &[("lord of the rings", Against)],
        ),
        ("But I also am a huge Guardians fan", &[("guardians", For)]),
        (
            "favorite disney movie would have to be frozen haha",
            &[("frozen", For)],
        ),
        ("I try to avoid politics.", &[("politics", Against)]),
        (
            "The one I like most on Hulu is Brooklyn 99",
            &[("brooklyn 99", For)],
        ),
        ("Though Dr. Strange was good", &[("dr strange", For)]),
        (
            "I don't like creative writing all that much.",
            &[("creative writing", Against)],
        ),
        (
            "Being stressed is rarely helpful.",
            &[("being stressed", Against)],
        ),
        (
            "I refuse to support companies that exploit workers.",
            &[("companies that exploit workers", Against)],
        ),
        // Feelings of others, popularity, phrasal verbs and fillers are not verdicts.
        ("I think my mom is just fascinated by islands.", &[]),
        ("BBQ is so popular in the south.", &[]),
        ("Looking over 224 and whatnot.", &[]),
        ("Technology can really take over people's lives.", &[]),
        ("So I like asked him a question.", &[]),
        ("I really enjoyed reading that book.", &[]),
        ("Nope not really.", &[]),
        (
            "She doesn't know whether I prefer dark or milk chocolate.",
            &[],
        ),
        ("Except he is better than Elastigirl.", &[]),
        // People's chat, second sample.
        (
            "I am a big Marvel fan :) Well... mostly the MCU.",
            &[("marvel", For)],
        ),
        (
            "Runescape got way too complicated",
            &[("runescape", Against)],
        ),
        (
            "Either our system gets better or people stop being jerks.",
            &[],
        ),
        ("My baby was too little for the trip.", &[]),
        ("yeah i love that about math", &[("math", For)]),
        (
            "I'd rather have honey sticks than pixie sticks",
            &[("honey sticks", For), ("pixie sticks", Against)],
        ),
        (
            "i've really been into Arctic Monkeys lately haha wbu?",
            &[("arctic monkeys", For)],
        ),
        (
            "I just think machine learning is super cool.",
            &[("machine learning", For)],
        ),
        (
            "I'm like really interested in ice cream",
            &[("ice cream", For)],
        ),
        ("Im in to computers haha", &[("computers", For)]),
        ("I'm loving it! (Love McDonalds)", &[("mcdonalds", For)]),
        (
            "I also enjoy almost anything to do with chicken.",
            &[("chicken", For)],
        ),
        (
            "not having groceries stresses me out",
            &[("not having groceries", Against)],
        ),
        ("Not that the prompts are bad!", &[]),
        ("Most of my garden got mushy this week.", &[]),
        // People's chat, third sample.
        (
            "Elbow pasta! Hahahaha, I love that!",
            &[("elbow pasta", For)],
        ),
        ("Yep! Exactly like that.", &[]),
        ("A volcano erupted! Scary stuff.", &[]),
        ("Can't live without sarcasm", &[("sarcasm", For)]),
        ("Tad R Callister is a legend", &[("tad r callister", For)]),
        (
            "It's tough but super important to listen well",
            &[("listen well", For)],
        ),
        (
            "My favorite movie just changed to Hidden Figures.",
            &[("hidden figures", For)],
        ),
        (
            "I hate wondering things and not knowing the answer.",
            &[("wondering things", Against)],
        ),
        (
            "I like heavy metal and oddly enough it calms me down",
            &[("heavy metal", For)],
        ),
        (
            "The ending was confusing, but thors entrance was amazing",
            &[("thors entrance", For)],
        ),
        (
            "I don't like the thought of commercial fishing.",
            &[("commercial fishing", Against)],
        ),
        (
            "Something I don't like about the suburbs is the traffic.",
            &[("traffic", Against)],
        ),
        ("I love Emily and Kelly", &[("emily", For), ("kelly", For)]),
        // A third precision round.
        ("My day was really good until I lost my phone.", &[]),
        ("Our football team is trash", &[]),
        ("Then turning it off is murder", &[]),
        ("Maybe a little over a week", &[]),
        ("And the skin healed over really well", &[]),
        ("The MPC is right next to the bookstore", &[]),
        ("Seems like there are a lot of funny issues", &[]),
        (
            "i love breakfast tacos sooo much",
            &[("breakfast tacos", For)],
        ),
        (
            "Christian Bale I'd say is the best Batman",
            &[("christian bale", For)],
        ),
        (
            "I try to avoid drama as much as possible",
            &[("drama", Against)],
        ),
        // A fourth precision round.
        ("It's true some are better than others.", &[]),
        ("The gun weighs over 80 pounds.", &[]),
        ("I am over 18 years of age.", &[]),
        ("Heritage over by the creamery", &[]),
        ("Yep! I really like those ones.", &[]),
        ("Hopefully the banana isn't too ripe!", &[]),
        ("I really like the fact that I can't mess it up.", &[]),
    ]);
}

#[test]
fn unpunctuated_chat_sarcasm_and_changed_minds() {
    use Stance::{Against, For};
    assert_reads(&[
        (
            "idk i just dont like horror movies",
            &[("horror movies", Against)],
        ),
        (
            "ngl i kinda hate group projects",
            &[("group projects", Against)],
        ),
        (
            "rainy days >>> sunny days",
            &[("rainy days", For), ("sunny days", Against)],
        ),
        (
            "The best thing about winter is hot soup.",
            &[("hot soup", For)],
        ),
        (
            "My least favourite chore is ironing.",
            &[("ironing", Against)],
        ),
        (
            "If there's one thing I can't stand, it's loud chewing.",
            &[("loud chewing", Against)],
        ),
        // Still a hypothetical.
        ("If I had a garden, I'd grow tomatoes.", &[]),
        ("Oh great, another Monday.", &[("monday", Against)]),
        (
            "Yeah, because waiting in line for an hour is SO much fun.",
            &[("waiting in line for an hour", Against)],
        ),
        (
            "Sure, reality TV is great. Not.",
            &[("reality tv", Against)],
        ),
        (
            "I used to hate olives, but now I adore them.",
            &[("olives", For)],
        ),
        (
            "Mountains are great for hiking, but beaches are where I truly relax.",
            &[("mountains", For), ("beaches", For)],
        ),
        (
            "Give me a good mystery novel and I'm happy.",
            &[("good mystery novel", For)],
        ),
        ("Love the new season of that show!", &[]),
    ]);
}

/// Provenance holds for every reader, the ones that span two sentences included: over all
/// 1 200-odd shipped utterances, each opinion's evidence is quoted from its message, its
/// text is one clean sentence, and its topic is neither empty nor a pronoun.
#[test]
fn every_opinion_quotes_its_message_and_reads_as_a_sentence() {
    use crate::extract::evaluate::{SHIPPED_SETS, parse_labelled};
    let extractor = RulesExtractor::new(8);
    let mut opinions = 0;
    for (set, text) in SHIPPED_SETS {
        for row in parse_labelled(text).unwrap() {
            for opinion in extractor.extract_text(&row.text) {
                opinions += 1;
                assert!(
                    super::super::evidence_in_message(&opinion.evidence, &row.text),
                    "{set}: evidence {:?} not in {:?}",
                    opinion.evidence,
                    row.text
                );
                let first = opinion.opinion.chars().next().unwrap();
                assert!(
                    !first.is_lowercase() && opinion.opinion.ends_with(['.', '!', '?']),
                    "{set}: {:?}",
                    opinion.opinion
                );
                assert!(
                    !opinion.name.is_empty() && !NON_TOPIC.contains(&opinion.name.as_str()),
                    "{set}: topic {:?} of {:?}",
                    opinion.name,
                    row.text
                );
            }
        }
    }
    assert!(opinions > 900, "{opinions}");
}

#[test]
fn evidence_is_the_sentence_it_came_from() {
    let found = RulesExtractor::new(8).extract_text("Hello there. I adore owls, they are wise.");
    assert_eq!(found[0].evidence, "I adore owls, they are wise.");
    assert!(super::super::evidence_in_message(
        &found[0].evidence,
        "Hello there. I adore owls, they are wise."
    ));
}

/// The second round on people's chat (2026-11-26): each form it reads, and the look-alikes
/// it must not.
#[test]
fn chat_lists_denials_and_the_people_of_ones_life() {
    use Stance::{Against, For};
    let cases: &[(&str, &[(&str, Stance)])] = &[
        // A list with commas alone, the "to" kept for each item.
        (
            "i like to learn languages, try new things, cook, listen to music..",
            &[
                ("learning languages", For),
                ("trying new things", For),
                ("cooking", For),
                ("listening to music", For),
            ],
        ),
        (
            "I like pop, country, latin",
            &[("pop", For), ("country", For), ("latin", For)],
        ),
        // A denied liking of "X or Y" denies both; a liked "X or Y" may be a choice.
        (
            "I dont like rap or hard rock",
            &[("rap", Against), ("hard rock", Against)],
        ),
        ("i like tea or coffee", &[("tea or coffee", For)]),
        // "or" inside one description is not a list.
        (
            "I do not like too sugary or fattening foods.",
            &[("too sugary or fattening foods", Against)],
        ),
        // Adverbs before the denial, and chat's openers.
        (
            "Like, I personally don't like math or science",
            &[("math", Against), ("science", Against)],
        ),
        (
            "Or chicken alfredo is pretty good too",
            &[("chicken alfredo", For)],
        ),
        // A person of one's own life judged as they are; one's life told is not a view.
        ("My mom is the best!", &[("mom", For)]),
        (
            "My history teacher is hilarious",
            &[("history teacher", For)],
        ),
        ("my mom is freaking out though", &[]),
        ("my dad was really cool back then", &[]),
        ("my day was really good", &[]),
        // What all are said to dislike, the speaker dislikes.
        (
            "but no one likes complications",
            &[("complications", Against)],
        ),
        (
            "Travelling should always be a priority in life.",
            &[("travelling", For)],
        ),
        ("I'm all about comfort food.", &[("comfort food", For)]),
        // A topic cut before its noun names nothing.
        ("or even just be a rock", &[]),
        ("Oh chick fil a is the best.", &[("chick fil a", For)]),
    ];
    assert_reads(cases);
}

#[test]
fn chat_stretches_words_asks_first_writes_have_in_full_and_reacts() {
    use Stance::{Against, For};
    let cases: &[(&str, &[(&str, Stance)])] = &[
        // A stretched word is read as the word: two letters when that is one the lexicons
        // know, else one.
        ("reading is sooooo goooood", &[("reading", For)]),
        ("I loooove pizza", &[("pizza", For)]),
        ("pizza is toooo greasy", &[("pizza", Against)]),
        // "I have" spelled out before a liking's past participle; not before "like".
        ("I have really enjoyed dancing.", &[("dancing", For)]),
        ("I have never liked olives", &[("olives", Against)]),
        ("I have like three cats", &[]),
        // A question names what the next sentence's pronoun judges; it holds no view itself.
        (
            "What are your thoughts on tattoos? I think they are super cool.",
            &[("tattoos", For)],
        ),
        ("Have you tried sushi? I love it!", &[("sushi", For)]),
        ("Do you like cats? I hate them.", &[("cats", Against)]),
        ("Have you tried sushi?", &[]),
        ("Have you tried sushi? My brother loves it.", &[]),
        // Being is part of the topic: "being competitive", not "competitive".
        ("i like being competitive", &[("being competitive", For)]),
        // A reaction to what was said, what the other person described, a moment of
        // something shared: no topic a persona could keep.
        ("ooh good idea ok sounds good haha", &[]),
        ("The day you're describing sounds amazing!", &[]),
        ("the place you mentioned sounds great", &[]),
        ("yeah I liked the ankle break part", &[]),
        (
            "The dating scene isn't exactly the greatest",
            &[("dating scene", Against)],
        ),
    ];
    assert_reads(cases);
}

#[test]
fn topics_the_conversation_points_at_are_not_kept() {
    use Stance::{Against, For};
    assert_reads(&[
        // Owned by someone present, or seen by them: only the conversation names it.
        ("i loved having his dog on the wharf", &[]),
        ("But I did like the parts I saw!", &[]),
        // What is left when the clause is cut off is a placeholder: nothing named.
        (
            "I am not really into the things I was into as a kid either.",
            &[],
        ),
        ("I like the stuff I grew up with", &[]),
        // A clause of its own after the topic is cut off, not kept in it.
        (
            "I'm not a huge fan of Anime I do have to admit",
            &[("anime", Against)],
        ),
        // Where the speaker is: left out of the topic, or the whole of it.
        (
            "the mountains out here are so awesome",
            &[("mountains", For)],
        ),
        ("I loved being there", &[]),
        ("and the view is great as well.", &[]),
        ("The line was too long.", &[]),
        ("And the following show seems so predictable", &[]),
        // What it does to the speaker is not part of its name; a pronoun cut loose is none.
        ("Thunder makes me feel safe, oddly.", &[("thunder", For)]),
        ("Let me is really good maybe", &[]),
        // A discourse phrase among a list's items is not one of them.
        (
            "I like Vanilla, of course, and warm scents, and coconut.",
            &[("vanilla", For), ("warm scents", For), ("coconut", For)],
        ),
        (
            "Either way I feel like warm silvery liquid would be nasty",
            &[],
        ),
    ]);
}

/// What the learned extractor's finds are checked against (`not_the_speakers_view`): the
/// sentence forms the labels hold no opinion in, named; a plain view is none of them.
#[test]
fn sentences_that_voice_no_view_of_the_speakers_own() {
    for (sentence, expected) in [
        (
            "Are you sick of super hero movies or something?",
            Some("question"),
        ),
        (
            "Everyone tells me the new museum is stunning.",
            Some("reported"),
        ),
        ("My friend says golf is boring.", Some("reported")),
        ("So you're saying tea is better.", Some("reported")),
        (
            "If I had the time, I would love pottery.",
            Some("hypothetical"),
        ),
        ("As a child, I loved trains.", Some("past")),
        (
            "I heard that the Stanford YSA ward is pretty good.",
            Some("reported"),
        ),
        ("Oh i've heard MDT is super cool!!", Some("reported")),
        ("My roommate loves CS Lewis.", Some("reported")),
        ("My little sister hates broccoli.", Some("reported")),
        (
            "Yeah I wish I liked running as much as you do.",
            Some("hypothetical"),
        ),
        ("I heard of Mistborn last year and I love it.", None),
        ("My husband and I love hiking.", None),
        ("My favorite food is pizza.", None),
        ("Honestly, I absolutely love green tea.", None),
        ("Thunder makes me feel safe, oddly.", None),
        ("I'm sick of super hero movies.", None),
    ] {
        assert_eq!(not_the_speakers_view(sentence), expected, "{sentence}");
    }
}

/// Readings refused in stop 61, each written from a wrong find of the chat tuning sets, beside
/// the readings next to them that must stay.
#[test]
fn shares_tautologies_passives_and_an_it_that_stands_for_a_doing_judge_nothing() {
    use Stance::{Against, For};
    let cases: &[(&str, &[(&str, Stance)])] = &[
        // A share or an any-at-all is not a thing held a view of; the thing itself is.
        ("To be fair most people on campus are pretty fit", &[]),
        (
            "But wherever is good, as long as that's where I'm needed",
            &[],
        ),
        ("Everything canadian is nice.", &[]),
        ("Canadian geese are nice.", &[("canadian geese", For)]),
        // The same thing named twice; what was done to it.
        ("Hahaha. A friend list is a friend list!", &[]),
        (
            "and Toby was almost killed by her because he underestimated",
            &[],
        ),
        // "it" stands for the doing after it, not for what came before.
        ("gotta go but it was nice meeting you!", &[]),
        (
            "We watched Inception last night. It was so boring.",
            &[("inception", Against)],
        ),
        (
            "I watched Dune, and it was worth seeing again",
            &[("dune", For)],
        ),
        ("It's so fun to bake bread.", &[("bake bread", For)]),
        ("but it is very friendly to my wallet", &[]),
        // Remarks of the moment, answers to a question not seen, what comes to mind.
        ("That's great! We need more people like you.", &[]),
        ("The world needs more kindness.", &[("kindness", For)]),
        ("Oh okay, that's awesome then! Playing games all day!", &[]),
        ("during the summer semester yes", &[]),
        ("Podcasts, not so much.", &[("podcasts", Against)]),
        (
            "I think of ASDF, when the cake is sad about losing his family.",
            &[],
        ),
        (
            "I think North Korea is smart enough to not try anything",
            &[],
        ),
        ("I think my best friends are cool with that.", &[]),
        ("I think lying is wrong.", &[("lying", Against)]),
        // A liking of a past, and one left unnamed.
        ("I LOVED Christmas when I was younger", &[]),
        ("I like to play both.", &[]),
        ("I love Christmas.", &[("christmas", For)]),
    ];
    assert_reads(cases);
}

/// A doing liked "to" is named as the doing, spelt as English spells it; what follows "to"
/// that is no verb stays as it was.
#[test]
fn a_doing_liked_to_is_named_as_the_doing() {
    let cases = [
        ("to hike", "hiking"),
        ("to learn languages", "learning languages"),
        ("to swim in the sea", "swimming in the sea"),
        ("to quit", "quitting"),
        ("to run", "running"),
        ("to read", "reading"),
        ("to cook", "cooking"),
        ("to sing", "singing"),
        ("to visit museums", "visiting museums"),
        ("to open presents", "opening presents"),
        ("to eat early", "eating early"),
        ("to ski", "skiing"),
        ("to lie in", "lying in"),
        ("to see friends", "seeing friends"),
        ("to be cold when i sleep", "being cold when i sleep"),
        ("to draw", "drawing"),
        ("to fix cars", "fixing cars"),
        ("to julienne my carrots", "julienning my carrots"),
        ("to go hiking", "going hiking"),
        ("to go get food", "to go get food"),
        ("to cook and bake", "cooking and baking"),
        ("to read and write poems", "reading and writing poems"),
        ("to the beach", "to the beach"),
        ("to school", "to school"),
        ("to Paris", "to Paris"),
        ("hiking", "hiking"),
    ];
    for (topic, named) in cases {
        assert_eq!(infinitive_as_gerund(topic), named, "{topic}");
    }
    use Stance::{Against, For};
    assert_reads(&[
        ("I love to hike.", &[("hiking", For)]),
        ("I like to swim.", &[("swimming", For)]),
        ("I hate to wait in line.", &[("waiting in line", Against)]),
    ]);
}

#[test]
fn too_much_or_the_least_of_a_good_thing_is_against_it() {
    use Stance::{Against, For};
    assert_reads(&[
        // From the fifth chat tuning set, where each read for: a wrong find and a miss.
        (
            "But, regular cake is too sweet.",
            &[("regular cake", Against)],
        ),
        (
            "even the normal milk is too rich in my opinion",
            &[("normal milk", Against)],
        ),
        ("Breast is my least favorite.", &[("breast", Against)]),
        // Praise that cannot be had in excess stays praise.
        ("Tacos are too good.", &[("tacos", For)]),
        ("Puppies are too cute.", &[("puppies", For)]),
        ("Hiking is so nice.", &[("hiking", For)]),
    ]);
}
