"""Trains the learned reader with low-rank additions to every layer of the shipped MiniLM
(the head exactly as src/extract/learned reads it) and writes a reader file Rust loads."""
import hashlib, json, math, os, random, sys, time
import torch, torch.nn as nn, torch.nn.functional as F
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

torch.manual_seed(0); random.seed(0); torch.set_num_threads(2)
MODEL = os.environ['PERSONA_PREFS_MODEL_DIR']
DATA = os.environ.get('DATA', 'tests/data/')
OUT = os.environ.get('OUT', 'data/learned_extractor.safetensors')
EPOCHS = int(os.environ.get('EPOCHS', '3')); RANK = int(os.environ.get('RANK', '8')); ALPHA = 16.0
# Every tuning set (extract::learned::training::trained_on); never a held-out set, nor the
# development set (tests/data/extraction_development.jsonl), which stays text no reader saw.
SETS = ['rules_extraction', 'rules_extraction_other_hand', 'rules_extraction_chitchat',
        'rules_extraction_chitchat_2', 'rules_extraction_chitchat_3', 'rules_extraction_chitchat_4']
# ALSO_SETS (comma-separated) trains on tuning sets the shipped reader leaves out
# (extract::learned::training::NOT_TRAINED_ON), e.g. rules_extraction_chitchat_5.
SETS += [s for s in os.environ.get('ALSO_SETS', '').split(',') if s]
NEIGHBOURS = [-1, 1, -2, 2]
cfg = json.load(open(MODEL + '/config.json'))
tok = Tokenizer.from_file(MODEL + '/tokenizer.json'); tok.no_padding(); tok.enable_truncation(256)
PRODUCTS = [('q', 'query'), ('k', 'key'), ('v', 'value'), ('o', 'attention_output'), ('i', 'intermediate'), ('out', 'output')]

class Added(nn.Module):
    """W x + b + up(down(x)) * ALPHA / RANK; W, b frozen."""
    def __init__(s, base):
        super().__init__(); s.base = base
        s.down = nn.Parameter(torch.randn(RANK, base.in_features) / math.sqrt(base.in_features))
        s.up = nn.Parameter(torch.zeros(base.out_features, RANK))
    def forward(s, x):
        return s.base(x) + (F.dropout(x, 0.1, s.training) @ s.down.t() @ s.up.t()) * (ALPHA / RANK)

class Layer(nn.Module):
    def __init__(s, H, I, nh, eps):
        super().__init__(); s.nh = nh
        s.q, s.k, s.v, s.o = (nn.Linear(H, H) for _ in range(4))
        s.ln1 = nn.LayerNorm(H, eps=eps); s.i = nn.Linear(H, I); s.out = nn.Linear(I, H); s.ln2 = nn.LayerNorm(H, eps=eps)
    def forward(s, x, bias):
        B, T, H = x.shape; d = H // s.nh
        sp = lambda t: t.view(B, T, s.nh, d).transpose(1, 2)
        a = torch.softmax(sp(s.q(x)) @ sp(s.k(x)).transpose(-1, -2) / math.sqrt(d) + bias, -1)
        c = (F.dropout(a, 0.1, s.training) @ sp(s.v(x))).transpose(1, 2).reshape(B, T, H)
        x = s.ln1(x + F.dropout(s.o(c), 0.1, s.training))
        return s.ln2(x + F.dropout(s.out(F.gelu(s.i(x))), 0.1, s.training))

