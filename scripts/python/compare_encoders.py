"""What a stronger encoder under the learned reader buys (scripts/compare-encoders): the
shipped reader's recipe (src/extract/learned: each word's state beside its neighbours' and the
message's mean, a sentence score over the mean, rank-8 additions to the six dense products of
every layer, the same tuning sets less the same sixth, three epochs) trained over
all-mpnet-base-v2 (12 layers of 768, about 5x MiniLM-L6's width-squared work a layer), then
read with the shipped reader (data/learned_extractor.safetensors, loaded as is) on two sets
neither trained on: the development set, and the fifth chat tuning set, where the rules'
snapshot (tests/data/rules_findings.jsonl) gives "rules, then the reader where they find
nothing". One scorer reads both readers: topics compared as `model::topic::overlaps` compares
them (whole words, plural and -ing forms, either inside the other), with the reader's spans
decoded as `learned::spans` decodes them, but without the Rust reader's later checks (stance
words, reported and hypothetical views, names), so its figures sit under the service's: they
compare the two encoders, not either with the service.

Environment: ENCODER_DIR (all-mpnet-base-v2, with model.safetensors and tokenizer.json),
PERSONA_PREFS_MODEL_DIR (the shipped MiniLM), OUT (a folder for the readings), DATA
(tests/data/). STAGE=train|shipped|score runs one stage (all three by default)."""
import json, math, os, random, sys, time
import torch, torch.nn as nn, torch.nn.functional as F
from safetensors.torch import load_file
from tokenizers import Tokenizer

# The shipped reader's training, shared so that the recipe is the same by construction: its
# additions and layer, its tags, its sixth, its batches and its training loop (three epochs,
# rank 8), on its tuning sets (extract::learned::training::trained_on).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_learned_reader import (  # noqa: E402  (needs PERSONA_PREFS_MODEL_DIR, as it reads MiniLM's config)
    ALPHA, NEIGHBOURS, PRODUCTS, RANK, SETS, Layer, batches, examples, fit, in_sixth, with_additions)
from train_learned_reader import Reader as ShippedReader, read as read_words  # noqa: E402
from train_learned_reader import crate_file as shipped_crate_file  # noqa: E402

torch.manual_seed(0); random.seed(0); torch.set_num_threads(2)
DATA = os.environ.get('DATA', 'tests/data/')
OUT = os.environ.get('OUT', '.tools/encoders/readings')
# all-mpnet-base-v2's last states are about a third the size of MiniLM's (token norms about
# 3.4 against 8): with them as they are, the head learned nothing at this rate (every tag
# outside, one sentence score for every message). Scaled by 3 before the head (a constant a
# Rust head could fold into its first layer's weights), it learned faster than MiniLM's.
SCALE = {'mpnet': 3.0, 'minilm': 1.0}
READ = [('rules_extraction_chitchat_5', "people's chat (tuning 5)"), ('extraction_development', None)]


def relative_bucket(relative, buckets=32, max_distance=128):
    """MPNet's (T5's) bidirectional relative-position buckets."""
    n = -relative; buckets //= 2
    out = (n < 0).long() * buckets; n = n.abs()
    exact = buckets // 2
    large = exact + (torch.log(n.float().clamp(min=1) / exact) / math.log(max_distance / exact) * (buckets - exact)).long()
    return out + torch.where(n < exact, n, torch.minimum(large, torch.full_like(large, buckets - 1)))


class Reader(nn.Module):
    def __init__(s, kind, cfg):
        super().__init__(); s.kind = kind; H = cfg['hidden_size']; eps = cfg['layer_norm_eps']
        s.word = nn.Embedding(cfg['vocab_size'], H); s.pos = nn.Embedding(cfg['max_position_embeddings'], H)
        if kind == 'minilm': s.typ = nn.Embedding(cfg['type_vocab_size'], H)
        else: s.rel = nn.Embedding(cfg['relative_attention_num_buckets'], cfg['num_attention_heads'])
        s.ln = nn.LayerNorm(H, eps=eps)
        s.layers = nn.ModuleList([Layer(H, cfg['intermediate_size'], cfg['num_attention_heads'], eps) for _ in range(cfg['num_hidden_layers'])])
        s.hidden = nn.Linear(len(NEIGHBOURS) * H + 2 * H, 128); s.tags = nn.Linear(128, 5); s.sentence = nn.Linear(H, 1)
    def states(s, ids, mask):
        T = ids.shape[1]
        if s.kind == 'minilm':
            x = s.ln(s.word(ids) + s.typ(torch.zeros_like(ids)) + s.pos(torch.arange(T)[None])); bias = 0
        else:  # MPNet: positions from 2 (after its padding id), a learned bias by relative position
            x = s.ln(s.word(ids) + s.pos(torch.arange(T)[None] + 2))
            bias = s.rel(relative_bucket(torch.arange(T)[None, :] - torch.arange(T)[:, None])).permute(2, 0, 1)[None]
        x = F.dropout(x, 0.1, s.training)
        bias = bias + (1.0 - mask[:, None, None, :].float()) * -1e9
        for l in s.layers: x = l(x, bias)
        return x * SCALE[s.kind]
    # The head over the states, exactly the shipped reader's (each word beside its neighbours
    # and the message's mean; a sentence score over the mean).
    forward = ShippedReader.forward


