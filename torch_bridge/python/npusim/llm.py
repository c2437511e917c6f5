"""npusim.llm: a language model's step over a static KV cache, in the form a
deployment package takes (npusim.export): T tokens and their positions in, the
logits out, the cache kept in the module's buffers and written back with
index_copy_, so that torch.export records it as the package's state.

    step = npusim.llm.DecodeStep(model, max_len=256)      # a transformers Llama, Mistral or Qwen2
    decode = torch.export.export(step, (), {"input_ids": torch.zeros(1, 1, dtype=torch.long),
                                            "cache_position": torch.tensor([0])})
    prefill = torch.export.export(step, (), {"input_ids": torch.zeros(1, 16, dtype=torch.long),
                                             "cache_position": torch.arange(16)})
    npusim.export.compile({"prefill": prefill, "decode": decode}, "llama.npupkg")
    # npu-run llama.npupkg --generate 16 --prompt 15,3,7

The same step exported at T = 1 is the decode method and at T = P the prefill
method (P tokens a run); in one package the two share the weights and the cache.
The step computes what transformers' model computes (RMS norms, rotary
positions, grouped-query attention over the cache with a causal mask, SwiGLU),
from the model's own weights, and gives the same greedy tokens as model.generate
(the tests check it). What it takes: a decoder of the Llama family
(model.model.layers with self_attn.{q,k,v,o}_proj and mlp.{gate,up,down}_proj),
rotary positions of the default kind (no rope scaling), no sliding window,
batch 1.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["DecodeStep"]


class DecodeStep(nn.Module):
    """model's next-token logits [1, T, V] for tokens `input_ids` [1, T] at positions `cache_position` [T],
    attending to the cache of earlier positions (max_len of them) and writing its own keys and values there."""

    def __init__(self, model: nn.Module, max_len: int):
        super().__init__()
        config = model.config
        rope = dict(getattr(config, "rope_parameters", None) or {})
        rope_type = rope.get("rope_type", "default")
        if rope_type != "default":
            raise ValueError(f"npusim.llm.DecodeStep: rotary positions of kind {rope_type!r} are not supported (only 'default')")
        if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True) and config.sliding_window < max_len:
            raise ValueError("npusim.llm.DecodeStep: a sliding window shorter than max_len is not supported")
        if max_len < 1:
            raise ValueError("npusim.llm.DecodeStep: max_len must be positive")
        self.model = model
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.eps = config.rms_norm_eps
        theta = rope.get("rope_theta", getattr(config, "rope_theta", 10000.0))
        inverse = 1.0 / theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim)
        angles = torch.outer(torch.arange(max_len, dtype=torch.float32), inverse)
        angles = torch.cat([angles, angles], -1)
        dtype = next(model.parameters()).dtype
        self.register_buffer("cos", angles.cos().to(dtype), persistent=False)
        self.register_buffer("sin", angles.sin().to(dtype), persistent=False)
        self.register_buffer("positions", torch.arange(max_len), persistent=False)
        for i in range(config.num_hidden_layers):
            self.register_buffer(f"keys{i}", torch.zeros(1, self.kv_heads, max_len, self.head_dim, dtype=dtype), persistent=False)
            self.register_buffer(f"values{i}", torch.zeros(1, self.kv_heads, max_len, self.head_dim, dtype=dtype), persistent=False)

    def _rms_norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        # As transformers' LlamaRMSNorm: in f32, rounded to the input's dtype before the weight.
        x32 = x.float()
        return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)

    @staticmethod
    def _rotate_half(x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return torch.cat([-x[..., half:], x[..., :half]], -1)

    def forward(self, input_ids: torch.Tensor, cache_position: torch.Tensor) -> torch.Tensor:
        decoder = self.model.model
        t = input_ids.shape[1]
        x = decoder.embed_tokens(input_ids)
        cos = self.cos.index_select(0, cache_position)[None, None]
        sin = self.sin.index_select(0, cache_position)[None, None]
        # Key j is seen by the query at position p where j <= p (later slots hold nothing yet, or stale keys).
        mask = torch.where(self.positions[None, :] <= cache_position[:, None], 0.0, float("-inf")).to(x.dtype)[None, None]
        for i, layer in enumerate(decoder.layers):
            attention = layer.self_attn
            h = self._rms_norm(x, layer.input_layernorm.weight)
            q = attention.q_proj(h).view(1, t, self.heads, self.head_dim).transpose(1, 2)
            k = attention.k_proj(h).view(1, t, self.kv_heads, self.head_dim).transpose(1, 2)
            v = attention.v_proj(h).view(1, t, self.kv_heads, self.head_dim).transpose(1, 2)
            q = q * cos + self._rotate_half(q) * sin
            k = k * cos + self._rotate_half(k) * sin
            keys, values = getattr(self, f"keys{i}"), getattr(self, f"values{i}")
            keys.index_copy_(2, cache_position, k)
            values.index_copy_(2, cache_position, v)
            o = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=self.kv_heads != self.heads)
            x = x + attention.o_proj(o.transpose(1, 2).reshape(1, t, -1))
            h = self._rms_norm(x, layer.post_attention_layernorm.weight)
            mlp = layer.mlp
            x = x + mlp.down_proj(F.silu(mlp.gate_proj(h)) * mlp.up_proj(h))
        return self.model.lm_head(self._rms_norm(x, decoder.norm.weight))
