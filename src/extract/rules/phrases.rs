//! Fixed phrases that carry a stance on their own, whatever the topic: "I have a soft spot for
//! X", "I could live without X", "I'm all for X", "X deserves more love", "X never appealed to
//! me", "X has so much charm", "nothing is more relaxing than X", "X is not for me", "X, not so
//! much". Each gives a topic (still raw: `make` cleans it) and a stance.

use std::sync::LazyLock;

use regex::Regex;

use super::lexicon::polarity;
use crate::model::Stance;

/// Adverbs that may sit between "I" and the phrase's verb without changing it.
const I_ADVERBS: &str = r"(?:(?:really|truly|genuinely|honestly|always|also|still|just|personally|definitely|certainly|absolutely|totally|secretly|kind of|sort of) )*";

/// "I have a soft spot for X", "I've got a real weakness for X", "I have a deep respect for X".
static HAVE_A_LIKING_FOR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^i(?:'ve| have| hold| harbou?r| feel| confess| nurse| bear| must confess| confess to| share)? {I_ADVERBS}(?:got |had )?(?:a |an )?(?:(?:real|deep|huge|big|massive|great|genuine|soft|special|particular|certain|healthy|enormous|profound|strange|weird|secret|total|lifelong|serious|bit of a|lot of|such a) )*(?:soft spot|weakness|thing|love|fondness|affection|respect|admiration|appreciation|passion|liking|taste|obsession|sweet tooth|place in my heart|reverence|enthusiasm) for (.+)"
    ))
    .unwrap()
});
/// "I have no patience for X", "I've got no time for X", "I have little love for X".
static HAVE_NO_TIME_FOR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^i(?:'ve| have| hold| harbou?r| feel| bear)? {I_ADVERBS}(?:got )?(?:no|zero|little|not much|absolutely no|no real) (?:(?:great|real|particular|special|big|deep) )?(?:patience|time|love|use|interest|respect|tolerance|appetite|desire|fondness|affection|sympathy|regard|stomach|taste|need) (?:at all )?for (.+)"
    ))
    .unwrap()
});
/// "I hold X in high esteem" / "in contempt".
static HOLD_IN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^i {I_ADVERBS}(?:hold|keep) (.+?) in (?:very |the |such )?(high|highest|great|the highest|low|lowest|contempt)\b"
    ))
    .unwrap()
});
/// "I consider X a treasure", "I regard X as nonsense", "I see X as a gift".
static CONSIDER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^i {I_ADVERBS}(consider|regard|see|view|count|call|rate|deem) (.+)"
    ))
    .unwrap()
});
/// "I could (happily) live without X" (against); "I can't live without X" (for).
static LIVE_WITHOUT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^i(?: (?:(could|can)|(can't|cannot|couldn't|could not|can never|could never|would be lost))|'d be lost) (?:(?:happily|easily|honestly|totally|definitely|gladly|really|probably|certainly|absolutely|quite|imagine|even|possibly|ever) )*(?:live|do|manage|go|survive|function|get by|imagine life|go a day|get through a day)? ?without (.+)").unwrap()
});
/// "I'm all for X", "I'm a big believer in X", "I'm against X", "I'm not against X".
static POSITION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^i(?:'m| am) (not |never )?(?:(?:really|honestly|totally|completely|fully|100%|very much|firmly|definitely|strongly|so|absolutely|personally|all) )*(?:(for|in favou?r of|on board with|(?:a |an )?(?:big |firm |great |huge |strong |true |total |staunch )?(?:believer|advocate|champion|supporter) (?:in|of|for))|(against|opposed to|no fan of|not a fan of)) (.+)").unwrap()
});
/// "There's nothing I love more than X" / "nothing I hate more than X".
static NOTHING_I_LOVE_MORE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:there's|there is|there are) (?:nothing|few things) (?:that )?i (?:(?:really|truly|honestly) )*(love|enjoy|like|adore|relish|prefer|hate|dislike|dread|despise|loathe|detest|fear|resent|can't stand) (?:more|better|quite as much|as much) (?:than|as) (.+)").unwrap()
});
/// "Nothing is more relaxing than X", "few things are as satisfying as X".
static NOTHING_IS_MORE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:nothing|few things|not much|little) (?:in (?:the world|life) )?(?:is|are|feels?|sounds?|tastes?|looks?|seems?|smells?) (?:more|as|quite as|so) ([a-z'-]+) (?:than|as) (.+)").unwrap()
});
/// "X is not for me", "X are really not for me", "X just isn't for me".
static NOT_FOR_ME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (?:(?:just|really|definitely|honestly|simply|totally|probably|still|truly|absolutely) )*(?:(?:is|are|'s|'re) (?:(?:just|really|definitely|honestly|simply|totally|probably|still|truly|absolutely) )*(?:not|never|no longer)|isn't|aren't|ain't) (?:(?:really|quite|exactly|entirely|for) )*(?:for me|my style|my speed|my scene)\b").unwrap()
});
/// "X, not so much" / "X, yes": the verdict follows the topic without a verb.
static VERDICT_AFTER_TOPIC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^([a-z][a-z0-9' -]*?),? (?:(not so much|not really|not for me|no thanks|hard pass|nope|never again|not a fan)|(yes|yes please|always|every time|absolutely|all day|for sure|a must|love it|love them))$").unwrap()
});
/// "X deserves more love" (for); "X deserves to disappear" (against).
static DESERVES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (?:(?:really|truly|honestly|definitely|totally|absolutely|so) )*deserves? (?:(?:so|much|far|way|a lot|a little|a bit|a whole lot|a lot) )*(?:(more|better|recognition|credit|love|praise|respect|attention|a medal|an award|fans|funding|support|hype|a comeback|a revival)|(to (?:disappear|die|vanish|be forgotten|go away|be banned|fail|be cancell?ed|go extinct|be retired)|(?:all )?the (?:hate|criticism|backlash|flak|bad reviews)))\b").unwrap()
});
/// "X has so much charm" (for); "X has no soul" (against).
static HAS_QUALITY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (?:(?:really|just|honestly|still|always|truly|simply) )*(?:has|have|had) (?:(no|zero|absolutely no|little|not much)|so much|such|real|a lot of|loads of|tons of|plenty of|a certain|a real|great|a lovely|lovely|a special|a|an|this|that) (?:(?:real|certain|special|lovely|quiet|gentle|unique) )*(charm|character|soul|personality|heart|warmth|style|flavou?r|depth|class|elegance|magic|beauty|grace|spirit|atmosphere|life|point|substance|appeal|nuance|sense of humou?r|soul to it|charm to it)\b").unwrap()
});
/// What a thing does to the persona, beyond the feelings the main rules know: "X puts me to
/// sleep", "X never appealed to me" (against); "X cheers me up", "X keeps me sane" (for).
static DOES_TO_ME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (?:(?:really|always|just|honestly|genuinely|kind of|sort of|totally|absolutely|still|reliably|instantly|somehow|never fails? to|tends? to|seems? to|has always|have always|has|have|had) )*(?:(puts? me to sleep|tests? my patience|tries my patience|intimidates? me|intimidated me|confuses? me|confused me|stress(?:es)? me out|depress(?:es)? me|exhausts? me|overwhelms? me|gives? me (?:a headache|headaches|the creeps|the ick|anxiety|a migraine|hives)|wears? me out|bums? me out|gross(?:es)? me out|creeps? me out|freaks? me out|puts? me off|put me off|turns? me off|upsets? me|bothers? me|troubles? me|saddens? me|disturbs? me|offends? me|appalls? me|angers? me|infuriates? me|bugs? me|disgusts? me|repels? me|never appealed to me|(?:doesn't|don't|does not|do not|didn't|did not) appeal to me|(?:never|doesn't|don't|didn't) (?:do|did|does) (?:it|much|anything) for me|brings? out the worst in (?:me|people|everyone|us)|leaves? me (?:cold|unmoved|indifferent|flat|underwhelmed)|left me (?:cold|unmoved|indifferent|flat|underwhelmed)|(?:does|do) my head in|makes? my skin crawl|ruins? my day|sets? my teeth on edge|drains? (?:me|my energy))|(cheers? me up|cheer me up|brightens? (?:up )?my day|lifts? my (?:mood|spirits)|makes? my day|made my day|warms? my heart|keeps? me (?:sane|calm|going|happy|grounded|sharp|young|balanced|focused|centred|centered|healthy)|impress(?:es)? me|amazes? me|excites? me|energi[sz]es? me|relax(?:es)? me|comforts? me|recharges? me|restores? me|refreshes? me|rejuvenates? me|brings? out the best in (?:me|people|everyone|us)|brings? me (?:(?:a|such|so much|real|genuine|great|a strange|a real|an odd|a deep|a quiet|pure) )*(?:sense of )?(?:joy|peace|comfort|calm|happiness|delight|pleasure|contentment)|(?:calms?|settles?) me down|grounds? me|amuses? me|intrigues? me|entertains? me|appeals? to me|appealed to me|(?:always )?does it for me|speaks? to me|puts? me in a good mood|(?:has |have )?changed my life|keeps? my (?:brain|mind|heart|soul) (?:happy|busy|young|sharp|alive|full)|(?:has |have )?won me over|won me over|helps? me (?:focus|think|relax|sleep|unwind|concentrate|breathe|recharge|wind down|switch off)|cracks? me up|makes? me laugh|makes? me (?:so |really |very )?(?:excited|curious|nostalgic|grateful|hopeful|peaceful|giddy|cheerful)))\b").unwrap()
});
/// "autotune ruins good voices", "leaf blowers spoil quiet mornings".
static RUINS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (?:(?:always|totally|completely|just|really|honestly|usually|simply) )*(?:ruins?|spoils?|wrecks?|kills?|destroys?|cheapens?) (?:the|my|any|every|a|an|our|good|great|quiet|perfectly|everything|so many|most|whatever)\b").unwrap()
});

