"""ResNet-18 classifies images through torch.compile on the simulated NPU.

The model is written here, layer for layer as torchvision's resnet18 (He et
al., 2015: a 7x7 stem, max pooling, four stages of two basic blocks, global
average pooling, a linear classifier), because torchvision's wheel for
torch 2.13.0 on PyPI is a CUDA build that does not load against the CPU
torch. `width` scales every stage's channels (64 is ResNet-18 itself).
Random weights: nothing is downloaded.

    .venv/bin/python examples/torch/resnet.py [--width 64] [--image 224] [--batch 1] [--dtype f32|bf16] [--config base] [--trace resnet.pftrace]

It compiles the model (eval mode: batch norm uses its running statistics)
with torch.compile(backend="npu", fullgraph=True), runs a random batch on the
chip and on the CPU, compares the logits, and prints device cycles, per-op
time and the CPU fallbacks (there should be none).
"""
import argparse
import time

import torch
from torch import nn


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and a residual connection."""

    def __init__(self, inplanes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    def __init__(self, num_classes: int = 1000, width: int = 64):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        stages, inplanes = [], width
        for i, stride in enumerate((1, 2, 2, 2)):
            planes = width * 2**i
            stages.append(nn.Sequential(BasicBlock(inplanes, planes, stride), BasicBlock(planes, planes)))
            inplanes = planes
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(inplanes, num_classes)
        for m in self.modules():  # torchvision's initialization
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def randomize_batch_norm(model: nn.Module, seed: int = 0) -> None:
    """Running statistics and affine parameters as a trained network has them (not 0 and 1), so that eval-mode batch norm is tested."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(c, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(c, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(c, generator=g) * 0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=64, help="channels of the first stage (64: ResNet-18)")
    parser.add_argument("--image", type=int, default=224, help="image height and width")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--dtype", choices=("f32", "bf16"), default="f32",
                        help="the model's and the image's dtype on the chip (the CPU reference stays f32)")
    parser.add_argument("--config", default="base", help="chip preset or config file")
    parser.add_argument("--trace", default=None, help="write a Perfetto (.pftrace) or Chrome JSON (.json) trace of the chip and the driver "
                        "for the timed run (npu-trace reads it)")
    args = parser.parse_args()

    import npusim

    npusim.init(args.config)
    torch.manual_seed(0)
    model = ResNet18(args.classes, args.width).eval()
    randomize_batch_norm(model)
    images = torch.randn(args.batch, 3, args.image, args.image)
    start = time.perf_counter()
    with torch.no_grad():
        expected = model(images)
    cpu_s = time.perf_counter() - start

    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    model = model.to(dtype).to("npu")
    compiled = torch.compile(model, backend="npu", fullgraph=True)
    with torch.no_grad():
        start = time.perf_counter()
        compiled(images.to(dtype).to("npu")).cpu()  # compiles
        compile_s = time.perf_counter() - start
        start = time.perf_counter()
        with npusim.profile(args.trace or "") as prof:
            logits = compiled(images.to(dtype).to("npu")).cpu().float()
        npu_s = time.perf_counter() - start
    print(prof.table())
    err = (logits - expected).abs().max().item()
    scale = expected.abs().max().item()
    print(f"ResNet-18 (width {args.width}, {args.dtype}) on {args.config}, batch {args.batch}, {args.image}x{args.image}")
    print(f"  logits max |npu - cpu| = {err:.3g} (of max |logit| {scale:.3g}); top-1 agree: {bool((logits.argmax(-1) == expected.argmax(-1)).all())}")
    print(f"  device cycles {prof.device_cycles:,}; wall: npu {npu_s:.2f} s, cpu eager {cpu_s * 1e3:.1f} ms, compile (first call) {compile_s:.1f} s")
    print(f"  CPU fallbacks: {npusim.fallback_stats() or 'none'}")
    if args.trace:
        print(f"  trace: {args.trace} (open it at https://ui.perfetto.dev)")
    # bf16 keeps 8 bits of mantissa through 20 layers: its logits are within a few percent of f32's.
    tolerance = 1e-3 if args.dtype == "f32" else 5e-2
    if err > tolerance * max(scale, 1.0) or npusim.fallback_stats():
        raise SystemExit("the npu's logits differ from the CPU's, or ops fell back to the CPU")


if __name__ == "__main__":
    main()
