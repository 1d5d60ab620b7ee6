"""Times torch's convolution on the layers of bench/conv_bench.cpp (float32,
one warm-up, median and best of R) at a given thread count, for the three
passes training runs: the forward (F.conv2d / F.conv1d, bias included), the
input's gradient and the weight's (aten.convolution_backward with one
output each, what autograd calls).

    /opt/shardc-venv/bin/python bench/conv_bench.py [THREADS] [REPEATS]
Prints one line per layer and pass: "<name>.<pass> <median ms> <best ms>".
"""
import sys
import time

import torch
import torch.nn.functional as F

LAYERS = [  # name, x, w, stride, padding, groups (as bench/conv_bench.cpp)
    ("resnet18_stem_7x7s2", (1, 3, 224, 224), (64, 3, 7, 7), 2, 3, 1),
    ("resnet18_layer1_3x3", (1, 64, 56, 56), (64, 64, 3, 3), 1, 1, 1),
    ("resnet18_layer4_3x3", (1, 512, 7, 7), (512, 512, 3, 3), 1, 1, 1),
    ("resnet50_1x1", (1, 256, 56, 56), (64, 256, 1, 1), 1, 0, 1),
    ("mobilenet_dw_3x3", (1, 144, 56, 56), (144, 1, 3, 3), 1, 1, 144),
    ("efficientnet_dw_5x5s2", (1, 240, 28, 28), (240, 1, 5, 5), 2, 2, 240),
    ("wav2vec2_conv0_k10s5", (1, 1, 16000), (512, 1, 10), 5, 0, 1),  # 1-d
    ("resnet18_b8_layer1_3x3", (8, 64, 16, 16), (64, 64, 3, 3), 1, 1, 1),
    ("resnet18_b8_layer3_3x3", (8, 256, 4, 4), (256, 256, 3, 3), 1, 1, 1),
    ("resnet18_b8_layer4_3x3", (8, 512, 2, 2), (512, 512, 3, 3), 1, 1, 1),
]


def timed(name, repeats, run):
    times = []
    for r in range(repeats + 1):
        t0 = time.perf_counter()
        run()
        t1 = time.perf_counter()
        if r:
            times.append((t1 - t0) * 1e3)
    times.sort()
    print(f"{name} {times[len(times) // 2]:.3f} {times[0]:.3f}")


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    torch.set_num_threads(threads)
    with torch.no_grad():
        for name, xs, ws, stride, pad, groups in LAYERS:
            x, w, b = torch.rand(xs) * 2 - 1, torch.rand(ws) * 2 - 1, torch.rand(ws[0]) * 2 - 1
            conv = F.conv1d if len(xs) == 3 else F.conv2d
            g = torch.rand(conv(x, w, b, stride=stride, padding=pad, groups=groups).shape) * 2 - 1
            dims = len(xs) - 2

            def backward(mask):
                return torch.ops.aten.convolution_backward(
                    g, x, w, None, [stride] * dims, [pad] * dims, [1] * dims, False,
                    [0] * dims, groups, mask)

            timed(name + ".fwd", repeats,
                  lambda: conv(x, w, b, stride=stride, padding=pad, groups=groups))
            if groups == 1:  # shardc's bench times the input gradient for groups 1
                timed(name + ".dgrad", repeats, lambda: backward([True, False, False]))
            timed(name + ".wgrad", repeats, lambda: backward([False, True, False]))


if __name__ == "__main__":
    main()