/// "X is a hard no for me", "X is a yes from me", "X is a must for me": a verdict addressed
/// to the persona itself. Bare yes and no count only with "from me" / "for me".
static VERDICT_FROM_ME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (?:is|are|'s|'re|remains?) (?:(?:a|an|always|definitely|totally|still|just|honestly) )*(?:(?:hard|big|firm|definite|solid|resounding|strong|total|absolute|huge|clear|massive) )*(?:(yes|yay|must|must-have|keeper)|(no|nope|pass|no-go|nah|never)) (?:from|for) me\b").unwrap()
});
/// "X never disappoints", "X never gets old" (for); "X has never clicked for me", "X doesn't
/// work for me" (against).
static NEVER_FAILS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (?:(?:just|really|honestly|simply|still|somehow) )*(?:(never (?:disappoints?|gets? old|goes? out of (?:style|fashion)|gets? boring|lets? me down|fails? to (?:impress|amaze|delight|charm|inspire|move|calm|humble|fascinate|thrill|comfort|cheer me up|make me (?:smile|laugh)|lift my mood)))|(?:(?:has|have|had) )?(?:never (?:really |quite |once )?(?:clicked|clicks|click|worked|works|work|landed|lands|land|resonated|resonates|resonate)|(?:doesn't|don't|didn't|does not|do not|did not) (?:really |quite |ever )?(?:work|click|land|resonate)) (?:for|with) me)\b").unwrap()
});
/// "I could eat dumplings every single day", "I could listen to Bach on repeat".
static COULD_HAVE_FOREVER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^i (?:could|can) (?:(?:happily|honestly|literally|easily|probably|seriously|genuinely) )*(?:eat|drink|watch|read|listen to|play|hear|rewatch|reread|look at|live on) (.+?) (?:every (?:single )?(?:day|night|week)|all day(?: long)?|forever|on repeat|for days|for hours|nonstop|non-stop|for the rest of my life)\b").unwrap()
});
/// "I never get tired of the sea", "I could never tire of Bach", "love me some tacos".
static NEVER_TIRE_OF: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^i (?:(?:could|can|will|would|just|honestly|really|seriously|genuinely|simply) )*(?:never|can't|cannot|couldn't|won't|don't|do not) (?:ever )?(?:get (?:tired|sick|bored) of|grow (?:tired|bored) of|tire of)\s+(.+)|^i (?:(?:really|just|do|sure) )*love me (?:some|a|an|my) (.+)").unwrap()
});
/// "Modern architecture often strikes me as cold": the impression is the verdict.
static STRIKES_ME_AS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (?:(?:often|always|just|really|usually|somehow|still|honestly) )*(?:strikes?|struck) me as (.+)").unwrap()
});
/// "I'd rather not spend an evening at a nightclub": against what is declined.
static RATHER_NOT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^i(?:'d| would) (?:much |really |honestly )?rather not (.+)").unwrap()
});
/// "Punctuality matters a great deal to me", "loyalty means a lot to me".
static MATTERS_TO_ME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (?:(?:really|truly|genuinely|honestly|still|always) )*(?:matters?|means?|meant) (?:(?:a great deal|a good deal|a lot|so much|the world|everything|an awful lot|a huge amount) )(?:to me)\b").unwrap()
});
/// "I lean towards savoury breakfasts", "I've grown attached to the ritual of coffee",
/// "science fiction is where my heart lives", "poetry is one of my great loves".
static LEANING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^i(?:'ve| have)? (?:(?:always|really|generally|usually|tend to|definitely|naturally|grown|become|got|gotten|quite|very|so|rather) )*(?:lean (?:towards?|to)|gravitate (?:towards?|to)|attached to|(?:get|got) attached to)\s+(.+)|^(.+?) (?:is|are|'s|'re|remains?) (?:(?:truly|really|always|still|definitely) )*(?:where my heart (?:is|lives|belongs)|(?:one of )?my (?:(?:great|greatest|true|first|one true|biggest|real) )?(?:loves?|passions?))\b").unwrap()
});
/// "I find something deeply comforting about rain", "there's something sad about malls".
static SOMETHING_ABOUT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:i (?:(?:always|really|just|still) )*find|there(?:'s| is)) something (?:(?:so|deeply|truly|really|very|oddly|strangely|quietly|incredibly|profoundly|a bit|a little|kind of|almost) )*([a-z'-]+) (?:about|in) (.+)").unwrap()
});
/// Refusals and impatience in idioms: "you couldn't pay me to go camping", "I wouldn't be
/// caught dead at a nightclub", "winter can't end soon enough" ("I'll pass on X" is as often
/// "I'll pass on the message")
/// (against); "summer can't come soon enough", "my go-to is a flat white" (for).
static IDIOM_OF_CHOICE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:you (?:couldn't|could not|can't|cannot) pay me (?:enough )?to (?P<refused>.+)|i (?:wouldn't|would not) be caught dead (?:at|in|with|wearing|eating|watching|listening to|doing) (?P<shunned>.+)|(?P<endless>.+?) (?:can't|cannot|couldn't) (?:end|be over|finish|go away) (?:soon|fast|quickly) enough|(?P<awaited>.+?) (?:can't|cannot|couldn't) (?:come|arrive|get here|start) (?:soon|fast|quickly) enough|my (?:usual )?go-?to (?:\w+ )?(?:is|are|has to be|will always be) (?:always |usually |probably )?(?P<goto>.+))").unwrap()
});
/// "I highly recommend Dune", "I'd recommend the harbour walk": a recommendation vouches.
static RECOMMEND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^i(?:'d| would)? (?:(?:really|highly|definitely|totally|strongly|absolutely|always|heartily|wholeheartedly|100%) )*(?:recommend|vouch for) (.+)").unwrap()
});
/// "I'd never give up my morning walk", "I wouldn't trade slow Sundays for anything".
static NEVER_GIVE_UP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^i(?:'d|'ll| would| will)? (?:(?:never|not ever|wouldn't|would not|won't|will not) )(?:(?:ever|willingly|happily) )*(?:give up|trade|part with|swap|compromise on|sacrifice|abandon) (.+?)(?: for (?:anything|the world|anything in the world|all the tea in china))?$").unwrap()
});
/// "I'm not much of a beach person", "I'm a dog person", "I'm more of a cat person than a dog
/// person": the thing named before "person" is the topic.
static KIND_OF_PERSON: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^i(?:'m| am) (?:(?:really|definitely|totally|honestly|just|always|very much|so|kind of|sort of|such) )*(not |never |not really |really not )?(?:(?:much|that much|really|exactly|quite|ever|more|much more|far more|way more) )?(?:of )?an? (?:(?:big|huge|real|total|true|proper|massive|die-hard|diehard) )?([a-z][a-z'-]*(?: [a-z][a-z'-]*)?) (?:person|people person|kind of person|sort of person|type|guy|girl|gal|fan|nerd|geek|buff|junkie|enthusiast)(?: through and through| at heart| at the core| for life)?$").unwrap()
});
/// "Yoga is too slow for me", "the city gets too loud for my taste".
static TOO_MUCH_FOR_ME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (?:is|are|'s|'re|feels?|seems?|sounds?|tastes?|gets?|was|were) (?:(?:just|simply|always|honestly|really|way|much|far|a bit|a little|a tad|slightly|kind of|sort of|often|usually) )*too [a-z'-]+ (?:for me|for my (?:taste|tastes|liking|blood|ears|palate|nerves))\b").unwrap()
});

