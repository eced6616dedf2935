# An OpenMMLab config that checkpoints the backbone (`with_cp=True`) and sets `find_unused_parameters = True`.
# ckptlint-case: column=9
_base_ = ["../_base_/models/mask-rcnn_r50_fpn.py", "../_base_/default_runtime.py"]
model = dict(
    backbone=dict(
        type="ResNet",
        depth=101,
        with_cp=True,  # expect: CKPT006
        init_cfg=dict(type="Pretrained", checkpoint="torchvision://resnet101"),
    ),
)
find_unused_parameters = True
