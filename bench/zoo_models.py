"""The model zoo's factories (bench/zoo.py): models nobody on this project
wrote, built as their users build them. Each entry: name -> (factory spec for
tools/export_torch.py, kwargs, input shapes)."""

import torch.nn as nn


def transformer_encoder(norm_first=False, batch_first=True):
    layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=batch_first,
                                       norm_first=norm_first)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)


def transformer_decoder(norm_first=False):
    layer = nn.TransformerDecoderLayer(256, 4, 1024, dropout=0.0, batch_first=True,
                                       norm_first=norm_first)
    return nn.TransformerDecoder(layer, 2)


def transformer():
    return nn.Transformer(256, 4, 2, 2, 1024, dropout=0.0, batch_first=True)


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(256, 4, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


def torchvision_model(name):
    import torchvision
    return torchvision.models.get_model(name, weights=None)


def torchvision_dense(name):
    """A segmentation, video or optical flow model of torchvision, untrained
    (no weights and, for segmentation, no pretrained backbone: nothing is
    downloaded)."""
    import torchvision
    seg = name in torchvision.models.list_models(module=torchvision.models.segmentation)
    kw = {"weights_backbone": None} if seg else {}
    return torchvision.models.get_model(name, weights=None, **kw)


def vit_tiny():
    """torchvision's VisionTransformer class at a CI size (vit_b_16 needs 224)."""
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                             hidden_dim=64, mlp_dim=128, num_classes=10)


def swin_tiny(v2=False):
    """torchvision's SwinTransformer class at a CI size: 32x32 input, patches
    of 4, windows of 4 (stage 1 at 8x8 has shifted windows and their mask,
    stage 2 at 4x4 one unshifted window), relative position bias, patch
    merging. v2: SwinTransformerBlockV2 (cosine attention, logit scale, the
    continuous position bias MLP)."""
    from torchvision.models.swin_transformer import (PatchMergingV2, SwinTransformer,
                                                     SwinTransformerBlockV2)
    extra = dict(block=SwinTransformerBlockV2, downsample_layer=PatchMergingV2) if v2 else {}
    return SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                           window_size=[4, 4], num_classes=10, **extra)


def wav2vec2_base():
    import torchaudio
    return torchaudio.models.wav2vec2_base()


def hubert_base():
    import torchaudio
    return torchaudio.models.hubert_base()


def wav2vec2_tiny():
    """torchaudio's wav2vec2 at a CI size: the same modules as wav2vec2_base
    (group-norm feature extractor, weight-normed grouped positional conv,
    post-norm transformer), two small conv layers and two encoder layers."""
    import torchaudio
    return torchaudio.models.wav2vec2_model(
        extractor_mode="group_norm", extractor_conv_layer_config=[(32, 10, 5), (32, 3, 2)],
        extractor_conv_bias=False, encoder_embed_dim=64, encoder_projection_dropout=0.0,
        encoder_pos_conv_kernel=16, encoder_pos_conv_groups=4, encoder_num_layers=2,
        encoder_num_heads=2, encoder_attention_dropout=0.0, encoder_ff_interm_features=128,
        encoder_ff_interm_dropout=0.0, encoder_dropout=0.0, encoder_layer_norm_first=False,
        encoder_layer_drop=0.0, aux_num_out=None)


def conformer():
    """torchaudio's Conformer at a small size; forward(input, lengths)."""
    import torchaudio
    return torchaudio.models.Conformer(input_dim=80, num_heads=4, ffn_dim=128, num_layers=2,
                                       depthwise_conv_kernel_size=31)


SEQ = {"src": [2, 64, 256]}
ZOO = {
    "nn.TransformerEncoder": ("zoo_models:transformer_encoder", {}, SEQ),
    "nn.TransformerEncoder norm_first": ("zoo_models:transformer_encoder",
                                         {"norm_first": True}, SEQ),
    "nn.TransformerEncoder seq-first": ("zoo_models:transformer_encoder",
                                        {"batch_first": False}, {"src": [64, 2, 256]}),
    "nn.TransformerDecoder": ("zoo_models:transformer_decoder", {},
                              {"tgt": [2, 64, 256], "memory": [2, 64, 256]}),
    "nn.Transformer": ("zoo_models:transformer", {},
                       {"src": [2, 64, 256], "tgt": [2, 64, 256]}),
    "nn.MultiheadAttention": ("zoo_models:SelfAttention", {}, {"x": [2, 64, 256]}),
    "torchvision resnet18": ("zoo_models:torchvision_model", {"name": "resnet18"},
                             {"x": [1, 3, 64, 64]}),
    "torchvision mobilenet_v3_small": ("zoo_models:torchvision_model",
                                       {"name": "mobilenet_v3_small"}, {"x": [1, 3, 64, 64]}),
    "torchvision vit_b_16": ("zoo_models:torchvision_model", {"name": "vit_b_16"},
                             {"x": [1, 3, 224, 224]}),
    "torchvision VisionTransformer tiny": ("zoo_models:vit_tiny", {}, {"x": [2, 3, 32, 32]}),
    "torchvision SwinTransformer tiny": ("zoo_models:swin_tiny", {}, {"x": [2, 3, 32, 32]}),
    "torchvision SwinTransformer v2 tiny": ("zoo_models:swin_tiny", {"v2": True},
                                            {"x": [2, 3, 32, 32]}),
}
# Every torchvision classifier (list_models on torchvision.models itself: no
# detection, segmentation, video, quantization or optical flow), each at the
# smallest input its architecture accepts: 64x64 for the convnets (their
# adaptive pooling takes any map), the fixed image_size (224) for ViT, MaxViT's
# and Swin's 224 (window partitions of 7 at every stage), Inception v3's 299.
def classifier_input(name):
    if name.startswith(("vit_", "swin_", "maxvit_")):
        return 224
    if name == "inception_v3":
        return 299
    return 64


