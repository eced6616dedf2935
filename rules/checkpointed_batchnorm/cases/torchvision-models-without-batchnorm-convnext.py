# torchvision models without BatchNorm: ConvNeXt (LayerNorm), ViT, plain VGG.

import torchvision
from torch.utils.checkpoint import checkpoint

convnext = torchvision.models.convnext_tiny(weights=None)
vit = torchvision.models.vit_b_16(weights=None)
vgg = torchvision.models.vgg16(weights=None)
x = checkpoint(convnext.features, x, use_reentrant=False)
y = checkpoint(vit.encoder, y, use_reentrant=False)
z = checkpoint(vgg.features, z, use_reentrant=False)