/// Idioms that judge the subject before them: "vinyl is where it's at", "board games are a
/// breath of fresh air", "coffee is life" (for); "fancy restaurants aren't worth the hype",
/// "leaf blowers are nails on a chalkboard" (against). Only at the clause's end.
static IDIOM_AFTER_COPULA: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (?:is|are|'s|'re|was|were|remains?) (?:(?:such|a|an|the|like|just|pure|absolute|total|real|honestly|truly|really|still|always|totally|completely|simply|so|my) )*(?:(breath of fresh air|key|key to (?:everything|success|happiness|life|it all|a good life)|life of the party|life and soul of the party|best thing since sliced bread|bee's knees|cat's pajamas|cat's pyjamas|where it's at|way to go|life|everything|dream|vibe|chef's kiss|second to none|real deal|no-brainer|kryptonite|weakness|biggest weakness|guilty pleasure|go-to|secret weapon|love language|comfort zone|happy place|(?:whole )?personality|where i (?:truly |really |feel |always )?(?:relax|unwind|belong|come alive|recharge|feel (?:most )?(?:alive|at home|at peace|myself)))|(a bit much|a little much|too much|nails on a chalkboard|pain in the (?:neck|butt|backside)|thorn in my side|not worth (?:it|the hype|the money|the fuss|the price|the effort|the wait|the trouble|the bother|the calories)|overhyped|the worst thing ever|a crime))[.!]?$").unwrap()
});
/// "Fancy restaurants aren't worth the hype", "X is not worth the money".
static NOT_WORTH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (?:is not|are not|isn't|aren't|wasn't|weren't|was not|were not|'s not|'re not|never was|never is) (?:(?:really|honestly|just|even|remotely|ever) )*worth (?:it|the hype|the money|the fuss|the price|the effort|the wait|the trouble|the bother|the calories|a second look|the time|my time)\b").unwrap()
});
/// "Money isn't everything", "fame is not all it's cracked up to be": worth denied, whole.
static NOT_EVERYTHING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (?:is not|are not|isn't|aren't|'s not|'re not) (?:(?:really|honestly|just|exactly) )*(?:everything|all that|all it's cracked up to be|all they're cracked up to be|the be-all and end-all)[.!]?$|^(.+?) (?:does not|doesn't|do not|don't|can't|cannot|won't|will not) (?:always )?(?:mean|buy|equal|bring|guarantee) (?:you )?happiness\b").unwrap()
});
/// "I'm glad we have public libraries", "I'm grateful there are night buses".
static GLAD_WE_HAVE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^i(?:'m| am) (?:(?:actually|really|so|very|kind of|sort of|just|honestly|truly|super|always) )*(?:glad|grateful|thankful) (?:that )?(?:we have|we've got|there(?:'s| is| are)|the world has) (.+)").unwrap()
});
/// "This reminds me how amazing humans are": the judgement comes after "how".
static REMINDS_ME_HOW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(?:reminds? me|makes? me reali[sz]e|i forget) (?:of )?(?:just |again )?how ((?:[a-z'-]+ )?[a-z'-]+) ([a-z][a-z' -]*?) (?:is|are|can be)$").unwrap()
});
/// "You know what sucks about winter", "what I love about Lisbon" said without its answer.
static WHAT_SUCKS_ABOUT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:you know )?what (?:(sucks|stinks|i hate|i dislike|i can't stand|bugs me|annoys me)|(rocks|i love|i like|i adore|i enjoy)) (?:the )?(?:most )?about (.+)$").unwrap()
});
/// "It doesn't feel good to be lazy", "it's so fun to bake bread": a verdict on doing a thing.
static EXTRAPOSED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^it(?:'s| is| feels| can be)? ?(not |never |doesn't feel |does not feel |isn't |is not |never feels )?(?:[a-z'-]+ but )?(?:(?:so|really|very|always|just|pretty|super|kind of|sort of|honestly|truly|also) )*([a-z'-]+) to (.+)$").unwrap()
});
/// "Pizza rolls aren't my favourite thing for dinner".
static NOT_FAVOURITE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (?:isn't|aren't|is not|are not|'s not|'re not|wasn't|weren't) (?:really |exactly |actually |necessarily )?(?:my|one of my) (?:absolute |all-time )?favou?rites?\b").unwrap()
});
/// "Modern architecture lacks warmth", "the sequel lacks any charm".
static LACKS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (?:(?:just|really|simply|completely|totally|sorely|badly|somehow|always) )*lacks? (?:any |all |real |the |a certain |a )?(?:warmth|soul|charm|character|personality|flavou?r|depth|substance|imagination|heart|style|polish|nuance|humou?r|spark|life|originality|taste|finesse|grace|elegance|punch|bite|edge)\b").unwrap()
});
/// Values: "honesty is non-negotiable for me", "loyalty means a lot to me", "fairness matters
/// to me" (for); "X is a dealbreaker for me" (against).
static VALUE_TO_ME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (?:(?:is|are) (?:(?:absolutely|completely|totally|simply|always|truly|really) )*(?:(non-negotiable|sacred|everything|a priority|a top priority|paramount|vital|essential|key|a must|precious)|(a dealbreaker|a deal-breaker)) (?:for|to) me|(?:(?:really|truly|deeply|always|just) )*(?:means?|meant) (?:a lot|so much|the world|everything|a great deal|a great deal) to me|(?:(?:really|truly|deeply|always) )*matters? (?:a lot |so much |deeply |enormously |hugely )?to me)\b").unwrap()
});
/// Where the persona stands: "I stand for free speech", "I respect nurses", "I can't respect
/// people who are rude to waiters", "I refuse to support fast fashion".
static STAND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^i {I_ADVERBS}(?:(?:deeply |truly |really |firmly |strongly )?(stand for|stand with|stand by|stand behind|respect|support|champion|endorse|believe in|defend)|((?:can't|cannot|won't|will not|refuse to|could never|don't|do not) (?:really |ever |even )?(?:respect|trust|support|condone|tolerate|forgive|defend|endorse|abide|get on board with|stomach|believe in)|stand against)) (.+)"
    ))
    .unwrap()
});
/// Prescriptions for more or less of a thing: "people should read more poetry", "the world
/// needs more kindness", "we should all stop doomscrolling".
static MORE_OF_IT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:i (?:really |honestly |genuinely )?(?:think|believe|feel) (?:that )?)?(?:(?:people|everyone|everybody|we|kids|children|more people|we all|everyone else) (?:should|need to|ought to|must) (?:(?:really|definitely|all|probably) )*(?:(?:read|eat|listen to|watch|try|learn|drink|play|use|embrace|practise|practice|value|make time for|spend time on) (more|less|fewer) |(stop|quit|give up|avoid|ditch) )|(?:the world|we|everyone|society|this world|the internet|schools|cities) (?:needs?|could use|deserves?) (more|less|fewer) )(.+)").unwrap()
});
/// "Lying is never okay", "cheating is not acceptable".
static NEVER_OKAY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (?:is|are) (?:never|not|not ever|rarely|hardly ever|not remotely) (?:(?:really|ever|truly) )?(?:okay|ok|acceptable|alright|all right|justified|excusable|fine|cool|forgivable|the answer)\b").unwrap()
});
/// "Greed is the root of most problems".
static ROOT_OF: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (?:is|are) (?:the |at the )?root of (?:all |most |so many |many )?(?:evil|problems|trouble|misery|suffering|the problem|our problems|what's wrong)\b").unwrap()
});
/// "The best thing about winter is hot soup", "the worst part of flying is the security line",
/// "what I love most about Paris is the cafes", "my least favourite chore is ironing".
static BEST_THING_ABOUT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:(?:the|my) (?:(best|greatest|nicest|loveliest|finest|favou?rite)|(worst|hardest|most annoying|saddest|least favou?rite))(?: (?:thing|part|bit|aspect|moment))? (?:about|of|in) [a-z' -]+? (?:is|are|has to be|'s|will always be)|(?:what|something|one thing|the thing) i (?:(love|like|adore|enjoy|miss|appreciate)|(hate|dislike|can't stand|dread|resent|don't like|do not like)) (?:most |the most |best )?about [a-z' -]+? (?:is|are)|my least favou?rite(?: [a-z-]+){0,2} (?:is|are|has to be|would be)) (.+)").unwrap()
});
/// One-word slang verdicts at the end of a clause: "Mondays suck", "eighties synth-pop rocks".
/// Words that are also ordinary verbs of things ("the wind blows", "the dog bites", "the
/// house rules") are left out.
static SLANG_VERDICT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.+?) (?:(?:really|totally|honestly|just|kind of|sort of|so|absolutely|still|seriously) )*(?:(rocks|rock|rules|rule|slaps|slap|hits different|hit different|goes hard|go hard|is goated|are goated)|(sucks|suck|stinks|stink))$").unwrap()
});
/// The persona's liking in idioms with "I": "I swear by X", "I've fallen in love with X", "I
/// can get behind X", "I always reach for X", "I'd die for X", "I get a kick out of X", "I'm
/// counting down the days until X", "my heart belongs to X", "count me in for X".
static I_IDIOM_FOR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^(?:i'd (?:honestly |literally |happily )?(?:die|kill) for|i {I_ADVERBS}(?:swear by|(?:can|could) (?:totally |definitely |absolutely |really )?get behind|reach for|would (?:honestly |literally )?(?:die|kill) for|get (?:such |a real |a huge |a big )?(?:a )?kick out of|look forward to|live for)|i(?:'ve| have)? {I_ADVERBS}(?:fallen|fell) (?:head over heels |completely |madly )?(?:in love )?(?:with|for)|i(?:'m| am) (?:always |already |literally )?counting (?:down )?the days (?:until|till|til|to)|my heart (?:belongs to|is with)|count me in (?:for|on)|i(?:'m| am) (?:always |totally |so |definitely |forever |usually )?up for|i(?:'m| am) (?:so |totally |all |absolutely |100% |always |really |fully )here for) (.+)"
    ))
    .unwrap()
});
/// …and the dislikes: "I'm so done with X", "I'm totally over X" (a bare "I'm done with
/// school" is finished with it), "I can't get behind X", "I've had enough of X", "you can keep your X", "spare me the X", "count me out of X".
static I_IDIOM_AGAINST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^(?:i(?:'m| am) (?:so |totally |completely |really |absolutely )+(?:well |just )*(?:done with|over|through with)|i(?:'m| am) (?:so |really |just )*sick and tired of|i {I_ADVERBS}(?:can't|cannot|could never|can never) (?:really )?get behind|i(?:'ve| have) (?:really )?had (?:enough of|it with|my fill of)|i {I_ADVERBS}(?:can't|cannot) be doing with|you can keep (?:your|the|all (?:the|your))|spare me (?:the|your|all the)|count me out (?:of|for|on)) (.+)"
    ))
    .unwrap()
});
/// "Few things make me happier than X", "there's no better feeling than X", "nothing says
/// home like X".
static NOTHING_BETTER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:(?:nothing|few things|not much) (?:in (?:the world|life) )?makes? me (?:happier|calmer|more content|more relaxed|feel better|smile more|more at peace) than|there(?:'s| is) no (?:better|greater|finer|nicer|sweeter) (?:feeling|thing|pleasure|joy|sound|smell|taste|sight|view|place|comfort|way to (?:start|end|spend) (?:the|a|my) (?:day|morning|evening|weekend|sunday)) than|nothing says [a-z' ]+? (?:like|quite like|better than)) (.+)").unwrap()
});
/// Topic (raw) and stance, when `clause` is one of the fixed phrases. `clause` is normalised
/// and stripped of leading filler.
pub(super) fn read_phrase(clause: &str) -> Option<(String, Stance)> {
    let short = |subject: &str, words: usize| {
        let n = subject.split_whitespace().count();
        // "espresso over drip coffee, always" is a comparative, read elsewhere.
        let comparative = [" over ", " than ", " beats ", " rather "]
            .iter()
            .any(|w| subject.contains(w));
        (n >= 1 && n <= words && !comparative).then(|| subject.trim().to_string())
    };
    let stance_if = |against: bool| {
        if against {
            Stance::Against
        } else {
            Stance::For
        }
    };
    if let Some(c) = HAVE_NO_TIME_FOR.captures(clause) {
        return Some((c[1].to_string(), Stance::Against));
    }
    if let Some(c) = IDIOM_AFTER_COPULA.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((subject, stance_if(c.get(3).is_some())));
    }
    if let Some(c) = SLANG_VERDICT.captures(clause)
        && let Some(subject) = short(&c[1], 4)
    {
        return Some((subject, stance_if(c.get(3).is_some())));
    }
    if let Some(c) = BEST_THING_ABOUT.captures(clause) {
        let against = c.get(2).is_some() || c.get(4).is_some() || clause.starts_with("my least");
        return Some((c[5].to_string(), stance_if(against)));
    }
    if let Some(c) = VALUE_TO_ME.captures(clause)
        // "fairness matters to me more than winning" is a comparative, read elsewhere.
        && !clause.contains(" more than ")
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((subject, stance_if(c.get(3).is_some())));
    }
    if let Some(c) = STAND.captures(clause) {
        return Some((c[3].to_string(), stance_if(c.get(2).is_some())));
    }
    if let Some(c) = MORE_OF_IT.captures(clause) {
        let less = matches!(
            c.get(1).or(c.get(3)).map(|m| m.as_str()),
            Some("less" | "fewer")
        );
        return Some((c[4].to_string(), stance_if(less || c.get(2).is_some())));
    }
    if let Some(c) = NEVER_OKAY
        .captures(clause)
        .or_else(|| ROOT_OF.captures(clause))
        && let Some(subject) = short(&c[1], 6)
    {
        return Some((subject, Stance::Against));
    }
    if let Some(c) = GLAD_WE_HAVE.captures(clause) {
        return Some((c[1].to_string(), Stance::For));
    }
    if let Some(c) = NOT_FAVOURITE.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((subject, Stance::Against));
    }
    if let Some(c) = WHAT_SUCKS_ABOUT.captures(clause) {
        return Some((c[3].to_string(), stance_if(c.get(1).is_some())));
    }
    if let Some(c) = REMINDS_ME_HOW.captures(clause)
        && let Some(stance) = polarity(&c[1])
    {
        return Some((c[2].to_string(), stance));
    }
    if let Some(c) = EXTRAPOSED.captures(clause) {
        // "It's nice to meet you", "it's good to know": the conversation, not a verdict.
        const CONVERSATION: &[&str] = &[
            "meet", "hear", "know", "see", "talk", "chat", "be", "have", "say", "finally", "get",
            "think", "imagine",
        ];
        let rest = &c[3];
        let first = rest.split_whitespace().next().unwrap_or("");
        // "to be back", "to be here": the conversation; "to be lazy": a way of living.
        let second = rest.split_whitespace().nth(1).unwrap_or("");
        let conversation =
            CONVERSATION.contains(&first) && !(first == "be" && polarity(second).is_some());
        if !conversation && let Some(stance) = polarity(&c[2]) {
            return Some((
                rest.to_string(),
                stance_if((stance == Stance::Against) ^ c.get(1).is_some()),
            ));
        }
    }
    if let Some(c) = LACKS.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((subject, Stance::Against));
    }
    if let Some(c) = NOT_WORTH.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((subject, Stance::Against));
    }
    if let Some(c) = NOT_EVERYTHING.captures(clause)
        && let Some(subject) = short(c.get(1).or(c.get(2)).map_or("", |m| m.as_str()), 5)
    {
        return Some((subject, Stance::Against));
    }
    if let Some(c) = I_IDIOM_FOR.captures(clause) {
        let rest = &c[1];
        // "I look forward to hearing from you": the conversation, not a liking.
        const CONVERSATION: &[&str] = &[
            "hearing", "seeing", "meeting", "talking", "chatting", "speaking", "working",
            "helping", "your", "our", "it", "you", "that", "this",
        ];
        if !CONVERSATION
            .iter()
            .any(|w| rest.split_whitespace().next() == Some(*w))
        {
            return Some((rest.to_string(), Stance::For));
        }
    }
    if let Some(c) = I_IDIOM_AGAINST.captures(clause) {
        let rest = &c[1];
        // "I'm over the moon", "I'm over here": not a dislike.
        const NOT_A_DISLIKE: &[&str] = &[
            "the moon", "here", "there", "at", "to", "in", "it", "that", "this",
        ];
        // "I'm over 18 years of age": an age, not a dislike.
        if !rest.starts_with(|c: char| c.is_ascii_digit())
            && !NOT_A_DISLIKE
                .iter()
                .any(|w| rest == *w || rest.starts_with(&format!("{w} ")))
        {
            return Some((rest.to_string(), Stance::Against));
        }
    }
    if let Some(c) = NOTHING_BETTER.captures(clause) {
        return Some((c[1].to_string(), Stance::For));
    }
    if let Some(c) = VERDICT_FROM_ME.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((subject, stance_if(c.get(3).is_some())));
    }
    if let Some(c) = NEVER_FAILS.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((subject, stance_if(c.get(2).is_none())));
    }
    if let Some(c) = COULD_HAVE_FOREVER.captures(clause) {
        return Some((c[1].to_string(), Stance::For));
    }
    if let Some(c) = NEVER_GIVE_UP.captures(clause)
        && !c[1].starts_with("on ")
        && !c[1].starts_with("hope")
    {
        return Some((c[1].to_string(), Stance::For));
    }
    // "I've never been a morning person" is "I'm never a morning person" here.
    let as_now = clause
        .replacen("i've never been ", "i'm never ", 1)
        .replacen("i have never been ", "i'm never ", 1)
        .replacen("i was never ", "i'm never ", 1)
        .replacen("i've always been ", "i'm always ", 1)
        .replacen("i have always been ", "i'm always ", 1);
    if let Some(c) = KIND_OF_PERSON.captures(&as_now)
        && is_a_thing_not_a_trait(&c[2])
    {
        return Some((c[2].to_string(), stance_if(c.get(1).is_some())));
    }
    if let Some(c) = TOO_MUCH_FOR_ME.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((subject, Stance::Against));
    }
    if let Some(c) = HAVE_A_LIKING_FOR.captures(clause) {
        return Some((c[1].to_string(), Stance::For));
    }
    if let Some(c) = HOLD_IN.captures(clause) {
        let low = matches!(&c[2], "low" | "lowest" | "contempt");
        return Some((c[1].to_string(), stance_if(low)));
    }
    if let Some(c) = CONSIDER.captures(clause) {
        let rest = &c[2];
        if let Some((topic, judgement)) = rest.split_once(" as ") {
            return Some((topic.to_string(), polarity(judgement)?));
        }
        if !matches!(&c[1], "consider" | "call" | "deem" | "rate") {
            return None;
        }
        if &c[1] == "rate" {
            // British "I rate X": a compliment, unless it is "I rate X poorly".
            return (!rest.contains(" poorly") && !rest.contains(" low"))
                .then(|| (rest.trim_end_matches(" highly").to_string(), Stance::For));
        }
        return super::split_topic_judgement(rest);
    }
    if let Some(c) = LIVE_WITHOUT.captures(clause) {
        return Some((c[3].to_string(), stance_if(c.get(1).is_some())));
    }
    if let Some(c) = POSITION.captures(clause) {
        let against = c.get(3).is_some() ^ c.get(1).is_some();
        return Some((c[4].to_string(), stance_if(against)));
    }
    if let Some(c) = NOTHING_I_LOVE_MORE.captures(clause) {
        let against = matches!(
            &c[1],
            "hate"
                | "dislike"
                | "dread"
                | "despise"
                | "loathe"
                | "detest"
                | "fear"
                | "resent"
                | "can't stand"
        );
        return Some((c[2].to_string(), stance_if(against)));
    }
    if let Some(c) = STRIKES_ME_AS.captures(clause)
        && let Some(subject) = short(&c[1], 4)
    {
        return Some((subject, polarity(&c[2])?));
    }
    if let Some(c) = RATHER_NOT.captures(clause)
        // "I'd rather not say", "I'd rather not get into it": declining to talk.
        && !super::is_speech_act(&format!("to {}", &c[1]))
        && !["talk", "discuss", "comment", "share", "get into", "answer", "go into"]
            .iter()
            .any(|act| c[1].starts_with(act))
    {
        return Some((c[1].to_string(), Stance::Against));
    }
    if let Some(c) = MATTERS_TO_ME.captures(clause)
        && let Some(subject) = short(&c[1], 4)
    {
        return Some((subject, Stance::For));
    }
    if let Some(c) = LEANING.captures(clause) {
        if let Some(object) = c.get(1) {
            return Some((object.as_str().to_string(), Stance::For));
        }
        // "I wish, writing is one of my passions": the subject follows the last comma.
        let subject = c[2].rsplit(", ").next().unwrap_or(&c[2]);
        if let Some(subject) = short(subject, 4) {
            return Some((subject, Stance::For));
        }
    }
    if let Some(c) = SOMETHING_ABOUT.captures(clause) {
        return Some((c[2].to_string(), polarity(&c[1])?));
    }
    if let Some(c) = IDIOM_OF_CHOICE.captures(clause) {
        for (group, stance) in [
            ("refused", Stance::Against),
            ("shunned", Stance::Against),
            ("endless", Stance::Against),
            ("awaited", Stance::For),
            ("goto", Stance::For),
        ] {
            if let Some(topic) = c.name(group) {
                return Some((topic.as_str().to_string(), stance));
            }
        }
    }
    if let Some(c) = RECOMMEND.captures(clause)
        // "I'd recommend you try the soup", "I recommend that you go": advice, not a liking.
        && !c[1].starts_with("you")
        && !c[1].starts_with("that ")
        && !c[1].starts_with("it")
    {
        return Some((c[1].to_string(), Stance::For));
    }
    if let Some(c) = NEVER_TIRE_OF.captures(clause) {
        let topic = c.get(1).or_else(|| c.get(2))?;
        return Some((topic.as_str().to_string(), Stance::For));
    }
    if let Some(c) = NOTHING_IS_MORE.captures(clause) {
        return Some((c[2].to_string(), polarity(&c[1])?));
    }
    if let Some(c) = NOT_FOR_ME.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((subject, Stance::Against));
    }
    if let Some(c) = VERDICT_AFTER_TOPIC.captures(clause)
        && let Some(subject) = short(&c[1], 4)
        // "I'll be there, always", "got rejected every time": a clause of its own, not a
        // topic (pronouns, verbs and words of conversation are the named-topic test's).
        && !subject
            .split_whitespace()
            .any(|w| w.contains('\'') || w == "be" || super::NOT_A_TOPIC_WORD.contains(&w))
        // "Ironic for sure", "true, always": agreement with a description, not a topic.
        && !(subject.split_whitespace().count() == 1 && is_a_description(&subject))
    {
        return Some((subject, stance_if(c.get(2).is_some())));
    }
    if let Some(c) = DESERVES.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((subject, stance_if(c.get(3).is_some())));
    }
    if let Some(c) = HAS_QUALITY.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((subject, stance_if(c.get(2).is_some())));
    }
    if let Some(c) = DOES_TO_ME.captures(clause)
        && let Some(subject) = short(&c[1], 5)
    {
        return Some((subject, stance_if(c.get(2).is_some())));
    }
    if let Some(c) = RUINS.captures(clause)
        && let Some(subject) = short(&c[1], 4)
    {
        return Some((subject, Stance::Against));
    }
    None
}

