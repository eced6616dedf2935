# timm models whose checkpointed blocks hold no BatchNorm, checkpointing off, a runtime architecture.
# timm models without BatchNorm in their checkpointed blocks, checkpointing turned
# off, and an architecture only known at runtime.

import argparse
import timm
from timm import create_model

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="resnet50")
args = parser.parse_args()
convnext = timm.create_model("convnext_tiny", pretrained=True)
convnext.set_grad_checkpointing(True)
resnet_gn = create_model("resnet50_gn")
resnet_gn.set_grad_checkpointing()
frozen = timm.create_model("resnet50")
frozen.set_grad_checkpointing(False)
chosen = timm.create_model(args.model)
chosen.set_grad_checkpointing(True)