def load(kind, model_dir):
    cfg = json.load(open(model_dir + '/config.json'))
    m = Reader(kind, cfg); w = load_file(model_dir + '/model.safetensors')
    prefix = 'bert.' if kind == 'minilm' else 'mpnet.'
    w = {k[len(prefix):] if k.startswith(prefix) else k: v for k, v in w.items()}
    sd = {'word.weight': w['embeddings.word_embeddings.weight'], 'pos.weight': w['embeddings.position_embeddings.weight'],
          'ln.weight': w['embeddings.LayerNorm.weight'], 'ln.bias': w['embeddings.LayerNorm.bias']}
    if kind == 'minilm':
        sd['typ.weight'] = w['embeddings.token_type_embeddings.weight']
        names = [('q', 'attention.self.query'), ('k', 'attention.self.key'), ('v', 'attention.self.value'), ('o', 'attention.output.dense'),
                 ('ln1', 'attention.output.LayerNorm'), ('i', 'intermediate.dense'), ('out', 'output.dense'), ('ln2', 'output.LayerNorm')]
    else:
        sd['rel.weight'] = w['encoder.relative_attention_bias.weight']
        names = [('q', 'attention.attn.q'), ('k', 'attention.attn.k'), ('v', 'attention.attn.v'), ('o', 'attention.attn.o'),
                 ('ln1', 'attention.LayerNorm'), ('i', 'intermediate.dense'), ('out', 'output.dense'), ('ln2', 'output.LayerNorm')]
    for i in range(cfg['num_hidden_layers']):
        for ours, theirs in names:
            for t in ('weight', 'bias'): sd[f'layers.{i}.{ours}.{t}'] = w[f'encoder.layer.{i}.{theirs}.{t}']
    missing, unexpected = m.load_state_dict(sd, strict=False)
    assert not unexpected and all(k.startswith(('hidden', 'tags', 'sentence')) for k in missing), (missing, unexpected)
    with_additions(m)
    tok = Tokenizer.from_file(model_dir + '/tokenizer.json'); tok.no_padding(); tok.enable_truncation(256)
    return m, tok


def read(tok, text): return read_words(text, tok)


def train(m, tok):
    rows = []
    for s in SETS: rows += [json.loads(l) for l in open(DATA + s + '.jsonl') if l.strip()]
    exs = examples([r for r in rows if not in_sixth(r['text'])], lambda text: read(tok, text))
    print(f'{m.kind}: {len(exs)} utterances, rank {RANK}', flush=True)
    fit(m, exs)


def crate_file(m, path):
    """The reader in the file the crate reads (`extract.learned_reader`), the encoder's scale
    folded into the head; its thresholds are for the crate to choose (the train_learned_extractor
    example with PERSONA_PREFS_CALIBRATE, as scripts/train-learned-reader runs it)."""
    shipped_crate_file(m, path, SCALE[m.kind])


def read_sets(m, tok, name):
    m.eval()
    for set_name, _ in READ:
        rows = [json.loads(l) for l in open(DATA + set_name + '.jsonl') if l.strip()]
        exs = []
        for r in rows:
            ids, words, first = read(tok, r['text']); exs.append((ids, first, None, 0.0, words))
        out = [None] * len(exs); t0 = time.time()
        # In order of length, 64 at a time (one batch each, so its rows keep that order).
        order = sorted(range(len(exs)), key=lambda i: len(exs[i][0]))
        with torch.no_grad():
            for c in (order[i:i + 64] for i in range(0, len(order), 64)):
                ids, mask, first, _, _ = next(batches([exs[i][:4] for i in c], len(c), False))
                logits, s = m(ids, mask, first)
                conf, tag = torch.softmax(logits, -1).max(-1); score = torch.sigmoid(s)
                for r, i in enumerate(c):
                    W = len(exs[i][1])
                    out[i] = (tag[r, :W].tolist(), conf[r, :W].tolist(), float(score[r]), [list(w) for w in exs[i][4]])
        print(f'{name}: read {len(exs)} utterances of {set_name} in {time.time() - t0:.0f} s', flush=True)
        json.dump(out, open(f'{OUT}/{name}_{set_name}.json', 'w'))


def shipped_reader():
    """The shipped reader's file loaded into the same model (its additions' `up` stored scaled)."""
    m, tok = load('minilm', os.environ['PERSONA_PREFS_MODEL_DIR'])
    w = load_file('data/learned_extractor.safetensors')
    with torch.no_grad():
        for name in ('hidden', 'tags', 'sentence'):
            getattr(m, name).weight.copy_(w[name + '.weight']); getattr(m, name).bias.copy_(w[name + '.bias'])
        for i, l in enumerate(m.layers):
            for ours, theirs in PRODUCTS:
                a = getattr(l, ours)
                a.down.copy_(w[f'adapt.{i}.{theirs}.down']); a.up.copy_(w[f'adapt.{i}.{theirs}.up'] / (ALPHA / RANK))
    return m, tok