/// "a beach person" names a liking; "a shy person" or "a patient person" describes the persona
/// and names no topic. Adjectives are told apart by the lexicon and by their endings.
fn is_a_thing_not_a_trait(words: &str) -> bool {
    const TRAITS: &[&str] = &[
        "shy",
        "private",
        "quiet",
        "patient",
        "curious",
        "simple",
        "early",
        "late",
        "lucky",
        "good",
        "nice",
        "kind",
        "real",
        "normal",
        "different",
        "busy",
        "old",
        "young",
        "people",
        "practical",
        "visual",
        "social",
        "creative",
        "sensitive",
        "logical",
        "emotional",
        "spiritual",
        "religious",
        "sporty",
        "outdoorsy",
        "indoorsy",
        "lazy",
        "tidy",
        "messy",
        "organised",
        "organized",
        "introverted",
        "extroverted",
        "open",
        "honest",
        "big-picture",
        "detail-oriented",
        "glass-half-full",
        "glass-half-empty",
        "hands-on",
        "certain",
        "better",
        "different",
        "regular",
        "typical",
        "total",
        "bigger",
        "smaller",
        // "I'm a huge fan": how big a fan, not of what.
        "big",
        "huge",
        "massive",
        "great",
        "true",
        "proper",
        "major",
        "die-hard",
        "diehard",
    ];
    let last = words.split_whitespace().last().unwrap_or(words);
    let adjective_ending = [
        "ous", "ive", "ful", "ish", "ic", "ical", "ent", "ant", "ble", "less",
    ]
    .iter()
    .any(|end| last.ends_with(end));
    !TRAITS.contains(&last) && !adjective_ending && polarity(last).is_none()
}

