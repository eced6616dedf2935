"""What third-party code does, as data, one module per library (torch, transformers, peft,
trl, accelerate, deepspeed, timm, torchvision, mmcv / mmengine in `openmmlab`, open_clip,
Lightning, and Python's own), each fact with where it was read or measured; `combined`
gathers the facts that hold of several libraries at once, `third_party_signatures` the
`forward` signatures of library blocks by version, `fsdp_settings` what recipes' FSDP
settings mean. Add a library fact here, never as a branch in a rule."""
