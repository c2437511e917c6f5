"""The model zoo: architectures from transformers in tiny configurations, each run on the npu as a new user
runs it and checked against the CPU, with NPUSIM_STRICT=1 (any CPU fallback is an error):
  - inference, eager and through torch.compile(backend="npu");
  - a training step through torch.compile: the loss, every parameter's gradient, and the parameters after
    an SGD step (dropout probabilities set to 0, so that both sides compute the same function);
  - for six of them, compiled inference under torch.autocast("npu", torch.bfloat16) against the CPU's f32
    result.
`pytest -m slow` runs the same at a larger size (hidden 256, 4 layers).

torchvision and timm are not in the zoo: torchvision's wheels for this torch are CUDA builds, and the
vision architectures they would add (ResNet, RegNet, ConvNeXt, ViT, DeiT) are here from transformers.

Tolerances: f32 outputs rtol/atol 1e-4 and gradients 1e-3 of each parameter's largest, as in
test_transformers_models.py (several layers of f32 kernels whose sums group differently from the CPU's);
bf16 autocast 6e-2 of the output's largest (bf16 operands, about 2^-8 each, over several layers).
"""
import copy

import pytest
import torch

import npusim

transformers = pytest.importorskip("transformers")  # installed by scripts/setup.sh
transformers.utils.logging.set_verbosity_error()
T = transformers
NPU = torch.device("npu")
SIZES = {"tiny": dict(hidden=64, layers=2), "small": dict(hidden=256, layers=4)}


def _lm(config_class, model_class, **extra):
    def build(hidden, layers):
        return model_class(config_class(vocab_size=100, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                                        num_attention_heads=4, max_position_embeddings=64, **extra))
    return build


def _tokens(n=12):
    return lambda: {"input_ids": torch.randint(0, 100, (2, n))}


def _image():
    return {"pixel_values": torch.randn(2, 3, 32, 32)}


