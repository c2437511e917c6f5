"""MobileNet-v3 (Large) classifies images through torch.compile on the simulated NPU.

The model is written here, block for block as torchvision's mobilenet_v3_large
(Howard et al., 2019: inverted residual blocks of a 1x1 expansion, a depthwise
3x3 or 5x5 convolution and a 1x1 projection, squeeze-and-excitation in some,
hardswish in the later half), because torchvision's wheel for torch 2.13.0 on
PyPI is a CUDA build that does not load against the CPU torch. Random
weights: nothing is downloaded.

    .venv/bin/python examples/torch/mobilenet.py [--image 224] [--batch 1] [--config base]

It compiles the model in eval mode, runs a random batch on the chip and on
the CPU, compares the logits, and prints device cycles and kernels.
"""
import argparse

import torch
from torch import nn
import torch.nn.functional as F


def _divisible(channels: float, divisor: int = 8) -> int:
    rounded = max(divisor, int(channels + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * channels else rounded


class SqueezeExcitation(nn.Module):
    def __init__(self, channels: int, squeezed: int):
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeezed, 1)
        self.fc2 = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x):
        scale = F.adaptive_avg_pool2d(x, 1)
        scale = F.hardsigmoid(self.fc2(F.relu(self.fc1(scale))))
        return x * scale


def _conv_bn(inp: int, out: int, kernel: int, stride: int = 1, groups: int = 1, activation=None):
    layers = [nn.Conv2d(inp, out, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False), nn.BatchNorm2d(out)]
    if activation is not None:
        layers.append(activation())
    return layers


class InvertedResidual(nn.Module):
    def __init__(self, inp: int, kernel: int, expanded: int, out: int, se: bool, hardswish: bool, stride: int):
        super().__init__()
        activation = nn.Hardswish if hardswish else nn.ReLU
        layers = []
        if expanded != inp:
            layers += _conv_bn(inp, expanded, 1, activation=activation)
        layers += _conv_bn(expanded, expanded, kernel, stride, groups=expanded, activation=activation)
        if se:
            layers.append(SqueezeExcitation(expanded, _divisible(expanded // 4)))
        layers += _conv_bn(expanded, out, 1)
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and inp == out

    def forward(self, x):
        y = self.block(x)
        return x + y if self.residual else y


# (kernel, expanded, out, squeeze-and-excitation, hardswish, stride): torchvision's mobilenet_v3_large.
LARGE = [(3, 16, 16, False, False, 1), (3, 64, 24, False, False, 2), (3, 72, 24, False, False, 1),
         (5, 72, 40, True, False, 2), (5, 120, 40, True, False, 1), (5, 120, 40, True, False, 1),
         (3, 240, 80, False, True, 2), (3, 200, 80, False, True, 1), (3, 184, 80, False, True, 1),
         (3, 184, 80, False, True, 1), (3, 480, 112, True, True, 1), (3, 672, 112, True, True, 1),
         (5, 672, 160, True, True, 2), (5, 960, 160, True, True, 1), (5, 960, 160, True, True, 1)]


class MobileNetV3(nn.Module):
    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers = _conv_bn(3, 16, 3, 2, activation=nn.Hardswish)
        inp = 16
        for kernel, expanded, out, se, hardswish, stride in LARGE:
            layers.append(InvertedResidual(inp, kernel, expanded, out, se, hardswish, stride))
            inp = out
        layers += _conv_bn(inp, 6 * inp, 1, activation=nn.Hardswish)
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(6 * inp, 1280), nn.Hardswish(), nn.Linear(1280, num_classes))

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), 1).flatten(1)
        return self.classifier(x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", type=int, default=224)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--config", default="base")
    args = parser.parse_args()
    import npusim
    npusim.init(config=args.config)
    torch.manual_seed(0)
    model = MobileNetV3().eval()
    images = torch.randn(args.batch, 3, args.image, args.image)
    with torch.no_grad():
        expected = model(images)
        compiled = torch.compile(model.to("npu"), backend="npu", fullgraph=True)
        compiled(images.to("npu"))
        with npusim.profile() as prof:
            got = compiled(images.to("npu")).cpu()
    error = (got - expected).abs().max().item() / expected.abs().max().item()
    print(f"MobileNet-v3 Large, {args.batch}x3x{args.image}x{args.image} on {args.config}: largest error {error:.2e} of the largest logit")
    print(prof.table())


if __name__ == "__main__":
    main()