def torchvision_classifiers():
    import torchvision
    return torchvision.models.list_models(module=torchvision.models)


for _name in torchvision_classifiers():
    _side = classifier_input(_name)
    ZOO["torchvision " + _name] = ("zoo_models:torchvision_model", {"name": _name},
                                   {"x": [1, 3, _side, _side]})
# torchvision's segmentation models (outputs "out" and, for FCN and DeepLabV3,
# "aux": both are checked) at 64x64 (ASPP's dilations of 12-36 on an 8x8 map
# are padded convolutions like any other), and its video classifiers on 8 or
# 16 frames: the ResNet (2+1)-d / 3-d models and Swin3D take any clip (adaptive
# pooling, padded windows), S3D's last pooling needs 16 x 224 x 224, MViT's
# positional encodings fix its clip at 16 x 224 x 224.
for _name in ("fcn_resnet50", "fcn_resnet101", "deeplabv3_resnet50", "deeplabv3_resnet101",
              "deeplabv3_mobilenet_v3_large"):
    ZOO["torchvision " + _name] = ("zoo_models:torchvision_dense", {"name": _name},
                                   {"x": [1, 3, 64, 64]})
ZOO["torchvision lraspp_mobilenet_v3_large"] = (
    "zoo_models:torchvision_dense", {"name": "lraspp_mobilenet_v3_large"},
    {"input": [1, 3, 64, 64]})
for _name, _clip in (("r3d_18", [1, 3, 8, 112, 112]), ("mc3_18", [1, 3, 8, 112, 112]),
                     ("r2plus1d_18", [1, 3, 8, 112, 112]), ("s3d", [1, 3, 16, 224, 224]),
                     ("mvit_v1_b", [1, 3, 16, 224, 224]), ("mvit_v2_s", [1, 3, 16, 224, 224]),
                     ("swin3d_t", [1, 3, 8, 112, 112]), ("swin3d_s", [1, 3, 8, 112, 112]),
                     ("swin3d_b", [1, 3, 8, 112, 112])):
    ZOO["torchvision " + _name] = ("zoo_models:torchvision_dense", {"name": _name},
                                   {"x": _clip})
# torchvision's optical flow models (both of list_models(module=
# torchvision.models.optical_flow)): two frames at 128x128 (their 1/8
# resolution feature maps are 16x16, the correlation pyramid's 4 levels
# 16 down to 2), 12 flow updates each, every update's flow an output.
# The correlation lookup is grid_sample (docs/ops.md).
for _name in ("raft_small", "raft_large"):
    ZOO["torchvision " + _name] = ("zoo_models:torchvision_dense", {"name": _name},
                                   {"image1": [1, 3, 128, 128], "image2": [1, 3, 128, 128]})
ZOO.update({
    "torchaudio wav2vec2_base": ("zoo_models:wav2vec2_base", {},
                                 {"waveforms": [1, 16000]}),
    "torchaudio hubert_base": ("zoo_models:hubert_base", {}, {"waveforms": [1, 16000]}),
    "torchaudio Conformer": ("zoo_models:conformer", {},
                             # lengths decide the padding mask in Python (.item()):
                             # the graph is specialised on these (docs/exporter.md)
                             {"input": [2, 50, 80], "lengths": {"shape": [2], "dtype": "int64",
                                                               "value": [50, 37]}}),
    "torchaudio wav2vec2 tiny": ("zoo_models:wav2vec2_tiny", {}, {"waveforms": [2, 1600]}),
})

# Hugging Face transformers architectures from small configs (bench/zoo_hf.py).
import zoo_hf  # noqa: E402
ZOO.update(zoo_hf.ZOO)

# timm's image models, one per family (bench/zoo_timm.py).
import zoo_timm  # noqa: E402
ZOO.update(zoo_timm.ZOO)

# The fast subset CI runs (test/lit/models/zoo-ci.test: bench/zoo.py --ci).
# Fourteen models spanning convnets (plain, depthwise, grouped/shuffled, squeeze-
# excite), a ViT and a Swin (shifted windows: roll, window mask as constant
# data, relative position bias as as_strided), torch.nn's transformer modules,
# Hugging Face decoders and an encoder, and torchaudio's wav2vec2; each small
# enough that the whole subset takes a few minutes.
CI = ["nn.TransformerEncoder", "nn.MultiheadAttention", "torchvision resnet18",
      "torchvision mobilenet_v3_small", "torchvision VisionTransformer tiny",
      "torchvision SwinTransformer tiny",
      "torchvision squeezenet1_0", "torchvision shufflenet_v2_x0_5",
      "torchvision efficientnet_b0", "HF GPT-2", "HF Llama", "HF Qwen2", "HF BERT",
      # torchaudio: wav2vec2's modules (weight-normed grouped conv, group norm)
      "torchaudio wav2vec2 tiny"]
