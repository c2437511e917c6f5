"""Popular architectures from transformers, in tiny configurations, forward and backward on the npu
against the CPU, with no CPU fallback. Each brought an op the chip lacked until it ran here: T5's
int64 position buckets (float to int64, int64 abs and neg), BLOOM's ALiBi slopes (pow of two
tensors), Falcon's x[..., [-2], :] (indexing after whole dims, and its gradient), CLIP's end token
(argmax of int64 ids), wav2vec2's weight-normalized convolution, the layer norms that Whisper,
wav2vec2, ConvNeXt and Swin take over rows that are not contiguous, Mixtral's routing (a sort of
expert ids, an integer histc, an int32 cumsum, torch.mm into slices), DeBERTa's int64 sign, and
BEiT's relative position index built on the CPU, and VideoMAE's 3-D convolution.

Tolerance: outputs rtol/atol 1e-4, gradients 1e-3 of each parameter's largest (several layers of
f32 kernels whose sums group differently from the CPU's).
"""
import pytest
import torch

import npusim  # noqa: F401

transformers = pytest.importorskip("transformers")  # installed by scripts/setup.sh
transformers.utils.logging.set_verbosity_error()
T = transformers
NPU = torch.device("npu")


def fallbacks_since(before):
    return {name: n - before.get(name, 0) for name, n in npusim.fallback_stats().items() if n != before.get(name, 0)}


def tokens(n=12):
    return {"input_ids": torch.randint(0, 100, (2, n))}


def image():
    return {"pixel_values": torch.randn(2, 3, 32, 32)}


MODELS = {
    "t5": (lambda: T.T5ForConditionalGeneration(T.T5Config(vocab_size=100, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                                                           decoder_start_token_id=0)),
           lambda: {"input_ids": torch.randint(0, 100, (2, 12)), "decoder_input_ids": torch.randint(0, 100, (2, 7))}),
    "bloom": (lambda: T.BloomForCausalLM(T.BloomConfig(vocab_size=100, hidden_size=64, n_layer=2, n_head=4)), tokens),
    "falcon": (lambda: T.FalconForCausalLM(T.FalconConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4)), tokens),
    "clip_text": (lambda: T.CLIPTextModel(T.CLIPTextConfig(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                                         num_attention_heads=4, max_position_embeddings=32)), tokens),
    "wav2vec2": (lambda: T.Wav2Vec2Model(T.Wav2Vec2Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                                         conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                                                         num_conv_pos_embedding_groups=4)),
                 lambda: {"input_values": torch.randn(2, 1600)}),
    "whisper": (lambda: T.WhisperForConditionalGeneration(T.WhisperConfig(
                    vocab_size=100, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                    encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=16, max_source_positions=50, max_target_positions=32,
                    decoder_start_token_id=0, pad_token_id=0)),
                lambda: {"input_features": torch.randn(2, 16, 100), "decoder_input_ids": torch.randint(0, 100, (2, 7))}),
    "convnext": (lambda: T.ConvNextModel(T.ConvNextConfig(num_channels=3, hidden_sizes=[16, 32], depths=[1, 1], num_stages=2)), image),
    "mixtral": (lambda: T.MixtralForCausalLM(T.MixtralConfig(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                                             num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                                                             num_experts_per_tok=2)), tokens),
    "deberta_v2": (lambda: T.DebertaV2ForMaskedLM(T.DebertaV2Config(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                                                     num_attention_heads=4, relative_attention=True, position_buckets=16,
                                                                     pos_att_type=["p2c", "c2p"])), tokens),
    "beit": (lambda: T.BeitModel(T.BeitConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=32,
                                              patch_size=8, use_relative_position_bias=True)), image),
    "videomae": (lambda: T.VideoMAEModel(T.VideoMAEConfig(image_size=32, patch_size=8, num_frames=4, tubelet_size=2, hidden_size=64,
                                                          num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)),
                 lambda: {"pixel_values": torch.randn(2, 4, 3, 32, 32)}),
    "swin": (lambda: T.SwinModel(T.SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4)), image),
}


def output_of(result):
    return result.logits if hasattr(result, "logits") else result.last_hidden_state


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_runs_forward_and_backward_as_on_the_cpu(name):
    make_model, make_inputs = MODELS[name]
    torch.manual_seed(0)
    cpu = make_model().eval()
    npu = make_model().eval()
    npu.load_state_dict(cpu.state_dict())
    npu = npu.to(NPU)
    inputs = make_inputs()
    before = dict(npusim.fallback_stats())
    got = output_of(npu(**{k: v.to(NPU) for k, v in inputs.items()}))
    # A random projection of the output as the loss: gradients of order one (a mean of squares of
    # normalized outputs has gradients near zero, all rounding).
    projection = torch.randn(got.shape, generator=torch.Generator().manual_seed(1))
    (got * projection.to(NPU)).sum().backward()
    assert fallbacks_since(before) == {}
    expected = output_of(cpu(**inputs))
    (expected * projection).sum().backward()
    torch.testing.assert_close(got.detach().cpu(), expected.detach(), rtol=1e-4, atol=1e-4)
    largest = max(p.grad.abs().max() for p in cpu.parameters() if p.grad is not None)
    for (parameter, p_cpu), p_npu in zip(cpu.named_parameters(), npu.parameters()):
        if p_cpu.grad is None:
            assert p_npu.grad is None, parameter
            continue
        # Relative to the parameter's largest gradient, or to a thousandth of the model's where that is
        # smaller: some gradients are zero but for rounding (a key projection's bias, which softmax ignores).
        scale = torch.maximum(p_cpu.grad.abs().max(), largest * 1e-3)
        torch.testing.assert_close(p_npu.grad.cpu() / scale, p_cpu.grad / scale, rtol=0, atol=1e-3, msg=parameter)


def test_a_llama_compiles_once_for_all_lengths_and_generates_with_two_compiles():
    """Grouped-query attention under dynamic shapes: the npu's choice of SDPA kernel reads the heads as
    SymInts (reading them as ints specialized the graph: one compile per sequence length, and
    generate() with a compiled forward compiled once per token)."""
    from npusim import backend

    torch.manual_seed(0)
    config = T.LlamaConfig(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, max_position_embeddings=64)
    cpu = T.LlamaForCausalLM(config).eval()
    npu = T.LlamaForCausalLM(config).eval()
    npu.load_state_dict(cpu.state_dict())
    npu.to(NPU)
    backend.clear_reports()
    torch._dynamo.reset()
    compiled = torch.compile(npu, backend="npu", dynamic=True)
    before = dict(npusim.fallback_stats())
    with torch.no_grad():
        for length in (5, 7, 9, 12):
            ids = torch.randint(0, 100, (1, length))
            torch.testing.assert_close(compiled(input_ids=ids.to(NPU)).logits.cpu(), cpu(input_ids=ids).logits, rtol=1e-4, atol=1e-4)
    assert len(backend.reports()) == 1
    backend.clear_reports()
    torch._dynamo.reset()
    npu.forward = torch.compile(npu.forward, backend="npu")
    ids = torch.randint(0, 100, (1, 6))
    with torch.no_grad():
        got = npu.generate(ids.to(NPU), max_new_tokens=6, do_sample=False, cache_implementation="static")
        want = cpu.generate(ids, max_new_tokens=6, do_sample=False, cache_implementation="static")
    assert torch.equal(got.cpu(), want)
    assert len(backend.reports()) <= 2  # prefill and decode
    assert fallbacks_since(before) == {}
