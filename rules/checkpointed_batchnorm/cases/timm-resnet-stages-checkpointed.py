# A timm ResNet with its stages checkpointed.
# ckptlint-case: message-contains=timm's `resnet50.a1_in1k` checkpoint blocks that hold BatchNorm (timm/models/resnet.py)

import timm

model = timm.create_model("resnet50.a1_in1k", pretrained=True, num_classes=10)
model.set_grad_checkpointing()  # expect: CKPT010