# The scorer: `model::topic::overlaps` over `model::topic`'s normalised words.
def words(t):
    out = []
    for w in t.lower().replace('-', ' ').replace('_', ' ').replace('/', ' ').split():
        w = w.strip(''.join(c for c in w if not c.isalnum()))
        if not w: continue
        if w.endswith('ies') and len(w) > 4: w = w[:-3] + 'y'
        elif w.endswith('s') and not w.endswith('ss') and len(w) > 3: w = w[:-1]
        if w.endswith('ing') and len(w) >= 5 and any(v in w[:-3] for v in 'aeiouy'): w = w[:-3]
        if w.endswith('ie'): w = w[:-2] + 'y'
        if len(w) >= 3 and w.endswith('e'): w = w[:-1]
        out.append(w)
    if len(out) > 1 and out[0] in ('a', 'an', 'the'): out = out[1:]
    return out


def inside(a, b): return len(a) > 0 and any(b[i:i + len(a)] == a for i in range(len(b) - len(a) + 1))
def overlaps(a, b): a, b = words(a), words(b); return a == b or inside(a, b) or inside(b, a)


def wilson(k, n, z=1.96):
    if n == 0: return (0.0, 0.0)
    p = k / n; d = 1 + z * z / n; c = p + z * z / (2 * n); h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return ((c - h) / d, (c + h) / d)


def spans(text, reading, min_confidence, min_sentence):
    tags, confs, sentence, wds = reading
    if sentence < min_sentence: return []
    found, open_ = [], None
    for i, (t, c) in enumerate(zip(tags, confs)):
        stance = 'for' if t in (1, 2) else 'against' if t in (3, 4) else None
        if t in (2, 4) and open_ and open_[2] == stance: open_ = (open_[0], i, stance, open_[3] + c); continue
        if open_: found.append(open_)
        open_ = (i, i, stance, c) if stance else None
    if open_: found.append(open_)
    return [(text[wds[a][0]:wds[b][1]], st) for a, b, st, total in found if total / (b - a + 1) >= min_confidence]


def score(rows, finds):
    right = found = recalled = expected = 0
    for r, f in zip(rows, finds):
        seen = []
        for topic, stance in f:
            if (topic.lower(), stance) not in seen: seen.append((topic.lower(), stance))
        expected += len(r['opinions']); found += len(seen)
        right += sum(1 for t, st in seen if any(x['stance'] == st and overlaps(t, x['topic']) for x in r['opinions']))
        recalled += sum(1 for x in r['opinions'] if any(st == x['stance'] and overlaps(t, x['topic']) for t, st in seen))
    lo, hi = wilson(right, found)
    return f'{right / max(found, 1):.3f} [{lo:.2f}-{hi:.2f}] ({right}/{found}) / {recalled / max(expected, 1):.3f} ({recalled}/{expected})'


def report(names):
    for set_name, snapshot in READ:
        rows = [json.loads(l) for l in open(DATA + set_name + '.jsonl') if l.strip()]
        rules = [[] for _ in rows]
        if snapshot:
            for l in open(DATA + 'rules_findings.jsonl'):
                r = json.loads(l)
                if r['set'] == snapshot: rules[r['line']] = [(x['topic'], x['stance']) for x in r['found']]
            print(f'\n{set_name}: the rules (their snapshot) {score(rows, rules)}')
        else:
            print(f'\n{set_name}')
        for name in names:
            readings = json.load(open(f'{OUT}/{name}_{set_name}.json'))
            for min_sentence in (0.0, 0.8):
                for min_confidence in (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9):
                    learned = [spans(r['text'], o, min_confidence, min_sentence) for r, o in zip(rows, readings)]
                    line = f'{name:8} sentence {min_sentence:.2f} span {min_confidence:.2f}: alone {score(rows, learned)}'
                    if snapshot:
                        line += f'  | after the rules {score(rows, [ru or le for ru, le in zip(rules, learned)])}'
                    print(line, flush=True)


def main():
    os.makedirs(OUT, exist_ok=True)
    stage = os.environ.get('STAGE', 'all')
    if stage in ('all', 'shipped'):
        m, tok = shipped_reader(); read_sets(m, tok, 'shipped')
    if stage in ('all', 'train'):
        torch.manual_seed(0); random.seed(0)  # the same start whether the shipped stage ran or not
        m, tok = load('mpnet', os.environ['ENCODER_DIR']); train(m, tok)
        crate_file(m, f'{OUT}/mpnet_reader.safetensors'); read_sets(m, tok, 'mpnet')
    if stage in ('all', 'score'):
        report(['shipped', 'mpnet'])


if __name__ == '__main__':
    main()