# name: (model(hidden, layers), inputs(), bf16 autocast checked)
ZOO = {
    "llama": (_lm(T.LlamaConfig, T.LlamaForCausalLM, num_key_value_heads=2), _tokens(), True),
    "mistral": (_lm(T.MistralConfig, T.MistralForCausalLM, num_key_value_heads=2), _tokens(), False),
    "qwen2": (_lm(T.Qwen2Config, T.Qwen2ForCausalLM, num_key_value_heads=2), _tokens(), True),
    "gpt_neox": (_lm(T.GPTNeoXConfig, T.GPTNeoXForCausalLM), _tokens(), False),
    "phi": (_lm(T.PhiConfig, T.PhiForCausalLM), _tokens(), False),
    "mixtral": (_lm(T.MixtralConfig, T.MixtralForCausalLM, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2),
                _tokens(), False),
    "gpt2": (lambda h, n: T.GPT2LMHeadModel(T.GPT2Config(vocab_size=100, n_embd=h, n_layer=n, n_head=4, n_positions=64)), _tokens(), True),
    "bert": (_lm(T.BertConfig, T.BertForMaskedLM), _tokens(), True),
    "distilbert": (lambda h, n: T.DistilBertForMaskedLM(T.DistilBertConfig(vocab_size=100, dim=h, n_layers=n, n_heads=4, hidden_dim=2 * h,
                                                                           max_position_embeddings=64)), _tokens(), False),
    "t5": (lambda h, n: T.T5ForConditionalGeneration(T.T5Config(vocab_size=100, d_model=h, d_kv=h // 4, d_ff=2 * h, num_layers=n, num_heads=4,
                                                                decoder_start_token_id=0)),
           lambda: {"input_ids": torch.randint(0, 100, (2, 12)), "decoder_input_ids": torch.randint(0, 100, (2, 7))}, False),
    "bart": (lambda h, n: T.BartForConditionalGeneration(T.BartConfig(vocab_size=100, d_model=h, encoder_layers=n, decoder_layers=n,
                                                                      encoder_attention_heads=4, decoder_attention_heads=4,
                                                                      encoder_ffn_dim=2 * h, decoder_ffn_dim=2 * h, max_position_embeddings=64)),
             lambda: {"input_ids": torch.randint(0, 100, (2, 12)), "decoder_input_ids": torch.randint(0, 100, (2, 7))}, False),
    "whisper": (lambda h, n: T.WhisperForConditionalGeneration(T.WhisperConfig(
                    vocab_size=100, d_model=h, encoder_layers=n, decoder_layers=n, encoder_attention_heads=4, decoder_attention_heads=4,
                    encoder_ffn_dim=2 * h, decoder_ffn_dim=2 * h, num_mel_bins=16, max_source_positions=50, max_target_positions=32,
                    decoder_start_token_id=0, pad_token_id=0)),
                lambda: {"input_features": torch.randn(2, 16, 100), "decoder_input_ids": torch.randint(0, 100, (2, 7))}, False),
    "vit": (lambda h, n: T.ViTModel(T.ViTConfig(hidden_size=h, num_hidden_layers=n, num_attention_heads=4, intermediate_size=2 * h,
                                                image_size=32, patch_size=8)), _image, True),
    "deit": (lambda h, n: T.DeiTModel(T.DeiTConfig(hidden_size=h, num_hidden_layers=n, num_attention_heads=4, intermediate_size=2 * h,
                                                   image_size=32, patch_size=8)), _image, False),
    "resnet": (lambda h, n: T.ResNetModel(T.ResNetConfig(num_channels=3, embedding_size=h // 4, hidden_sizes=[h // 4, h // 2], depths=[1, n - 1],
                                                         layer_type="basic")), _image, True),
    "regnet": (lambda h, n: T.RegNetModel(T.RegNetConfig(num_channels=3, embedding_size=h // 4, hidden_sizes=[h // 4, h // 2], depths=[1, n - 1],
                                                         groups_width=8)), _image, False),
    "convnext": (lambda h, n: T.ConvNextModel(T.ConvNextConfig(num_channels=3, hidden_sizes=[h // 4, h // 2], depths=[1, n - 1], num_stages=2)),
                 _image, False),
}


def _without_dropout(model):
    """Every dropout probability of the config and the modules set to 0 (layer drop and drop path too)."""
    for key, value in list(vars(model.config).items()):
        if isinstance(value, float) and "drop" in key:
            setattr(model.config, key, 0.0)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        if hasattr(module, "dropout") and isinstance(module.dropout, float):
            module.dropout = 0.0
    return model


def _pair(name, size, monkeypatch, training):
    """The model on the CPU and a copy on the npu (in training or eval mode), its inputs, NPUSIM_STRICT=1
    set and Dynamo's caches emptied."""
    monkeypatch.setenv("NPUSIM_STRICT", "1")
    torch._dynamo.reset()
    build, inputs, _ = ZOO[name]
    torch.manual_seed(0)
    cpu = _without_dropout(build(SIZES[size]["hidden"], SIZES[size]["layers"])).train(training)
    npu = copy.deepcopy(cpu).to(NPU)
    torch.manual_seed(1)
    return cpu, npu, inputs()


def _output(result):
    for field in ("logits", "last_hidden_state"):
        if getattr(result, field, None) is not None:
            return getattr(result, field)
    return result[0]


def _close(got, want, relative, what, floor=1e-6):
    """Within `relative` of the reference's largest element, or of `floor` where that is smaller."""
    scale = max(want.abs().max().item() if want.numel() else 0.0, floor)
    torch.testing.assert_close(got, want, rtol=relative, atol=relative * scale, msg=what)


def _inference(name, size, monkeypatch):
    cpu, npu, inputs = _pair(name, size, monkeypatch, training=False)
    with torch.no_grad():
        want = _output(cpu(**inputs))
        on_device = {k: v.to(NPU) for k, v in inputs.items()}
        _close(_output(npu(**on_device)).cpu(), want, 1e-4, f"{name} eager")
        _close(_output(torch.compile(npu, backend="npu")(**on_device)).cpu(), want, 1e-4, f"{name} compiled")


def _training_step(name, size, monkeypatch):
    cpu, npu, inputs = _pair(name, size, monkeypatch, training=True)
    compiled = torch.compile(npu, backend="npu")
    # (SGD: an update linear in the gradient. Adam's would turn a gradient that is zero up to rounding, as a
    # key projection's bias has under softmax, into a full step of either sign.)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (cpu, npu)]
    # The loss: the output against a fixed random direction (a mean of squares would be constant through a
    # final layer norm, leaving every gradient before it zero up to rounding).
    direction = None
    losses = []
    for model, optimizer, device in ((cpu, optimizers[0], "cpu"), (compiled, optimizers[1], NPU)):
        out = _output(model(**{k: v.to(device) for k, v in inputs.items()}))
        if direction is None:
            direction = torch.randn(out.shape, generator=torch.Generator().manual_seed(2))
        loss = (out.float() * direction.to(device)).mean()
        loss.backward()
        losses.append(loss.detach().cpu())
    _close(losses[1], losses[0], 1e-4, f"{name} loss")
    # A gradient that is zero up to rounding (a class token's, through a final norm) is compared on the scale
    # of the model's largest gradient; a parameter the loss does not reach has none on the CPU and, compiled,
    # none or zeros.
    largest = max(p.grad.abs().max().item() for p in cpu.parameters() if p.grad is not None)
    for (pname, p_cpu), p_npu in zip(cpu.named_parameters(), npu.parameters()):
        if p_cpu.grad is None:
            assert p_npu.grad is None or not p_npu.grad.cpu().any(), pname
            continue
        _close(p_npu.grad.cpu(), p_cpu.grad, 1e-3, f"{name} {pname} gradient", floor=1e-3 * largest)
    for optimizer in optimizers:
        optimizer.step()
    for (pname, p_cpu), p_npu in zip(cpu.named_parameters(), npu.parameters()):
        _close(p_npu.detach().cpu(), p_cpu.detach(), 1e-4, f"{name} {pname} after the step")


def _autocast(name, size, monkeypatch):
    cpu, npu, inputs = _pair(name, size, monkeypatch, training=False)
    with torch.no_grad():
        want = _output(cpu(**inputs))
        with torch.autocast("npu", dtype=torch.bfloat16):
            got = _output(torch.compile(npu, backend="npu")(**{k: v.to(NPU) for k, v in inputs.items()}))
    scale = want.abs().max().item()
    torch.testing.assert_close(got.cpu().float(), want, rtol=0, atol=6e-2 * scale, msg=f"{name} under bf16 autocast")


AUTOCAST = sorted(name for name, (_, _, checked) in ZOO.items() if checked)


def test_the_zoo_is_large_enough():
    assert len(ZOO) >= 15 and len(AUTOCAST) >= 5


@pytest.mark.parametrize("name", sorted(ZOO))
def test_inference_eager_and_compiled(name, monkeypatch):
    _inference(name, "tiny", monkeypatch)


@pytest.mark.parametrize("name", sorted(ZOO))
def test_a_compiled_training_step(name, monkeypatch):
    _training_step(name, "tiny", monkeypatch)


@pytest.mark.parametrize("name", AUTOCAST)
def test_compiled_inference_under_bf16_autocast(name, monkeypatch):
    _autocast(name, "tiny", monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ZOO))
def test_larger_sizes(name, monkeypatch):
    """Skipped unless `pytest -m slow` (tests/python/conftest.py): at hidden 256 and 4 layers the zoo takes
    about 2 minutes more, which CI's budget keeps for the tiny sizes that check the same code paths."""
    _inference(name, "small", monkeypatch)
    _training_step(name, "small", monkeypatch)
    if name in AUTOCAST:
        _autocast(name, "small", monkeypatch)
