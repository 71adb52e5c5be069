"""A tiny learned reader over the tiny MPNet (tests/data/tiny_mpnet, scripts/python/tiny_mpnet.py),
for the test that a reader runs over its own encoder as PyTorch runs it: a small WordPiece
tokenizer in MPNet's form (<s> 0, <pad> 1, </s> 2), random additions to both layers and a random
head, written in the crate's file by compare_encoders.py's own `crate_file` (so the encoder's
scale is folded in as for the real one), and what PyTorch reads with it: each message's sentence
score and each word's tag probabilities. Run in .tools/train-venv with PERSONA_PREFS_MODEL_DIR
set (train_learned_reader.py reads MiniLM's config on import)."""
import json, os, sys
import torch
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_encoders as ce  # noqa: E402

DIR = os.environ.get('OUT', 'tests/data/tiny_mpnet')
WORDS = ('i love hate jazz opera pizza tea green the a is my favourite food train at noon what time it '
         'really but bores me honestly pineapple on crime films your taste in impeccable sam think '
         'best worst music cats dogs and , . ? ! ##s ##ing').split()

vocab = {'<s>': 0, '<pad>': 1, '</s>': 2, '[UNK]': 3}
for word in WORDS:
    vocab.setdefault(word, len(vocab))
assert len(vocab) <= 120
tokenizer = {
    'version': '1.0', 'truncation': None, 'padding': None, 'added_tokens': [
        {'id': i, 'content': t, 'single_word': False, 'lstrip': False, 'rstrip': False, 'normalized': False, 'special': True}
        for t, i in list(vocab.items())[:4]],
    'normalizer': {'type': 'BertNormalizer', 'clean_text': True, 'handle_chinese_chars': True, 'strip_accents': None, 'lowercase': True},
    'pre_tokenizer': {'type': 'BertPreTokenizer'},
    'post_processor': {'type': 'RobertaProcessing', 'sep': ['</s>', 2], 'cls': ['<s>', 0], 'trim_offsets': True, 'add_prefix_space': False},
    'decoder': {'type': 'WordPiece', 'prefix': '##', 'cleanup': True},
    'model': {'type': 'WordPiece', 'unk_token': '[UNK]', 'continuing_subword_prefix': '##', 'max_input_chars_per_word': 100, 'vocab': vocab},
}
json.dump(tokenizer, open(DIR + '/tokenizer.json', 'w'))

torch.manual_seed(11)
m, tok = ce.load('mpnet', DIR)
with torch.no_grad():
    for name, p in m.named_parameters():
        if p.requires_grad:  # the additions and the head: random, so every part shows
            p.copy_(torch.randn_like(p) * 0.3)
m.eval()
ce.crate_file(m, DIR + '/reader.safetensors')
expected = []
for text in ['I really love jazz, but opera bores me.', 'What time is it?', 'Honestly, pineapple on pizza is a crime.']:
    ids, words, first = ce.read(tok, text)
    batch = next(ce.batches([(ids, first, None, 0.0)], 1, False))
    with torch.no_grad():
        logits, score = m(batch[0], batch[1], batch[2])
    expected.append({'text': text, 'sentence_score': float(torch.sigmoid(score)[0]),
                     'tag_probabilities': torch.softmax(logits, -1)[0].tolist()})
json.dump(expected, open(DIR + '/reader_expected.json', 'w'))
print('wrote', DIR + '/tokenizer.json, reader.safetensors, reader_expected.json')
