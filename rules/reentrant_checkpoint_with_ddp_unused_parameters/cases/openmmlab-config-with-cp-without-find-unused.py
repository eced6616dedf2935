# `with_cp=True` without `find_unused_parameters`: not reported.
_base_ = ["../_base_/models/mask-rcnn_r50_fpn.py"]
model = dict(backbone=dict(type="ResNet", depth=101, with_cp=True))
find_unused_parameters = False