class Reader(nn.Module):
    def __init__(s):
        super().__init__(); H = cfg['hidden_size']; eps = cfg['layer_norm_eps']
        s.word = nn.Embedding(cfg['vocab_size'], H); s.pos = nn.Embedding(cfg['max_position_embeddings'], H)
        s.typ = nn.Embedding(cfg['type_vocab_size'], H); s.ln = nn.LayerNorm(H, eps=eps)
        s.layers = nn.ModuleList([Layer(H, cfg['intermediate_size'], cfg['num_attention_heads'], eps) for _ in range(cfg['num_hidden_layers'])])
        s.hidden = nn.Linear(len(NEIGHBOURS) * H + 2 * H, 128); s.tags = nn.Linear(128, 5); s.sentence = nn.Linear(H, 1)
    def states(s, ids, mask):
        T = ids.shape[1]
        x = s.ln(s.word(ids) + s.typ(torch.zeros_like(ids)) + s.pos(torch.arange(T)[None]))
        x = F.dropout(x, 0.1, s.training)
        bias = (1.0 - mask[:, None, None, :].float()) * -1e9
        for l in s.layers: x = l(x, bias)
        return x
    def forward(s, ids, mask, first):
        x = s.states(ids, mask)                                    # B, T, H
        B, T, H = x.shape
        mean = (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        padded = torch.cat([x, torch.zeros(B, 1, H)], 1)           # row T: zeros
        W = first.shape[1]
        cols = [first]
        for off in NEIGHBOURS:
            shifted = torch.full_like(first, T)
            if off < 0: shifted[:, -off:] = first[:, :W + off]
            else: shifted[:, :W - off] = first[:, off:]
            cols.append(shifted)
        feats = [torch.gather(padded, 1, c.clamp(max=T)[..., None].expand(B, W, H)) for c in cols]
        feats.append(mean[:, None, :].expand(B, W, H))
        f = torch.cat(feats, -1)
        return s.tags(F.relu(s.hidden(F.dropout(f, 0.1, s.training)))), s.sentence(mean).squeeze(-1)

def load():
    m = Reader(); w = load_file(MODEL + '/model.safetensors')
    w = {k[5:] if k.startswith('bert.') else k: v for k, v in w.items()}
    sd = {'word.weight': w['embeddings.word_embeddings.weight'], 'pos.weight': w['embeddings.position_embeddings.weight'],
          'typ.weight': w['embeddings.token_type_embeddings.weight'], 'ln.weight': w['embeddings.LayerNorm.weight'], 'ln.bias': w['embeddings.LayerNorm.bias']}
    for i in range(cfg['num_hidden_layers']):
        p = f'encoder.layer.{i}.'
        for ours, theirs in [('q', 'attention.self.query'), ('k', 'attention.self.key'), ('v', 'attention.self.value'), ('o', 'attention.output.dense'),
                             ('ln1', 'attention.output.LayerNorm'), ('i', 'intermediate.dense'), ('out', 'output.dense'), ('ln2', 'output.LayerNorm')]:
            for t in ('weight', 'bias'): sd[f'layers.{i}.{ours}.{t}'] = w[p + theirs + '.' + t]
    missing, unexpected = m.load_state_dict(sd, strict=False)
    assert not unexpected and all(k.startswith(('hidden', 'tags', 'sentence')) for k in missing), (missing, unexpected)
    return with_additions(m)

def with_additions(m):
    """The model frozen, the low-rank additions wrapped around every layer's six products, and
    those and the head left to train."""
    for p in m.parameters(): p.requires_grad = False
    for l in m.layers:
        for ours, _ in PRODUCTS: setattr(l, ours, Added(getattr(l, ours)))
    for mod in (m.hidden, m.tags, m.sentence):
        for p in mod.parameters(): p.requires_grad = True
    return m

def norm(w):
    w = ''.join(c for c in w.lower() if c.isalnum() or c == "'")
    return w[:-1] if len(w) > 3 and w.endswith('s') else w

def read(text, tokenizer=None):
    """Token ids, each word's byte range, each word's first token (through `tokenizer`, MiniLM's by default)."""
    e = (tokenizer or tok).encode(text)
    words, first, last = [], [], None
    for t, (wid, (a, b)) in enumerate(zip(e.word_ids, e.offsets)):
        if wid is None: continue
        if wid == last: words[-1] = (words[-1][0], b)
        else: words.append((a, b)); first.append(t); last = wid
    return e.ids, words, first

def tags_of(text, words, opinions):
    normalised = [norm(text[a:b]) for a, b in words]
    content = [i for i in range(len(words)) if normalised[i]]
    tags = [0] * len(words)
    for o in opinions:
        topic = [norm(x) for x in o['topic'].split()]
        topic = [x for x in topic if x]
        while len(topic) > 1 and topic[0] in ('the', 'a', 'an'): topic = topic[1:]
        n = len(topic); start = None
        for j in range(len(content) - n + 1):
            if [normalised[i] for i in content[j:j + n]] == topic: start = content[j:j + n]; break
        if not start: return None
        b = 1 if o['stance'] == 'for' else 3
        tags[start[0]] = b
        for k in range(start[0] + 1, start[-1] + 1): tags[k] = b + 1
    return tags

def in_sixth(text): return hashlib.sha256(text.encode()).digest()[0] % 6 == 0

def batches(exs, size, shuffle):
    order = sorted(range(len(exs)), key=lambda i: len(exs[i][0]))
    chunks = [order[i:i + size] for i in range(0, len(order), size)]
    if shuffle: random.shuffle(chunks)
    for c in chunks:
        T = max(len(exs[i][0]) for i in c); W = max(max(len(exs[i][1]), 1) for i in c)
        ids = torch.zeros(len(c), T, dtype=torch.long); mask = torch.zeros(len(c), T, dtype=torch.long)
        first = torch.full((len(c), W), T, dtype=torch.long); tags = torch.full((len(c), W), -100, dtype=torch.long)
        sent = torch.zeros(len(c))
        for r, i in enumerate(c):
            e = exs[i]; ids[r, :len(e[0])] = torch.tensor(e[0]); mask[r, :len(e[0])] = 1
            if e[1]: first[r, :len(e[1])] = torch.tensor(e[1])
            if e[2] is not None and e[2]: tags[r, :len(e[2])] = torch.tensor(e[2])
            sent[r] = e[3]
        yield ids, mask, first, tags, sent

def examples(rows, read):
    """Each row as (token ids, each word's first token, its words' tags or None, whether it holds an opinion)."""
    exs = []
    for r in rows:
        ids, words, first = read(r['text'])
        exs.append((ids, first, tags_of(r['text'], words, r['opinions']), 1.0 if r['opinions'] else 0.0))
    return exs

def fit(m, exs):
    """The training: AdamW at 1e-3, warm-up over 6 % of the steps then a linear fall, batches of 32."""
    params = [p for p in m.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)
    steps = EPOCHS * math.ceil(len(exs) / 32)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, s / (0.06 * steps)) * max(0.0, (steps - s) / steps))
    for ep in range(EPOCHS):
        m.train(); t0 = time.time(); total = 0.0
        for ids, mask, first, tags, sent in batches(exs, 32, True):
            logits, s = m(ids, mask, first)
            loss = F.binary_cross_entropy_with_logits(s, sent)
            if (tags != -100).any(): loss = loss + F.cross_entropy(logits.reshape(-1, 5), tags.reshape(-1), ignore_index=-100)
            opt.zero_grad(); loss.backward(); opt.step(); sched.step(); total += loss.item()
        print(f'epoch {ep}: loss {total:.1f}, {time.time() - t0:.0f} s', flush=True)

