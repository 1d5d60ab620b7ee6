"""timm models for the model zoo (bench/zoo.py): image models nobody on this
project wrote, built as their users build them (timm.create_model, no
downloaded weights), at the input size of their default pretrained config.
One model per family, the smallest, spanning the ATen patterns timm's
families use (docs/exporter.md): relative position tables read at constant
indices (BEiT, LeViT, EfficientFormer, Swin), weight standardization (BiT,
NFNet), sliding windows (HaloNet), LSTMs (Sequencer), nearest upsampling
(GhostNetV2), masked-unit attention (Hiera), norms without bias
(MetaFormer), a 3-d convolution over positions (LambdaNet), F.fold (VOLO), a
parameter written element by element in __init__ (ConViT), stages counted
with torch.unique in __init__ (RegNetY)."""


def timm_model(name):
    import timm
    return timm.create_model(name, pretrained=False)


# name -> input side (timm.get_pretrained_cfg(name).input_size; hard-coded so
# that reading this table does not import timm)
MODELS = {
    # convnets
    "resnet18": 224, "resnest14d": 224, "res2net50_14w_8s": 224, "skresnet18": 224,
    "resnetv2_50x1_bit": 224, "nfnet_l0": 224, "regnetz_b16": 224, "tresnet_m": 224,
    "dla34": 224, "dpn68": 224, "hrnet_w18_small": 224, "cspdarknet53": 256,
    "selecsls42b": 224, "ese_vovnet19b_dw": 224, "gernet_s": 224, "vgg11": 224,
    "repvgg_a0": 224, "mobileone_s0": 224, "xception41": 299, "densenet121": 224,
    "convnext_atto": 224, "rdnet_tiny": 224, "inception_next_tiny": 224,
    "hgnet_tiny": 224, "hgnetv2_b0": 224, "starnet_s050": 224, "mambaout_femto": 224,
    # mobile convnets
    "efficientnet_b0": 224, "tf_efficientnet_b0": 224, "mobilenetv3_large_100": 224,
    "mobilenetv4_conv_small": 224, "mnasnet_050": 224, "mixnet_s": 224, "lcnet_050": 224,
    "ghostnet_100": 224, "ghostnetv2_100": 224, "rexnet_100": 224, "repvit_m1": 224,
    "efficientvit_b0": 224, "efficientvit_m0": 224, "fastvit_t8": 256,
    # vision transformers
    "vit_tiny_patch16_224": 224, "deit_tiny_distilled_patch16_224": 224,
    "deit3_small_patch16_224": 224, "flexivit_small": 240, "beit_base_patch16_224": 224,
    "eva02_tiny_patch14_224": 224, "cait_xxs24_224": 224, "xcit_nano_12_p16_224": 224,
    "crossvit_tiny_240": 240, "tnt_s_patch16_224": 224, "pit_ti_224": 224,
    "visformer_tiny": 224, "levit_128s": 224, "efficientformer_l1": 224,
    "efficientformerv2_s0": 224, "tiny_vit_5m_224": 224,
    # hierarchical and hybrid transformers
    "swin_tiny_patch4_window7_224": 224, "pvt_v2_b0": 224, "twins_pcpvt_small": 224,
    "coat_lite_tiny": 224, "nest_tiny": 224, "davit_tiny": 224, "focalnet_tiny_srf": 224,
    "gcvit_xxtiny": 224, "nextvit_small": 224, "maxvit_nano_rw_256": 256,
    "coatnet_nano_rw_224": 224, "hiera_tiny_224": 224, "mobilevit_xxs": 256,
    "mobilevitv2_050": 256, "edgenext_xx_small": 256, "halonet26t": 256,
    "botnet26t_256": 256, "lambda_resnet26t": 256, "volo_d1_224": 224, "convit_tiny": 224,
    "regnety_002": 224,
    # MLPs, MetaFormers, RNNs
    "mixer_s16_224": 224, "resmlp_12_224": 224, "gmlp_ti16_224": 224,
    "poolformer_s12": 224, "caformer_s18": 224, "sequencer2d_s": 224,
}

ZOO = {"timm " + name: ("zoo_timm:timm_model", {"name": name}, {"x": [1, 3, side, side]})
       for name, side in MODELS.items()}
