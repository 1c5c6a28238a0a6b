"""Small models for the exporter tests (factories in the form `file.py:FACTORY` takes)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def mlp(in_features=64, hidden=256, classes=10, batch=8):
    """Linear - GELU - Linear with cross-entropy targets (measure_pytorch.py's smoke MLP)."""
    model = nn.Sequential(nn.Linear(in_features, hidden), nn.GELU(), nn.Linear(hidden, classes))
    return model, {"x": torch.empty(batch, in_features), "y": torch.empty(batch, dtype=torch.long)}


class CausalSelfAttention(nn.Module):
    """GPT-2's attention: one fused QKV projection, heads split, causal softmax(QK^T / sqrt(d)) V."""

    def __init__(self, dim, heads, max_len, use_sdpa):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.attn_drop = nn.Dropout(0.1)
        self.use_sdpa = use_sdpa and hasattr(F, "scaled_dot_product_attention")
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)), persistent=False)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (t.view(b, n, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        if self.use_sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
            att = att.masked_fill(~self.mask[:n, :n], float("-inf"))
            att = self.attn_drop(F.softmax(att, dim=-1))
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(b, n, d)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, dim, heads, max_len, use_sdpa):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, max_len, use_sdpa)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim),
                                 nn.Dropout(0.1))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TinyGPT(nn.Module):
    """A GPT-2-like language model: token + position embeddings, pre-LN blocks, tied LM head."""

    def __init__(self, vocab=512, dim=64, heads=4, layers=2, max_len=32, use_sdpa=False):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(max_len, dim)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList(Block(dim, heads, max_len, use_sdpa) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, input_ids):
        n = input_ids.shape[1]
        pos = torch.arange(n, device=input_ids.device)
        x = self.drop(self.wte(input_ids) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def tiny_gpt(batch=2, seq=16, use_sdpa=False, layers=2):
    model = TinyGPT(layers=layers, use_sdpa=use_sdpa)
    ids = torch.empty(batch, seq, dtype=torch.long)
    return model, {"input_ids": ids, "labels": torch.empty(batch, seq, dtype=torch.long)}


class Cumulative(nn.Module):
    """Ops roofsim has no cost model for (lgamma and its backward digamma, erfinv) inside a module, after a
    scan it has one for."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 32)

    def forward(self, x):
        return torch.erfinv(torch.lgamma(torch.tanh(self.fc(x)).cumsum(dim=-1).abs() + 1.0) * 0.01)


def unknown_op(batch=4):
    model = nn.Sequential(nn.Linear(16, 32), Cumulative(), nn.Linear(32, 4))
    return model, {"x": torch.empty(batch, 16), "y": torch.empty(batch, dtype=torch.long)}


class Gate(nn.Module):
    """Data-dependent control flow: a Python `if` on a tensor's value."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        h = self.fc(x)
        if h.mean() > 0:
            return h.relu()
        return h


def data_dependent(batch=4):
    model = nn.Sequential(nn.Linear(16, 16), Gate(), nn.Linear(16, 4))
    return model, {"x": torch.empty(batch, 16), "y": torch.empty(batch, dtype=torch.long)}


class ConvNet(nn.Module):
    """Conv1d and grouped/dilated Conv2d with biases, GroupNorm, SiLU, avg pooling."""

    def __init__(self):
        super().__init__()
        self.conv1d = nn.Conv1d(4, 8, 3, padding=1)
        self.conv = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.gn = nn.GroupNorm(4, 16)
        self.act = nn.SiLU()
        self.dw = nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=16)
        self.pool = nn.AvgPool2d(2)
        self.head = nn.Linear(16 * 4 * 4 + 8 * 10, 5)

    def forward(self, img, seq):
        a = self.pool(self.dw(self.act(self.gn(self.conv(img)))))
        b = self.conv1d(seq)
        return self.head(torch.cat([a.flatten(1), b.flatten(1)], dim=1))


def convnet(batch=2):
    return ConvNet(), {"img": torch.empty(batch, 3, 16, 16), "seq": torch.empty(batch, 4, 10),
                       "y": torch.empty(batch, dtype=torch.long)}


def mha(batch=2, seq=8, dim=16, heads=2, need_weights=True):
    """nn.MultiheadAttention(x, x, x) (need_weights=True, PyTorch's default; False as torchvision's
    ViT calls it) and a LayerNorm."""
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.norm = nn.LayerNorm(dim)

        def forward(self, x):
            return self.norm(self.attn(x, x, x, need_weights=need_weights)[0])

    return Net(), {"x": torch.empty(batch, seq, dim)}


class MaskedEncoder(nn.Module):
    """Checks a default attention mask of ones by value, as transformers' encoders do."""

    def __init__(self, vocab=100, dim=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.attn = nn.MultiheadAttention(dim, 4, batch_first=True)
        self.head = nn.Linear(dim, 2)

    def forward(self, input_ids):
        mask = torch.ones(input_ids.shape, device=input_ids.device)
        if torch.all(mask == 1):  # no padding: no mask at all
            key_padding_mask = None
        else:
            key_padding_mask = mask == 0
        # transformers' packed-sequence check on position ids made by arange
        pos = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        diff = torch.diff(pos, prepend=pos[:, :1] - 1, dim=-1)
        assert bool(((diff != 1).cumsum(-1)[:, -1] == 0).all())
        keep = pos[pos >= 0]  # a boolean mask of known values: a data-dependent shape fake tensors can know
        assert keep.numel() == input_ids.shape[1]
        scale = torch.full((), 2.0, device=input_ids.device)
        x = self.emb(input_ids) * scale.item()
        x = self.attn(x, x, x, key_padding_mask=key_padding_mask, need_weights=False)[0]
        return self.head(x[:, 0])


def masked_encoder(batch=2, seq=8):
    return MaskedEncoder(), {"input_ids": torch.empty(batch, seq, dtype=torch.long),
                             "labels": torch.empty(batch, dtype=torch.long)}


class ConvBnDrop(nn.Module):
    """Conv2d - BatchNorm2d - ReLU - Dropout - Linear: the layers train() and eval() run differently."""

    def __init__(self, channels=8, size=8, classes=4):
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(channels)
        self.act = nn.ReLU()
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(channels * size * size, classes)

    def forward(self, x):
        return self.head(self.drop(self.act(self.bn(self.conv(x)))).flatten(1))


def conv_bn_dropout(batch=2, size=8):
    return ConvBnDrop(size=size), {"x": torch.empty(batch, 3, size, size), "y": torch.empty(batch, dtype=torch.long)}