def main():
    rows = []
    for s in SETS: rows += [json.loads(l) for l in open(DATA + s + '.jsonl') if l.strip()]
    rows = [r for r in rows if not in_sixth(r['text'])]
    exs = examples(rows, read)
    print(f'{len(exs)} utterances ({sum(1 for e in exs if e[2] is not None)} tagged), every layer at rank {RANK}, {EPOCHS} epochs', flush=True)
    m = load()
    fit(m, exs)
    crate_file(m, OUT)

def crate_file(m, path, scale=1.0):
    """The reader in the file the crate reads: the additions' `up` scaled as they are applied,
    `scale` (what the states are multiplied by before the head, 1 for MiniLM) folded into the
    head's first weights, which are linear in the state; thresholds left for the crate to
    choose."""
    out = {'hidden.weight': m.hidden.weight * scale, 'hidden.bias': m.hidden.bias, 'tags.weight': m.tags.weight,
           'tags.bias': m.tags.bias, 'sentence.weight': m.sentence.weight * scale, 'sentence.bias': m.sentence.bias,
           'thresholds': torch.tensor([0.5, 0.5])}
    for i, l in enumerate(m.layers):
        for ours, name in PRODUCTS:
            a = getattr(l, ours)
            out[f'adapt.{i}.{name}.down'] = a.down
            out[f'adapt.{i}.{name}.up'] = a.up * (ALPHA / RANK)
    save_file({k: v.detach().float().contiguous() for k, v in out.items()}, path)
    print('wrote', path, flush=True)

if __name__ == '__main__':
    main()