/// Whether one word describes rather than names: a judgement ("lovely"), a word of agreement
/// ("true", "ironic") or an adjective by its ending ("obvious", "hilarious", "excited").
fn is_a_description(word: &str) -> bool {
    polarity(word).is_some()
        || matches!(
            word,
            "true"
                | "false"
                | "right"
                | "wrong"
                | "same"
                | "real"
                | "crazy"
                | "funny"
                | "ironic"
                | "weird"
                | "scary"
                | "easy"
                | "hard"
                | "likely"
                | "possible"
                | "probably"
        )
        || ["ous", "ive", "ful", "able", "ible", "ical", "ed"]
            .iter()
            .any(|end| word.len() > 3 && word.ends_with(end))
}

/// The verdict a short reply gives to a topic just named as a question: "Sailing? Love it.",
/// "Horror movies? Not for me.", "Ramen at 2am? Perfection." `reply` is normalised, without
/// its final punctuation.
pub(super) fn verdict_on_named_topic(reply: &str) -> Option<Stance> {
    static REPLY: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(?:(?:oh|honestly|personally|absolutely|totally|ugh|meh|eh|yes|yeah|no|nah|hmm),? )*(?:(?:i )?(?:(?:really|absolutely|totally|just|honestly|kind of|sort of) )*(?:(love|adore|like|enjoy|dig)|(hate|dislike|loathe|detest|despise|can't stand|avoid)) (?:it|them|those|that|these)\b|((?:i'm |i am )?(?:not|never) (?:really |exactly |quite )?(?:for me|my thing|a fan|my cup of tea|my jam|my style|into (?:it|them))|i'm against (?:it|them)|(?:hard|big) pass|no thanks|no thank you|no way|never again|absolutely not|not a chance|nope|pass)|(i'm (?:all |totally |so )?(?:for it|in|into (?:it|them)|a (?:big |huge )?fan)|yes please|count me in|sign me up|always|every time|all day|any day|100%|love it|love them|big fan|huge fan|absolutely|i live for (?:it|them)|(?:i )?can't get enough(?: of (?:it|them))?))|^(too [a-z'-]+ for (?:me|my (?:taste|liking|blood|ears|palate)))").unwrap()
    });
    if let Some(c) = REPLY.captures(reply) {
        return Some(
            if c.get(2).is_some() || c.get(3).is_some() || c.get(5).is_some() {
                Stance::Against
            } else {
                Stance::For
            },
        );
    }
    // "Pure magic.", "Overrated.", "Total waste of time.": a bare judgement of a few words.
    (reply.split_whitespace().count() <= 4)
        .then(|| polarity(reply))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_phrases_give_their_topic_and_stance() {
        use Stance::{Against, For};
        let cases = [
            (
                "i have a soft spot for old cameras",
                Some(("old cameras", For)),
            ),
            ("i've got no time for gossip", Some(("gossip", Against))),
            (
                "i hold good manners in high esteem",
                Some(("good manners", For)),
            ),
            (
                "i regard astrology as nonsense",
                Some(("astrology", Against)),
            ),
            (
                "i could easily live without smartwatches",
                Some(("smartwatches", Against)),
            ),
            ("i can't live without coffee", Some(("coffee", For))),
            ("i'm all for four-day weeks", Some(("four-day weeks", For))),
            ("i'm not against spicy food", Some(("spicy food", For))),
            (
                "i'm against daylight saving",
                Some(("daylight saving", Against)),
            ),
            (
                "nothing is more annoying than a dripping tap",
                Some(("a dripping tap", Against)),
            ),
            (
                "there's nothing i love more than a long bath",
                Some(("a long bath", For)),
            ),
            (
                "jazz fusion is just not for me",
                Some(("jazz fusion", Against)),
            ),
            ("rom-coms, not so much", Some(("rom-coms", Against))),
            (
                "local bakeries deserve more love",
                Some(("local bakeries", For)),
            ),
            ("old trams have so much charm", Some(("old trams", For))),
            (
                "chain restaurants have no soul",
                Some(("chain restaurants", Against)),
            ),
            (
                "team sports never appealed to me",
                Some(("team sports", Against)),
            ),
            ("bad puns cheer me up", Some(("bad puns", For))),
            ("autotune ruins good voices", Some(("autotune", Against))),
            ("i'd love to help", None),
            ("i'll be there, always", None),
            ("you are right, absolutely", None),
            ("the meeting has a new agenda", None),
            ("i see what you mean", None),
        ];
        for (clause, expected) in cases {
            let found = read_phrase(clause);
            assert_eq!(
                found.as_ref().map(|(t, s)| (t.as_str(), *s)),
                expected,
                "{clause:?}"
            );
        }
    }

    #[test]
    fn a_short_reply_judges_the_topic_named_before_it() {
        use Stance::{Against, For};
        let cases = [
            ("love it", Some(For)),
            ("honestly, i adore them", Some(For)),
            ("not for me, thanks", Some(Against)),
            ("hard pass", Some(Against)),
            ("pure magic", Some(For)),
            ("total waste of time", Some(Against)),
            ("it depends on the day", None),
            ("i went there last year with my cousin", None),
        ];
        for (reply, expected) in cases {
            assert_eq!(verdict_on_named_topic(reply), expected, "{reply:?}");
        }
    }
}
