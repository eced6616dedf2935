# The OpenMMLab `with_cp` idiom over norm layers built from `norm_cfg`.
# ckptlint-case: column=20
# ckptlint-case: message-contains=Block.conv -> ConvModule.norm -> (torch.nn.SyncBatchNorm)

import torch.utils.checkpoint as cp
from mmcv.cnn import ConvModule, build_norm_layer
from torch import nn

class Block(nn.Module):
    def __init__(self, channels, with_cp=False, norm_cfg=dict(type="SyncBN", requires_grad=True)):
        super().__init__()
        self.conv = ConvModule(channels, channels, 3, padding=1, norm_cfg=norm_cfg)
        self.norm_name, norm = build_norm_layer(norm_cfg, channels, postfix=1)
        self.add_module(self.norm_name, norm)
        self.with_cp = with_cp

    @property
    def norm(self):
        return getattr(self, self.norm_name)

    def forward(self, x):
        def _inner_forward(x):
            return self.norm(self.conv(x))

        if self.with_cp and x.requires_grad:
            return cp.checkpoint(_inner_forward, x, use_reentrant=False)  # expect: CKPT010
        return _inner_forward(x)
