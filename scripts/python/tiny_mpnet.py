"""The reference the hand-written MPNet pass (src/embed/fast_bert.rs) is checked against:
a tiny MPNet (2 layers of 32, 4 heads, 120 words) with random weights, and the last hidden
states `transformers`' own MPNetModel computes for three inputs (7 tokens; 150, past the
relative-position buckets' largest distance; 2), with its relative-position bucket of every
distance from -199 to 199. Written to tests/data/tiny_mpnet (OUT). One-off: the test reads the
committed files; rerun with the packages in scripts/python/tiny-mpnet-requirements.txt."""
import json, math, os
import torch
import transformers
from transformers import MPNetConfig, MPNetModel
from safetensors.torch import save_file

OUT = os.environ.get("OUT", "tests/data/tiny_mpnet")
os.makedirs(OUT, exist_ok=True)

config = MPNetConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=200, relative_attention_num_buckets=32,
                     layer_norm_eps=1e-5, hidden_act="gelu", pad_token_id=1)
torch.manual_seed(7)
model = MPNetModel(config, add_pooling_layer=False)
model.eval()
g = torch.Generator().manual_seed(1234)
with torch.no_grad():
    for name, p in model.named_parameters():
        p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.2)

sd = {k: v.detach().to(torch.float32).contiguous().clone()
      for k, v in model.state_dict().items() if k != "embeddings.position_ids"}
save_file(sd, os.path.join(OUT, "model.safetensors"))
config.to_json_file(os.path.join(OUT, "config.json"))

A = [0, 5, 17, 42, 99, 7, 2]
B = [0] + [(i * 37) % 117 + 3 for i in range(148)] + [2]
C = [0, 2]
inputs = [A, B, C]
states = []
with torch.no_grad():
    for ids in inputs:
        x = torch.tensor([ids], dtype=torch.long)
        out = model(input_ids=x, attention_mask=torch.ones_like(x)).last_hidden_state[0]
        states.append([[float(v) for v in row] for row in out.tolist()])

enc_cls = transformers.models.mpnet.modeling_mpnet.MPNetEncoder
fn = getattr(enc_cls, "relative_position_bucket", None) or transformers.models.mpnet.modeling_mpnet.relative_position_bucket
rel = torch.arange(-199, 200, dtype=torch.long)
buckets = [int(b) for b in fn(rel, num_buckets=32, max_distance=128).tolist()]

def ref(r):
    n = -r; ret = 16 if n < 0 else 0; n = abs(n)
    if n < 8: return ret + n
    large = 8 + int(math.log(n / 8) / math.log(128 / 8) * 8)
    return ret + min(large, 15)
mism = [(r, b, ref(r)) for r, b in zip(range(-199, 200), buckets) if b != ref(r)]
print("bucket mismatches vs f64 reference:", mism)

with open(os.path.join(OUT, "expected.json"), "w") as f:
    json.dump({"inputs": inputs, "states": states, "buckets": {"from": -199, "values": buckets}}, f)
print("params:", len(sd), "state shapes:", [(len(s), len(s[0])) for s in states])
print("A tok0[:4]:", states[0][0][:4])
