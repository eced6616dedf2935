# A torchvision ResNet's stage: BatchNorm in every block.
# ckptlint-case: column=5
# ckptlint-case: message-contains=torchvision.models.resnet50().layer3: BatchNorm inside

from torch.utils.checkpoint import checkpoint
from torchvision.models import resnet50

backbone = resnet50(weights=None)
x = checkpoint(backbone.layer3, x, use_reentrant=False)  # expect: CKPT010
