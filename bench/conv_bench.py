"""Times torch's F.conv2d (F.conv1d for 3-d inputs) on the layers of bench/conv_bench.cpp (float32,
bias, one warm-up, median of R) at a given thread count.

    /opt/shardc-venv/bin/python bench/conv_bench.py [THREADS] [REPEATS]
Prints one line per layer: "<name> <median ms>".
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
]


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    torch.set_num_threads(threads)
    with torch.no_grad():
        for name, xs, ws, stride, pad, groups in LAYERS:
            x, w, b = torch.rand(xs) * 2 - 1, torch.rand(ws) * 2 - 1, torch.rand(ws[0]) * 2 - 1
            times = []
            for r in range(repeats + 1):
                t0 = time.perf_counter()
                conv = F.conv1d if len(xs) == 3 else F.conv2d
                conv(x, w, b, stride=stride, padding=pad, groups=groups)
                t1 = time.perf_counter()
                if r:
                    times.append((t1 - t0) * 1e3)
            times.sort()
            print(f"{name} {times[len(times) // 2]:.3f} {times[0]:.3f}")


if __name__ == "__main__":
    main()
